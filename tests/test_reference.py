"""The float64 reference on its own: a naive re-implementation, finite differences, and
NVIDIA's published RNN_example checksums."""
import numpy as np
import pytest

from cudnn_rnn.bindings.enums import DirectionMode, RNNBiasMode, RNNInputMode, RNNMode
from cudnn_rnn.check import reference as R
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.check.goldens import SAMPLE_GOLDEN, sample_checksums

CELLS = list(RNNMode)


def _sig(v):
    return 1.0 / (1.0 + np.exp(-v))


def naive_forward(cfg, params, x, hx, cx):
    """One sequence element, one time step, one vector at a time, written independently."""
    T, B, _ = x.shape
    D, P = cfg.dirs, cfg.proj_size
    hy = np.zeros_like(hx)
    cy = np.zeros_like(cx)
    layer_in = x
    for layer in range(cfg.num_layers):
        out = np.zeros((T, B, P * D))
        for d in range(D):
            p = params[layer * D + d]
            k = layer * D + d
            for b in range(B):
                h, c = hx[k, b].copy(), cx[k, b].copy()
                steps = range(T) if d == 0 else range(T - 1, -1, -1)
                for t in steps:
                    xt = layer_in[t, b]

                    def pre(gate, with_r=True, r_scale=None):
                        wx = xt if p.W[gate] is None else p.W[gate].dot(xt)
                        if p.bW[gate] is not None:
                            wx = wx + p.bW[gate]
                        rh = p.R[gate].dot(h)
                        if p.bR[gate] is not None:
                            rh = rh + p.bR[gate]
                        return wx, rh

                    if cfg.mode in (RNNMode.RNN_RELU, RNNMode.RNN_TANH):
                        wx, rh = pre(0)
                        a = wx + rh
                        h = np.where(a > 0, a, 0.0) if cfg.mode == RNNMode.RNN_RELU else np.tanh(a)
                    elif cfg.mode == RNNMode.LSTM:
                        gates = [sum(pre(g)) for g in range(4)]
                        i, f, o = _sig(gates[0]), _sig(gates[1]), _sig(gates[3])
                        g_ = np.tanh(gates[2])
                        c = f * c + i * g_
                        h = o * np.tanh(c)
                        if p.P is not None:
                            h = p.P.dot(h)
                    else:
                        wr, rr = pre(0)
                        wz, rz = pre(1)
                        wn, rn = pre(2)
                        r, z = _sig(wr + rr), _sig(wz + rz)
                        n = np.tanh(wn + r * rn)
                        h = (1 - z) * n + z * h
                    out[t, b, d * P:(d + 1) * P] = h
                hy[k, b] = h
                cy[k, b] = c
        layer_in = out
    return layer_in, hy, cy


def _cfg(mode, bidirectional=False, layers=2, input_size=6, **kw):
    d = DirectionMode.BIDIRECTIONAL if bidirectional else DirectionMode.UNIDIRECTIONAL
    return RNNConfig(seq_length=4, num_layers=layers, hidden_size=5, mini_batch=3,
                     input_size=input_size, mode=mode, direction=d, **kw)


def _data(cfg, rng):
    shapes = dict(x=cfg.x_shape(), hx=cfg.h_shape(), cx=cfg.c_shape(), dy=cfg.y_shape(),
                  dhy=cfg.h_shape(), dcy=cfg.c_shape())
    return {k: rng.uniform(-1, 1, size=s) for k, s in shapes.items()}


VARIANTS = [dict(), dict(bidirectional=True), dict(layers=1),
            dict(bias_mode=RNNBiasMode.NO_BIAS), dict(bias_mode=RNNBiasMode.SINGLE_INP_BIAS),
            dict(bias_mode=RNNBiasMode.SINGLE_REC_BIAS)]


def _assert_matches_naive(cfg, rng, check_cy: bool) -> None:
    params = R.random_params(cfg, rng, 0.6)
    d = _data(cfg, rng)
    fwd = R.forward(cfg, params, d["x"], d["hx"], d["cx"])
    y, hy, cy = naive_forward(cfg, params, d["x"], d["hx"], d["cx"])
    np.testing.assert_allclose(fwd.y, y, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(fwd.hy, hy, rtol=1e-12, atol=1e-12)
    if check_cy:
        np.testing.assert_allclose(fwd.cy, cy, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", CELLS, ids=lambda c: c.name)
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: ",".join(f"{k}={getattr(x, 'name', x)}"
                                                                     for k, x in v.items()) or "base")
def test_forward_matches_a_naive_implementation(mode, variant):
    _assert_matches_naive(_cfg(mode, **variant), np.random.default_rng(1), mode == RNNMode.LSTM)


def test_projection_and_skip_input_match_the_naive_implementation():
    rng = np.random.default_rng(2)
    for cfg in (_cfg(RNNMode.LSTM, bidirectional=True, proj_size=3),
                _cfg(RNNMode.GRU, input_mode=RNNInputMode.SKIP_INPUT, input_size=5)):
        _assert_matches_naive(cfg, rng, False)


@pytest.mark.parametrize("mode", CELLS, ids=lambda c: c.name)
@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
def test_gradients_match_finite_differences(mode, bidirectional):
    rng = np.random.default_rng(3)
    proj = 3 if mode == RNNMode.LSTM and bidirectional else None
    cfg = _cfg(mode, bidirectional, proj_size=proj)
    params = R.random_params(cfg, rng, 0.6)
    d = _data(cfg, rng)
    assert_gradients_match_finite_differences(cfg, params, d, rng, probes=3)


def assert_gradients_match_finite_differences(cfg, params, d, rng, probes, lengths=None):
    """The reference's gradients of L = sum y*dy + hy*dhy (+ cy*dcy) against central
    differences (eps 1e-6) at ``probes`` random entries of x, hx, cx and every weight."""
    lstm = cfg.mode == RNNMode.LSTM
    fwd = R.forward(cfg, params, d["x"], d["hx"], d["cx"], lengths=lengths)
    g = R.backward(cfg, params, fwd, d["dy"], d["dhy"], d["dcy"])

    def loss():
        f = R.forward(cfg, params, d["x"], d["hx"], d["cx"], lengths=lengths)
        return R.loss(f, d["dy"], d["dhy"], d["dcy"] if lstm else None)

    pairs = [(d["x"], g.dx), (d["hx"], g.dhx)] + ([(d["cx"], g.dcx)] if lstm else [])
    pairs += list(zip(R.flat_params(params), R.flat_params(g.dparams)))
    eps = 1e-6
    for arr, grad in pairs:
        for _ in range(probes):
            idx = tuple(int(rng.integers(0, s)) for s in arr.shape)
            old = arr[idx]
            arr[idx] = old + eps
            up = loss()
            arr[idx] = old - eps
            down = loss()
            arr[idx] = old
            numeric = (up - down) / (2 * eps)
            assert grad[idx] == pytest.approx(numeric, rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("mode", range(4), ids=[c.name for c in CELLS])
def test_reference_reproduces_nvidias_published_checksums(mode):
    """The sample's golden_1..4 (20 2 512 64, FLOAT, M40) from the v8 sample's readme."""
    got = sample_checksums(RNNConfig(mode=CELLS[mode]))
    for name, want in SAMPLE_GOLDEN[CELLS[mode]].items():
        assert abs(got[name] - want) / max(abs(want), abs(got[name])) < 1e-3, (name, got[name], want)
