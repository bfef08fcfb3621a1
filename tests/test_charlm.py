"""The shipped character models: their recorded figures, files, corpus and split (CPU)."""
import json

import numpy as np
import pytest

from cudnn_rnn.bindings.enums import RNNMode
from cudnn_rnn.charlm import corpus, network

CELLS = {"lstm": RNNMode.LSTM, "gru": RNNMode.GRU}


@pytest.fixture(scope="module")
def heldout():
    return corpus.batch(network.slice_codes("heldout"), network.EVAL_SEQ, network.EVAL_BATCH)


@pytest.mark.parametrize("cell", CELLS)
def test_the_float64_reference_reproduces_the_recorded_held_out_figures(cell, heldout):
    model = network.load(network.shipped(cell))
    inputs, targets = heldout
    got = network.evaluate(network.reference_logits(model, inputs), targets)
    recorded = model.meta["heldout"]
    # recorded on the H200 by the same reference on cupy; numpy sums in another order
    assert got["bpc"] == pytest.approx(recorded["bpc"], rel=1e-9)
    assert got["top1"] == recorded["top1"] and got["predictions"] == recorded["predictions"]
    # a trained model, not a guess: uniform over the vocabulary is log2(98) = 6.6 bits
    assert got["bpc"] < 2.0 and got["top1"] > 0.6
    assert model.rnn.mode == CELLS[cell] and model.vocab == len(corpus.VOCAB)
    assert model.meta["vocab"] == corpus.VOCAB


@pytest.mark.parametrize("cell", CELLS)
def test_the_training_log_and_provenance_ship_with_the_weights(cell):
    model = network.load(network.shipped(cell))
    lines = [json.loads(x) for x in
             (network.MODELS / f"{cell}-training.log").read_text().splitlines()]
    head, steps, tail = lines[0], [x for x in lines if "step" in x], lines[-1]
    assert head["command"] == "python -m cudnn_rnn.train --out cudnn_rnn/data/charlm"
    assert head["settings"] == model.meta["settings"]
    assert steps[-1] == model.meta["training"]["last"] and steps[-1]["step"] == head["settings"]["steps"]
    assert steps[-1]["train_bpc"] < steps[0]["train_bpc"] / 2
    assert tail["heldout"] == model.meta["heldout"]
    prov = model.meta["provenance"]
    for key in ("gpu", "compute_capability", "driver_version", "cudnn_version", "library_path",
                "commit", "command", "date"):
        assert prov.get(key), key
    assert model.meta["corpus"]["heldout_files"] > 0 and model.meta["corpus"]["train_files"] > 0


def test_the_shipped_files_fit_the_size_limit_and_slices_fit_their_batches():
    weights = sum(p.stat().st_size for p in network.MODELS.glob("*.npz"))
    assert 0 < weights <= 10 * 1000 * 1000
    assert network.slice_codes("heldout").size == network.EVAL_BATCH * (network.EVAL_SEQ + 1)
    cal = network.slice_codes("calibration")
    assert cal.size % (network.EVAL_SEQ + 1) == 0 and cal.size > 0


