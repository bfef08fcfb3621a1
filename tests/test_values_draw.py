"""The values a flow uploads, drawn on the host (engine.values.draw's numpy path): the
weights' law, the weight space's bytes, the inputs. The weight entries are laid out as
cudnnGetRNNWeightParams reports them (per pseudo-layer and linLayerID, matrix then bias,
one after another); on a GPU, tests/test_gpu_values.py checks the draw against cuDNN's own
layout and the device's weight space."""
import numpy as np
import pytest

from cudnn_rnn.bindings.enums import DataType, DirectionMode, RNNMode
from cudnn_rnn.engine import dtypes, values
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.engine.weights import WeightEntry

CFG = RNNConfig(seq_length=4, num_layers=2, hidden_size=32, mini_batch=3, input_size=24,
                mode=RNNMode.GRU, direction=DirectionMode.BIDIRECTIONAL)
TYPES = [DataType.FLOAT, DataType.HALF, DataType.BFLOAT16, DataType.DOUBLE]


def layout(cfg: RNNConfig, gap: int = 0) -> tuple[list[WeightEntry], int]:
    """(entries, weight-space bytes): every matrix and bias of ``cfg``, ``gap`` bytes apart."""
    item, H = dtypes.itemsize(cfg.data_type), cfg.hidden_size
    entries, offset = [], 0
    for pseudo in range(cfg.pseudo_layers):
        inputs = cfg.input_size if pseudo < cfg.dirs else H * cfg.dirs
        for lin_id in range(cfg.linear_layers):
            columns = inputs if lin_id < cfg.gates else H
            for kind, dims in (("matrix", (1, H, columns)), ("bias", (1, H, 1))):
                entries.append(WeightEntry(pseudo, lin_id, kind, offset, dims))
                offset += int(np.prod(dims)) * item + gap
    return entries, offset


def _draw(cfg, init="random", seed=3, gap=0):
    entries, space = layout(cfg, gap)
    return entries, values.draw(cfg, entries, space, init, seed)


@pytest.mark.parametrize("dt", TYPES, ids=lambda d: d.name)
def test_random_weights_are_uniform_within_one_over_root_hidden(dt):
    cfg = CFG.replace(data_type=dt)
    entries, drawn = _draw(cfg)
    scale = 1.0 / np.sqrt(cfg.hidden_size)
    for e in entries:
        w = drawn["weights"][(e.pseudo_layer, e.lin_id, e.kind)]
        assert w.shape == e.shape and w.dtype == np.float64
        # rounding to the data type may carry the largest value a hair past the bound
        assert np.abs(w).max() <= scale * (1 + 1e-2) and np.abs(w).max() > scale / 2
        assert (w < 0).any() and (w > 0).any()
    every = np.concatenate([w.ravel() for w in drawn["weights"].values()])
    assert abs(every.mean()) < 0.05 * scale and np.abs(every).mean() == pytest.approx(
        scale / 2, rel=0.05)  # U(-s, s): mean 0, mean |w| s/2


@pytest.mark.parametrize("dt", TYPES, ids=lambda d: d.name)
def test_the_weight_space_holds_each_entry_at_its_offset_in_the_data_type(dt):
    cfg = CFG.replace(data_type=dt)
    entries, drawn = _draw(cfg, gap=6)
    image, item = drawn["image"], dtypes.itemsize(dt)
    held = np.zeros(image.size, bool)
    for e in entries:
        span = slice(e.offset, e.offset + e.size * item)
        bits = image[span].view(dtypes.storage_dtype(dt)).reshape(e.shape)
        given = drawn["weights"][(e.pseudo_layer, e.lin_id, e.kind)]
        np.testing.assert_array_equal(dtypes.decode(bits, dt), given)
        np.testing.assert_array_equal(dtypes.decode(dtypes.encode(given, dt), dt), given)
        held[span] = True
    assert not image[~held].any()  # the bytes between entries are 0


def test_the_seed_determines_every_value():
    _, a = _draw(CFG, seed=3)
    _, b = _draw(CFG, seed=3)
    _, c = _draw(CFG, seed=4)
    np.testing.assert_array_equal(a["image"], b["image"])
    assert all(np.array_equal(a["io"][k], b["io"][k]) for k in a["io"])
    assert not np.array_equal(a["image"], c["image"]) and not np.array_equal(a["io"]["x"],
                                                                             c["io"]["x"])


def test_inputs_are_uniform_within_one_and_in_the_data_type():
    cfg = CFG.replace(mode=RNNMode.LSTM, data_type=DataType.HALF)
    _, drawn = _draw(cfg)
    shapes = {"x": cfg.x_shape(), "hx": cfg.h_shape(), "dy": cfg.y_shape(),
              "dhy": cfg.h_shape(), "cx": cfg.c_shape(), "dcy": cfg.c_shape()}
    assert {k: v.shape for k, v in drawn["io"].items()} == shapes
    for name, v in drawn["io"].items():
        assert np.abs(v).max() <= 1.0 and np.abs(v).max() > 0.5
        np.testing.assert_array_equal(dtypes.decode(drawn["io_bits"][name], cfg.data_type), v)


def test_the_samples_init_and_a_wrong_init():
    entries, drawn = _draw(CFG, init="sample")
    for e in entries:
        w = drawn["weights"][(e.pseudo_layer, e.lin_id, e.kind)]
        assert np.all(w == np.float32(1.0 / e.size if e.kind == "matrix" else 1.0))
    assert all(np.all(v == 1.0) for v in drawn["io"].values())
    with pytest.raises(ValueError, match="init must be 'sample' or 'random'"):
        values.draw(CFG, entries, 0, "zeros", 0)
