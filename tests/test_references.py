"""The float64 reference is evaluated once per distinct values and mathematics and shared by
the cells that differ only in math type, math precision or algorithm (and layout), never by
cells that differ in anything that changes a value or the equations (matrix/references.py).

On the CPU with numpy, the reference on values drawn exactly as a flow draws them
(engine/values.draw, over a weight layout of cuDNN's shape); a flow's part in this is its
configuration, weight entries, seed and drawn values, which is all the cache reads."""
from types import SimpleNamespace

import numpy as np
import pytest

from cudnn_rnn.bindings.enums import (DataType, DirectionMode, MathType, RNNAlgo, RNNBiasMode,
                                      RNNDataLayout, RNNInputMode, RNNMode)
from cudnn_rnn.check import reference
from cudnn_rnn.check.verify import compare_with, expected, prepare
from cudnn_rnn.engine import dtypes, values
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.engine.weights import WeightEntry
from cudnn_rnn.matrix.references import ReferenceCache, reference_key

BASE = RNNConfig(seq_length=5, num_layers=2, hidden_size=8, mini_batch=4, input_size=6,
                 mode=RNNMode.LSTM, data_type=DataType.FLOAT, math_type=MathType.FMA_MATH)


def entries_of(cfg: RNNConfig) -> tuple[list, int]:
    """cuDNN's weight entries for ``cfg`` (pseudo-layer, linLayerID, matrix then bias), packed
    one after another: the layout the flow's weights stage would report."""
    arrays = reference.arrays_from_params(cfg, reference.random_params(cfg, np.random.default_rng(0)))
    item, offset, out = dtypes.itemsize(cfg.data_type), 0, []
    for key in sorted(arrays, key=lambda k: (k[0], k[1], k[2] != "matrix")):
        shape = arrays[key].shape
        dims = (1,) + shape if key[2] == "matrix" else (1, shape[0], 1)
        out.append(WeightEntry(key[0], key[1], key[2], offset, dims))
        offset += int(np.prod(shape)) * item
    return out, offset


def flow_of(cfg: RNNConfig, seed: int = 1234):
    """What the cache reads of a flow after its weights stage."""
    entries, space = entries_of(cfg)
    drawn = values.draw(cfg, entries, space, "random", seed)
    return SimpleNamespace(cfg=cfg, entries=entries, init="random", seed=seed,
                           drawn={"weights": drawn["weights"], **drawn["io"]})


SHARE = {  # a change that leaves every value and equation as it was
    "math type": dict(math_type=MathType.TENSOR_OP_MATH),
    "math type (TF32 permitted)": dict(math_type=MathType.DEFAULT_MATH),
    "algorithm": dict(algo=RNNAlgo.PERSIST_STATIC),
    "algorithm (dynamic)": dict(algo=RNNAlgo.PERSIST_DYNAMIC),
    "layout": dict(layout=RNNDataLayout.BATCH_MAJOR_UNPACKED),
}
APART = {  # a change of a value (rounding, sizes, lengths) or of the equations
    "data type": dict(data_type=DataType.HALF, math_prec=DataType.FLOAT),
    "data type (bfloat16)": dict(data_type=DataType.BFLOAT16, math_prec=DataType.FLOAT),
    "cell": dict(mode=RNNMode.GRU),
    "direction": dict(direction=DirectionMode.BIDIRECTIONAL),
    "layers": dict(num_layers=3),
    "bias mode": dict(bias_mode=RNNBiasMode.NO_BIAS),
    "lengths": dict(lengths="descending:2"),
    "input mode": dict(input_mode=RNNInputMode.SKIP_INPUT, input_size=8),
    "projection": dict(proj_size=4),
    "hidden size": dict(hidden_size=12),
    "seed": {},
}


@pytest.mark.parametrize("what", sorted(SHARE))
def test_cells_that_differ_only_in_how_cudnn_computes_share_one_reference(what):
    first, second = flow_of(BASE), flow_of(BASE.replace(**SHARE[what]))
    assert reference_key(first.cfg, first.entries, "random", 1234) == \
        reference_key(second.cfg, second.entries, "random", 1234)
    cache = ReferenceCache(size=8)
    kept = cache.get(first)
    assert cache.get(second) is kept and (cache.misses, cache.hits) == (1, 1)
    # and sharing is right: the second cell's own evaluation is the same, bit for bit
    own = prepare(second.cfg, expected(second.cfg, second.drawn))
    for name, a in own.outputs.items():
        np.testing.assert_array_equal(a, kept.outputs[name], err_msg=name)
    np.testing.assert_array_equal(own.dw, kept.dw)


