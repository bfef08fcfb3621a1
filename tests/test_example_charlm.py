"""examples/charlm.py's own arithmetic, on the CPU: the shipped model loaded into torch.nn
modules and its held-out bits per character computed as the example prints them, against
the precision table's float64 reference of the same batch (the committed H200 run). The
accelerated runs themselves need a GPU (the example, and tests/test_gpu_torch.py)."""
import importlib.util
import json
from pathlib import Path

import pytest

from cudnn_rnn.charlm import corpus, network

torch = pytest.importorskip("torch", reason="the example builds torch.nn modules")
ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("charlm_example", ROOT / "examples" / "charlm.py")
example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(example)


@pytest.mark.parametrize("name,table", [("lstm", "precision.json"), ("gru", "precision-gru.json")])
def test_the_examples_modules_give_the_tables_bits_per_character(name, table):
    model = network.load(network.shipped(name))
    embedding, rnn, decoder = example.torch_modules(model, torch, device="cpu")
    held_in, held_next = corpus.batch(network.slice_codes("heldout"), network.EVAL_SEQ,
                                      network.EVAL_BATCH)
    bpc = example.bits_per_char(rnn, embedding, decoder, torch.as_tensor(held_in).long(),
                                torch.as_tensor(held_next).long(), torch)
    run = json.loads((ROOT / "results" / "nvidia-h200" / "9.19.0" / table).read_text())
    reference = run["result"]["reference"]["bpc"]  # the table's float64 forward, same batch
    assert f"{bpc:.4f}" == f"{reference:.4f}"  # float32 torch.nn against float64: printed digits
    assert f"{reference:.4f}" == f"{model.meta['heldout']['bpc']:.4f}"