def test_the_split_is_a_property_of_the_file_name(tmp_path):
    for rel in ("json/decoder.py", "abc.py", "os.py", "heapq.py", "test/x.py", "a/test_y.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(f"# {rel}\n")
    assert corpus.source_files(tmp_path) == ["abc.py", "heapq.py", "json/decoder.py", "os.py"]
    text = corpus.load(tmp_path)
    # crc32 % 8: abc.py 0, heapq.py 0, json/decoder.py 7, os.py 7
    assert text.heldout_files == ["abc.py", "heapq.py"]
    assert text.train_files == ["json/decoder.py", "os.py"]
    assert text.train == "# json/decoder.py\n# os.py\n"
    (tmp_path / "abc.py").unlink()
    (tmp_path / "heapq.py").unlink()
    with pytest.raises(ValueError, match="no Python sources"):
        corpus.load(tmp_path)


def test_codes_cover_the_vocabulary_and_unknown_characters_map_to_zero():
    text = corpus.VOCAB[1:] + "é€"
    codes = corpus.encode(text)
    assert list(codes[:-2]) == list(range(1, len(corpus.VOCAB)))
    assert list(codes[-2:]) == [0, 0]
    assert corpus.decode(codes[:-2]) == corpus.VOCAB[1:]
    x, y = corpus.batch(np.arange(2 * 5), 4, 2)
    assert x.shape == y.shape == (4, 2) and (y[:-1] == x[1:]).all() and x[0, 1] == 5
    with pytest.raises(ValueError, match="need 11"):
        corpus.batch(np.arange(10), 4, 2, start=1)


def test_the_reference_on_held_values_is_rerun_only_where_storing_changes_a_value(heldout):
    from cudnn_rnn.bindings.enums import DataType
    from cudnn_rnn.charlm.table import held_values
    model = network.load(network.shipped("lstm"))
    x = network.embed(model, heldout[0][:, :4])
    assert held_values(model.rnn, x, DataType.FLOAT) is None  # trained in FP32: exact
    rnn, xq = held_values(model.rnn, x, DataType.HALF)
    assert not np.array_equal(xq, x) and np.abs(xq - x).max() < 1e-2
    w, w16 = model.rnn.params[0].W[0], rnn.params[0].W[0]
    assert not np.array_equal(w16, w) and np.array_equal(w16, w.astype(np.float16))
    assert rnn.mode == model.rnn.mode and rnn.hidden == model.rnn.hidden


def test_the_tables_rows_keep_their_ids_and_its_builder_names_the_dynamic_ones():
    """cudnn_row's ids are those of the committed H200 table (a report or a plan that reads
    them finds them), and the builder of run_table is named exactly the PERSIST_DYNAMIC ones
    among them, in the order the rows run, each with its row's configuration."""
    from cudnn_rnn.bindings.enums import RNNAlgo
    from cudnn_rnn.charlm.rows import cudnn_config, cudnn_id
    from cudnn_rnn.charlm.table import FLOAT_FAMILIES, dynamic_rows
    from cudnn_rnn.matrix.families import search_space
    from pathlib import Path
    committed = json.loads((Path(__file__).resolve().parent.parent / "results" / "nvidia-h200"
                            / "9.19.0" / "precision.json").read_text())["result"]["records"]
    ran = [c for f in FLOAT_FAMILIES for c in search_space(f)]
    assert [cudnn_id(c) for c in ran] == [r["id"] for r in committed if r["engine"] == "cuDNN"]
    rnn = network.load(network.shipped("lstm")).rnn
    got = dynamic_rows(rnn, 7, 3, FLOAT_FAMILIES)
    want = [c for c in ran if c[3] == RNNAlgo.PERSIST_DYNAMIC]
    assert [i for i, _ in got] == [cudnn_id(c) for c in want] and len(want) == 16
    for (_, cfg), c in zip(got, want):
        assert cfg == cudnn_config(rnn, 7, 3, c) and cfg.algo == RNNAlgo.PERSIST_DYNAMIC
        assert (cfg.seq_length, cfg.mini_batch, cfg.hidden_size) == (7, 3, rnn.hidden)


def test_an_eight_bit_output_need_not_be_nearer_its_twin_where_the_call_only_shows_the_state():
    """check_outputs: within the twin's bound, nearer the unquantized reference than the
    twin is refused as not shown to be the quantized network; with nearer_twin False (a
    call from a state of its own, after the first call showed it) it is not."""
    import numpy as np
    from cudnn_rnn.charlm.rows import check_outputs
    ref, twin = {"y": np.ones(8)}, {"y": np.full(8, 1.001)}
    out = {"y": np.full(8, 1.0004)}  # 4e-4 from the reference, 6e-4 from the twin
    _, why = check_outputs(out, ref, twin, 1e-2, "float64 twin")
    assert why and "not shown to compute the quantized network" in why
    facts, why = check_outputs(out, ref, twin, 1e-2, "float64 twin", nearer_twin=False)
    assert why is None and facts["errors_twin"]["y"] > facts["errors"]["y"]
    _, why = check_outputs({"y": np.full(8, 1.5)}, ref, twin, 1e-2, "float64 twin",
                           nearer_twin=False)
    assert why and "> bound" in why  # the bound still holds