def test_math_precision_of_the_same_data_type_shares():
    half = BASE.replace(data_type=DataType.HALF, math_prec=DataType.FLOAT)
    cache = ReferenceCache(size=8)
    kept = cache.get(flow_of(half))
    assert cache.get(flow_of(half.replace(math_prec=DataType.HALF))) is kept


@pytest.mark.parametrize("what", sorted(APART))
def test_cells_that_differ_in_values_or_equations_do_not_share(what):
    first = flow_of(BASE)
    second = flow_of(BASE.replace(**APART[what]), seed=99 if what == "seed" else 1234)
    assert ReferenceCache.key(first) != ReferenceCache.key(second)
    cache = ReferenceCache(size=8)
    a, b = cache.get(first), cache.get(second)
    assert a is not b and (cache.misses, cache.hits) == (2, 0)
    differs = a.dw.shape != b.dw.shape or a.outputs["y"].shape != b.outputs["y"].shape or \
        not np.array_equal(a.outputs["y"], b.outputs["y"])
    assert differs, "sharing would have compared this cell with another's reference"


def test_double_data_gets_its_own_reference_though_its_draws_equal_floats():
    """Values are drawn in float32, which DOUBLE holds exactly: the numbers coincide with
    FLOAT's, but a data type is its own key (its weight layout and rounding are its own)."""
    first, second = flow_of(BASE), flow_of(BASE.replace(data_type=DataType.DOUBLE,
                                                         math_prec=DataType.DOUBLE))
    assert ReferenceCache.key(first) != ReferenceCache.key(second)
    cache = ReferenceCache(size=8)
    assert cache.get(first) is not cache.get(second) and cache.misses == 2


def test_a_reference_begun_in_a_thread_is_the_one_the_cell_gets():
    flow = flow_of(BASE)
    cache = ReferenceCache(size=8)
    cache.start(flow, np)
    got = cache.get(flow)
    own = prepare(BASE, expected(BASE, flow.drawn))
    np.testing.assert_array_equal(got.outputs["y"], own.outputs["y"])
    np.testing.assert_array_equal(got.dw, own.dw)
    assert (cache.misses, cache.hits) == (1, 0)
    cache.start(flow_of(BASE.replace(algo=RNNAlgo.PERSIST_STATIC)), np)  # kept: nothing begun
    assert cache._pending is None
    other = flow_of(BASE.replace(mode=RNNMode.GRU))
    cache.start(other, np)
    cache.finish()  # its cell failed after drawing its values: waited for, then dropped
    assert cache._pending is None and ReferenceCache.key(other) not in cache._items
    assert cache.get(other) is not None and cache.misses == 2


def test_the_prepared_reference_compares_as_the_pair_did():
    flow = flow_of(BASE)
    pair = expected(BASE, flow.drawn)
    rng = np.random.default_rng(3)
    fwd, grads = pair
    outputs = {"y": fwd.y + rng.normal(scale=1e-6, size=fwd.y.shape), "hy": fwd.hy,
               "cy": fwd.cy, "y_inf": fwd.y, "hy_inf": fwd.hy * 1.001, "cy_inf": fwd.cy,
               "dx": grads.dx, "dhx": grads.dhx, "dcx": grads.dcx,
               "dw": {k: v * 1.0001 for k, v in
                      reference.arrays_from_params(BASE, grads.dparams).items()}}
    a, b = compare_with(BASE, pair, outputs), compare_with(BASE, prepare(BASE, pair), outputs)
    assert a.errors == b.errors and a.passed == b.passed
    assert b.errors["hy_inf"] == pytest.approx(1e-3) and b.errors["dw"] == pytest.approx(1e-4)


def test_the_cache_keeps_within_its_count_and_bytes():
    cache = ReferenceCache(size=2)
    flows = [flow_of(BASE.replace(hidden_size=h)) for h in (8, 10, 12)]
    for f in flows:
        cache.get(f)
    assert ReferenceCache.key(flows[0]) not in cache._items and len(cache._items) == 2
    small = ReferenceCache(size=8, max_bytes=1024)  # too large for the host budget: not kept
    small.get(flows[0])
    assert not small._items and small.on_device() == 0
