"""cuDNN's per-gate weight layout as the reference reads it
(check.reference.params_from_arrays), anchored on models cuDNN trained: the shipped character
models were trained in cuDNN's weight space and saved with PyTorch's names, whose stacked
rows are cuDNN's linLayerIDs in order (PyTorch hands its flat weights to cuDNN as they are:
weight_ih gate block k is linLayerID k, weight_hh block k is gates + k). Read back by
linLayerID, a model must predict as it does through its state_dict, and predict well: a
gate read from the wrong place is another network. On a GPU, tests/test_gpu_flow.py checks
the layout against cuDNN's own outputs."""
import numpy as np
import pytest

from cudnn_rnn.bindings.enums import RNNMode
from cudnn_rnn.charlm import corpus, network
from cudnn_rnn.charlm.files import read_weights
from cudnn_rnn.check import reference


def cudnn_arrays(state: dict, cfg) -> dict:
    """The weight entries by (pseudo_layer, lin_id, kind), cut from the state_dict's rows."""
    H, g = cfg.hidden_size, cfg.gates
    arrays = {}
    for layer in range(cfg.num_layers):  # the shipped models are unidirectional
        for first, matrix, bias in ((0, "weight_ih", "bias_ih"), (g, "weight_hh", "bias_hh")):
            for k in range(g):
                rows = slice(k * H, (k + 1) * H)
                arrays[(layer, first + k, "matrix")] = state[f"rnn.{matrix}_l{layer}"][rows]
                arrays[(layer, first + k, "bias")] = state[f"rnn.{bias}_l{layer}"][rows]
    return arrays


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_a_model_cudnn_trained_reads_back_gate_for_gate(cell):
    path = network.shipped(cell)
    model = network.load(path)
    inputs, targets = (a[:64, :16] for a in corpus.batch(  # a corner of the held-out batch
        network.slice_codes("heldout"), network.EVAL_SEQ, network.EVAL_BATCH))
    cfg = model.rnn.config(64, 16)
    assert cfg.mode == {"lstm": RNNMode.LSTM, "gru": RNNMode.GRU}[cell] and cfg.dirs == 1
    state = {k: v.astype(np.float64) for k, v in read_weights(path, keep=("meta",)).items()
             if k.startswith("rnn.")}
    as_loaded = network.evaluate(network.reference_logits(model, inputs), targets)
    model.rnn.params = reference.params_from_arrays(cfg, cudnn_arrays(state, cfg))
    read_back = network.evaluate(network.reference_logits(model, inputs), targets)
    assert read_back["bpc"] == pytest.approx(as_loaded["bpc"], rel=1e-12)
    assert read_back["bpc"] < 2.0  # a trained model (uniform guessing: log2(98) = 6.6 bits)
