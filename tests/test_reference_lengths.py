"""The float64 reference with sequences of different lengths in one batch: each sequence
must behave exactly as if it ran alone to its own length, and the gradients must match
finite differences."""
import numpy as np
import pytest

from cudnn_rnn.bindings.enums import DirectionMode, RNNMode
from cudnn_rnn.check import reference as R
from cudnn_rnn.engine.config import RNNConfig

from .test_reference import assert_gradients_match_finite_differences

CELLS = (RNNMode.RNN_RELU, RNNMode.RNN_TANH, RNNMode.LSTM, RNNMode.GRU)
LENGTHS = np.array([5, 2, 5, 1])  # T = 5, B = 4: unsorted on purpose
CASES = [(c, bi) for c in CELLS for bi in (False, True)]


def _cfg(mode, bidirectional, batch=4, seq=5, proj=None):
    return RNNConfig(seq_length=seq, num_layers=2, hidden_size=4, mini_batch=batch, input_size=3,
                     mode=mode, proj_size=proj,
                     direction=DirectionMode.BIDIRECTIONAL if bidirectional
                     else DirectionMode.UNIDIRECTIONAL)


def _data(cfg, rng):
    shapes = dict(x=cfg.x_shape(), hx=cfg.h_shape(), cx=cfg.c_shape(), dy=cfg.y_shape(),
                  dhy=cfg.h_shape(), dcy=cfg.c_shape())
    return {k: rng.uniform(-1, 1, size=s) for k, s in shapes.items()}


def _proj(mode, bidirectional):
    return 2 if mode == RNNMode.LSTM and bidirectional else None


@pytest.mark.parametrize("mode,bidirectional", CASES,
                         ids=[f"{c.name}-{'bi' if b else 'uni'}" for c, b in CASES])
def test_each_sequence_runs_as_if_alone_to_its_own_length(mode, bidirectional):
    rng = np.random.default_rng(11)
    proj = _proj(mode, bidirectional)
    cfg = _cfg(mode, bidirectional, proj=proj)
    params = R.random_params(cfg, rng, 0.6)
    d = _data(cfg, rng)
    lstm = mode == RNNMode.LSTM
    fwd = R.forward(cfg, params, d["x"], d["hx"], d["cx"], lengths=LENGTHS)
    grads = R.backward(cfg, params, fwd, d["dy"], d["dhy"], d["dcy"])
    summed = [p.zeros_like() for p in params]
    for b, n in enumerate(LENGTHS):
        one = _cfg(mode, bidirectional, batch=1, seq=int(n), proj=proj)
        cut = lambda a, t=None: a[:t, b:b + 1] if t else a[:, b:b + 1]  # noqa: E731
        alone = R.forward(one, params, cut(d["x"], n), cut(d["hx"]), cut(d["cx"]) if lstm else None)
        np.testing.assert_allclose(fwd.y[:n, b], alone.y[:, 0], rtol=1e-12, atol=1e-13)
        assert not fwd.y[n:, b].any()  # the padding fill
        np.testing.assert_allclose(fwd.hy[:, b], alone.hy[:, 0], rtol=1e-12, atol=1e-13)
        if lstm:
            np.testing.assert_allclose(fwd.cy[:, b], alone.cy[:, 0], rtol=1e-12, atol=1e-13)
        g = R.backward(one, params, alone, cut(d["dy"], n), cut(d["dhy"]),
                       cut(d["dcy"]) if lstm else None)
        np.testing.assert_allclose(grads.dx[:n, b], g.dx[:, 0], rtol=1e-11, atol=1e-13)
        assert not grads.dx[n:, b].any()
        np.testing.assert_allclose(grads.dhx[:, b], g.dhx[:, 0], rtol=1e-11, atol=1e-13)
        if lstm:
            np.testing.assert_allclose(grads.dcx[:, b], g.dcx[:, 0], rtol=1e-11, atol=1e-13)
        for acc, part in zip(summed, g.dparams):
            for a, p in zip(R.flat_params([acc]), R.flat_params([part])):
                a += p
    for got, want in zip(R.flat_params(grads.dparams), R.flat_params(summed)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mode,bidirectional", CASES,
                         ids=[f"{c.name}-{'bi' if b else 'uni'}" for c, b in CASES])
def test_gradients_with_lengths_match_finite_differences(mode, bidirectional):
    rng = np.random.default_rng(12)
    cfg = _cfg(mode, bidirectional, proj=_proj(mode, bidirectional))
    params = R.random_params(cfg, rng, 0.6)
    d = _data(cfg, rng)
    assert_gradients_match_finite_differences(cfg, params, d, rng, probes=4, lengths=LENGTHS)


def test_equal_lengths_change_nothing():
    rng = np.random.default_rng(13)
    cfg = _cfg(RNNMode.LSTM, True, proj=2)
    params = R.random_params(cfg, rng, 0.6)
    d = _data(cfg, rng)
    a = R.forward(cfg, params, d["x"], d["hx"], d["cx"])
    b = R.forward(cfg, params, d["x"], d["hx"], d["cx"], lengths=np.full(4, 5))
    np.testing.assert_array_equal(a.y, b.y)
    np.testing.assert_array_equal(a.hy, b.hy)
    np.testing.assert_array_equal(a.cy, b.cy)


class _NoNumpy:
    """Stands for the module-level numpy of check/reference.py: any use of it fails."""

    def __getattr__(self, name):
        raise AssertionError(f"the reference used numpy directly (np.{name}), not its "
                             "inputs' array module")


@pytest.mark.parametrize("mode,bidirectional", CASES,
                         ids=[f"{c.name}-{'bi' if b else 'uni'}" for c, b in CASES])
def test_the_reference_reaches_arrays_only_through_its_inputs_module(monkeypatch, mode,
                                                                      bidirectional):
    """On a GPU the reference runs on cupy arrays (array_module); a numpy call left in its
    forward or backward would mix the two modules there (a rename once left two, which
    only unequal lengths reach). Here numpy stands in for cupy and the module-level name
    refuses every use."""
    rng = np.random.default_rng(5)
    cfg = _cfg(mode, bidirectional, proj=_proj(mode, bidirectional))
    params = R.random_params(cfg, rng, 0.6)
    d = _data(cfg, rng)
    lstm = mode == RNNMode.LSTM
    want = R.forward(cfg, params, d["x"], d["hx"], d["cx"] if lstm else None, lengths=LENGTHS)
    monkeypatch.setattr(R, "array_module", lambda a: np)
    monkeypatch.setattr(R, "np", _NoNumpy())
    fwd = R.forward(cfg, params, d["x"], d["hx"], d["cx"] if lstm else None, lengths=LENGTHS)
    R.backward(cfg, params, fwd, d["dy"], d["dhy"], d["dcy"] if lstm else None)
    assert np.array_equal(fwd.y, want.y)
