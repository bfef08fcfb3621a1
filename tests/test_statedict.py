"""A user's torch.nn module weights in cuDNN's layout: real modules' state_dicts (saved by
tools/torch_fixture.py on the H200 with PyTorch 2.11) through the float64 reference give
the modules' own outputs; wrong files and dicts are refused with what is wrong."""
import json
import re
import struct
from pathlib import Path

import numpy as np
import pytest

from cudnn_rnn.bindings.enums import RNNMode
from cudnn_rnn.charlm import files, statedict
from cudnn_rnn.charlm.statedict import BadModel
from cudnn_rnn.check import reference

FIX = Path(__file__).parent / "fixtures" / "torch-rnn"
FORMATS = ("npz", "safetensors", "pt")


def _load(name, fmt):
    if fmt == "pt":
        pytest.importorskip("torch", reason="reading .pt needs PyTorch")
    return files.read_weights(FIX / f"{name}.{fmt}")


def _outputs(rnn, x):
    cfg = rnn.config(*x.shape[:2])
    hx = np.zeros(cfg.h_shape())
    cx = np.zeros(cfg.c_shape()) if rnn.mode == RNNMode.LSTM else None
    return reference.forward(cfg, rnn.params, x.astype(np.float64), hx, cx)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_bidirectional_projected_lstm_maps_onto_cudnns_layout(fmt):
    rnn = statedict.from_state(_load("lstm", fmt))
    assert (rnn.mode, rnn.layers, rnn.hidden, rnn.proj, rnn.input_size, rnn.bidirectional) == \
        (RNNMode.LSTM, 2, 16, 8, 12, True)
    assert len(rnn.params) == 4 and all(p.P.shape == (8, 16) for p in rnn.params)
    x = np.load(FIX / "lstm-inputs.npy")
    want = np.load(FIX / "lstm-outputs.npz")
    got = _outputs(rnn, x)
    # torch's h_n of a projected LSTM is the projection's output, per layer and direction,
    # as cuDNN's hy; c_n its cell state
    for mine, theirs in ((got.y, want["y"]), (got.hy, want["h_n"]), (got.cy, want["c_n"])):
        assert mine.shape == theirs.shape
        np.testing.assert_allclose(mine, theirs, rtol=0, atol=1e-12)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_gru_maps_onto_cudnns_layout(fmt):
    rnn = statedict.from_state(_load("gru", fmt))
    assert (rnn.mode, rnn.layers, rnn.hidden, rnn.bidirectional) == (RNNMode.GRU, 1, 16, False)
    x = np.load(FIX / "gru-inputs.npy")
    want = np.load(FIX / "gru-outputs.npz")
    got = _outputs(rnn, x)
    np.testing.assert_allclose(got.y, want["y"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(got.hy, want["h_n"], rtol=0, atol=1e-12)


def test_the_three_formats_hold_the_same_tensors():
    a, b = _load("lstm", "npz"), _load("lstm", "safetensors")
    assert a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)


def test_to_state_inverts_from_state():
    state = _load("lstm", "npz")
    again = statedict.to_state(statedict.from_state(state))
    assert again.keys() == state.keys()
    assert all(np.array_equal(again[k], state[k]) for k in state)


def _gru_state():
    return dict(_load("gru", "npz"))


@pytest.mark.parametrize("change,needle", [
    (lambda s: s.pop("bias_hh_l0"), "no 'bias_hh_l0'"),
    (lambda s: s.update(extra=np.zeros(3, np.float32)), "'extra' is not a tensor of torch.nn"),
    (lambda s: s.update(bias_ih_l0=np.zeros(47, np.float32)), "bias_ih_l0 has shape (47,)"),
    (lambda s: s.update(weight_hh_l0=np.zeros((48, 15), np.float32)), "not a multiple"),
    (lambda s: s.update(weight_hh_l0=np.zeros((40, 16), np.float32)), "not a multiple"),
    (lambda s: s.update(weight_hh_l0=np.zeros((32, 16), np.float32)), "an LSTM has 4, a GRU 3"),
    (lambda s: s.update(bias_ih_l0=np.full(48, np.nan, np.float32)), "NaN"),
    (lambda s: s.update(weight_hr_l0=np.zeros((16, 16), np.float32)), "LSTM only"),
    (lambda s: s.update(weight_ih_l1=s["weight_ih_l0"]), "weight_ih_l1 has shape (48, 12), "
                                                           "expected (48, 16) for a 2-layer GRU"),
    (lambda s: s.clear(), "has no tensors"),
    (lambda s: s.update(weight_hh_l0=np.zeros((48, 0), np.float32)), "an empty module"),
])
def test_a_dict_that_is_not_such_a_module_is_refused(change, needle):
    state = _gru_state()
    change(state)
    with pytest.raises(BadModel, match=re.escape(needle)):
        statedict.from_state(state, "my.npz")


def test_a_plain_rnn_is_tanh_unless_told():
    state = {"weight_ih_l0": np.ones((4, 3)), "weight_hh_l0": np.ones((4, 4)),
             "bias_ih_l0": np.ones(4), "bias_hh_l0": np.ones(4)}
    assert statedict.from_state(state).mode == RNNMode.RNN_TANH
    assert statedict.from_state(state, plain_cell=RNNMode.RNN_RELU).mode == RNNMode.RNN_RELU


def test_safetensors_bf16_and_broken_headers(tmp_path):
    values = np.array([1.5, -2.25, 3.0], dtype=np.float32)
    bf16 = (values.view(np.uint32) >> 16).astype(np.uint16).tobytes()
    header = json.dumps({"t": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 6]},
                         "__metadata__": {"format": "pt"}}).encode()
    good = tmp_path / "ok.safetensors"
    good.write_bytes(struct.pack("<Q", len(header)) + header + bf16)
    assert np.array_equal(files.read_weights(good)["t"], values)
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    with pytest.raises(BadModel, match="not a safetensors file"):
        files.read_weights(bad)
    odd = tmp_path / "odd.safetensors"
    h = json.dumps({"t": {"dtype": "F32", "shape": 4, "data_offsets": None}}).encode()
    odd.write_bytes(struct.pack("<Q", len(h)) + h + bytes(16))
    with pytest.raises(BadModel, match="not a readable .safetensors file"):
        files.read_weights(odd)
    ints = tmp_path / "ints.safetensors"
    h = json.dumps({"t": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}}).encode()
    ints.write_bytes(struct.pack("<Q", len(h)) + h + bytes(8))
    with pytest.raises(BadModel, match="give F16, BF16, F32 or F64"):
        files.read_weights(ints)


def test_a_users_plain_relu_rnn_stays_relu_through_the_tables_loader(tmp_path):
    from cudnn_rnn.charlm import table
    state = {"weight_ih_l0": np.ones((4, 3), np.float32), "weight_hh_l0": np.ones((4, 4), np.float32),
             "bias_ih_l0": np.ones(4, np.float32), "bias_hh_l0": np.ones(4, np.float32)}
    np.savez(tmp_path / "rnn.npz", **state)
    np.save(tmp_path / "x.npy", np.ones((2, 2, 3), np.float32))
    spec = {"weights": str(tmp_path / "rnn.npz"), "inputs": str(tmp_path / "x.npy")}
    for mode in (RNNMode.RNN_RELU, RNNMode.RNN_TANH):  # RNN_RELU is 0, a false value
        assert table.load_source(dict(spec, plain_cell=mode)).rnn.mode == mode
    assert table.load_source(spec).rnn.mode == RNNMode.RNN_TANH
