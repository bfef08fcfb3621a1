"""The 8-bit engine's host model (cudnn_rnn.lowbit.model) against the float64 reference:
float forward, weight stacking, the INT8 dequantization bookkeeping, calibration and the
size of the 8-bit error."""
import dataclasses

import numpy as np
import pytest

from cudnn_rnn.bindings.enums import DirectionMode, RNNBiasMode, RNNInputMode, RNNMode
from cudnn_rnn.check import reference as ref
from cudnn_rnn.engine import walk
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.lowbit import model as M


def _cfg(mode, bidirectional=False, layers=1, hidden=8, input_size=6, **kw):
    direction = DirectionMode.BIDIRECTIONAL if bidirectional else DirectionMode.UNIDIRECTIONAL
    return RNNConfig(seq_length=5, num_layers=layers, hidden_size=hidden, mini_batch=3,
                     input_size=input_size, mode=mode, direction=direction, **kw)


def _inputs(cfg, rng):
    return (rng.uniform(-1, 1, cfg.x_shape()), rng.uniform(-1, 1, cfg.h_shape()),
            rng.uniform(-1, 1, cfg.c_shape()))


def _assert_matches_reference(cfg, params, x, hx, cx, got, tol):
    want = ref.forward(cfg, params, x, hx, cx)
    y, hy, cy = got
    assert np.abs(y - want.y).max() < tol
    assert np.abs(hy - want.hy).max() < tol
    if cfg.mode == RNNMode.LSTM:
        assert np.abs(cy - want.cy).max() < tol
    else:
        assert cy is None


# ---------------------------------------------------------------------------- float forward
VARIANTS = [dict(), dict(bidirectional=True), dict(layers=3), dict(layers=3, bidirectional=True),
            dict(bias_mode=RNNBiasMode.NO_BIAS), dict(bias_mode=RNNBiasMode.SINGLE_INP_BIAS),
            dict(bias_mode=RNNBiasMode.SINGLE_REC_BIAS),
            dict(layers=2, input_mode=RNNInputMode.SKIP_INPUT, input_size=8)]


def _variant_id(v):
    return ",".join(f"{k}={getattr(x, 'name', x)}" for k, x in v.items()) or "base"


@pytest.mark.parametrize("mode", list(RNNMode), ids=lambda c: c.name)
@pytest.mark.parametrize("variant", VARIANTS, ids=_variant_id)
def test_float_forward_equals_the_reference(mode, variant):
    cfg = _cfg(mode, **variant)
    rng = np.random.default_rng(1)
    params = ref.random_params(cfg, rng, 0.6)
    x, hx, cx = _inputs(cfg, rng)
    _assert_matches_reference(cfg, params, x, hx, cx,
                              M.forward(cfg, M.stack(cfg, params), x, hx, cx), 1e-12)


@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
def test_float_forward_of_an_lstm_with_projection_equals_the_reference(bidirectional):
    cfg = _cfg(RNNMode.LSTM, bidirectional, layers=2, proj_size=5)
    rng = np.random.default_rng(2)
    params = ref.random_params(cfg, rng, 0.6)
    assert params[0].P is not None
    x, hx, cx = _inputs(cfg, rng)
    _assert_matches_reference(cfg, params, x, hx, cx,
                              M.forward(cfg, M.stack(cfg, params), x, hx, cx), 1e-12)


@pytest.mark.parametrize("mode", [RNNMode.LSTM, RNNMode.GRU], ids=lambda c: c.name)
def test_stack_puts_gate_k_at_rows_k_hidden(mode):
    cfg = _cfg(mode, bidirectional=True, layers=2, bias_mode=RNNBiasMode.SINGLE_REC_BIAS)
    params = ref.random_params(cfg, np.random.default_rng(3))
    H = cfg.hidden_size
    stacked = M.stack(cfg, params)
    assert len(stacked) == cfg.pseudo_layers
    for p, s in zip(params, stacked):
        assert s.W.shape == (cfg.gates * H, p.W[0].shape[1])
        for k in range(cfg.gates):
            rows = slice(k * H, (k + 1) * H)
            np.testing.assert_array_equal(s.W[rows], p.W[k])
            np.testing.assert_array_equal(s.R[rows], p.R[k])
            np.testing.assert_array_equal(s.bR[rows], p.bR[k])
            np.testing.assert_array_equal(s.bW[rows], 0.0)  # this bias mode has no bW


def test_stack_of_skip_input_has_no_input_matrix():
    cfg = _cfg(RNNMode.GRU, layers=2, input_mode=RNNInputMode.SKIP_INPUT, input_size=8)
    stacked = M.stack(cfg, ref.random_params(cfg, np.random.default_rng(4)))
    assert stacked[0].W is None and stacked[1].W is not None


# ---------------------------------------------------------------------------- INT8 bookkeeping
ACT = 2.0 ** -6  # activation scale of the exactly representable network


def _one_per_row(rng, rows, cols):
    """A (rows, cols) matrix with one ±1 per row, elsewhere 0."""
    w = np.zeros((rows, cols))
    w[np.arange(rows), rng.integers(0, cols, size=rows)] = rng.choice([-1.0, 1.0], size=rows)
    return w


def _representable_relu_network():
    """A 2-layer bidirectional RELU network in which every GEMM operand is an integer
    multiple of its scale within ±127, so INT8 rounds nothing: weights with one ±1 per row
    and row scales 1 or 1/2 (codes ±1 or ±2); x, hx and biases integer multiples of ACT
    (|x| <= 3, 0 <= hx <= 3, |bias| <= 1 each), so every h is one too, and over 4 steps
    |h| <= 3 + 4*(3+2) = 23 in layer 0 and <= 3 + 4*(23+2) = 103 in layer 1.
    Returns the config, params, x, hx and the hand-made plan with those scales."""
    cfg = RNNConfig(seq_length=4, num_layers=2, hidden_size=4, mini_batch=2, input_size=3,
                    mode=RNNMode.RNN_RELU, direction=DirectionMode.BIDIRECTIONAL)
    rng = np.random.default_rng(0)
    H, params, plans = cfg.hidden_size, [], {"input": [], "recurrent": []}
    for k in range(cfg.pseudo_layers):
        W = _one_per_row(rng, H, walk.layer_input_size(cfg, k // cfg.dirs))
        R = _one_per_row(rng, H, cfg.proj_size)
        bW, bR = (ACT * rng.integers(-1, 2, size=H) for _ in range(2))
        params.append(ref.LayerParams(W=[W], R=[R], bW=[bW], bR=[bR]))
        for name in plans:
            plans[name].append(M.GemmScales(ACT, rng.choice([1.0, 0.5], size=H)))
    x = ACT * rng.integers(-3, 4, size=cfg.x_shape())
    hx = ACT * rng.integers(0, 4, size=cfg.h_shape())
    qp = M.QuantPlan(fmt="int8", parts="both", input=tuple(plans["input"]),
                     recurrent=tuple(plans["recurrent"]), projection=(None,) * cfg.pseudo_layers)
    return cfg, params, x, hx, qp


def test_int8_forward_is_exact_when_every_operand_is_representable():
    cfg, params, x, hx, qp = _representable_relu_network()
    # the precondition, from the reference's own record of every GEMM operand
    fwd = ref.forward(cfg, params, x, hx)
    operands = [c["xs"] for c in fwd.caches] + [s["h_prev"] for c in fwd.caches for s in c["steps"]]
    for a in operands:
        q = a / ACT
        assert np.array_equal(q, np.rint(q)) and np.abs(q).max() <= 127
    assert np.unique(np.concatenate([g.weight for g in qp.input])).size == 2  # rows differ
    y, hy, _ = M.forward(cfg, M.stack(cfg, params), x, hx, plan=qp)
    assert np.abs(fwd.y).max() > 10 * ACT  # not a network of zeros
    assert np.abs(y - fwd.y).max() < 1e-12
    assert np.abs(hy - fwd.hy).max() < 1e-12


@pytest.mark.parametrize("gemm_name", ["input", "recurrent"])
def test_int8_forward_changes_when_one_weight_row_scale_is_doubled(gemm_name):
    """Doubling the scale of a row with code ±1 rounds its ±1 (±0.5, half to even) to 0; on
    a row whose unit is active (a > 0) while the operand under the ±1 is nonzero, that
    changes h, so the exact comparison above would see a wrong row scale. (Layer 0 alone:
    layer 1's ReLUs could hide the change.)"""
    cfg, params, x, hx, qp = _representable_relu_network()
    cfg, params, hx = cfg.replace(num_layers=1), params[:2], hx[:2]
    want = ref.forward(cfg, params, x, hx)
    steps, xs = want.caches[0]["steps"], want.caches[0]["xs"]  # layer 0, direction 0
    weight = params[0].W[0] if gemm_name == "input" else params[0].R[0]
    scales = getattr(qp, gemm_name)

    def visible(row):
        col = int(np.flatnonzero(weight[row])[0])
        operands = [xs[t] if gemm_name == "input" else s["h_prev"] for t, s in enumerate(steps)]
        return scales[0].weight[row] == 1.0 and any(
            ((s["a"][:, row] > 0) & (op[:, col] != 0)).any() for s, op in zip(steps, operands))

    row = next(r for r in range(cfg.hidden_size) if visible(r))
    doubled = scales[0].weight.copy()
    doubled[row] *= 2
    broken = dataclasses.replace(qp, **{gemm_name: (M.GemmScales(ACT, doubled),) + scales[1:]})
    y, _, _ = M.forward(cfg, M.stack(cfg, params), x, hx, plan=broken)
    assert np.abs(y - want.y).max() >= ACT


# ---------------------------------------------------------------------------- calibration, plans
@pytest.mark.parametrize("mode", [RNNMode.GRU, RNNMode.LSTM], ids=lambda c: c.name)
def test_calibrate_measures_each_gemms_activation_operand(mode):
    proj = 5 if mode == RNNMode.LSTM else None
    cfg = _cfg(mode, bidirectional=True, layers=2, proj_size=proj)
    rng = np.random.default_rng(5)
    params = ref.random_params(cfg, rng, 0.6)
    x, hx, cx = _inputs(cfg, rng)
    amaxes = M.calibrate(cfg, M.stack(cfg, params), x, hx, cx)
    first = ref.forward(cfg.replace(num_layers=1, proj_size=proj), params[:2], x, hx[:2], cx[:2])
    P, T = cfg.proj_size, cfg.seq_length
    assert amaxes["input"] == [np.abs(x).max()] * 2 + [np.abs(first.y).max()] * 2
    for d in range(2):
        out = first.y[..., d * P:(d + 1) * P]
        fed = out[:T - 1] if d == 0 else out[1:]  # the last step's h feeds no R
        assert amaxes["recurrent"][d] == max(np.abs(hx[d]).max(), np.abs(fed).max())
        if mode == RNNMode.LSTM:
            hh = max(np.abs(s["hh"]).max() for s in first.caches[d]["steps"])
            assert amaxes["projection"][d] == hh
        else:
            assert amaxes["projection"][d] is None


def test_calibrate_skips_the_last_h_which_feeds_no_recurrent_gemm():
    cfg = _cfg(RNNMode.RNN_TANH).replace(seq_length=1)
    rng = np.random.default_rng(8)
    params = ref.random_params(cfg, rng, 0.6)
    x, hx, _ = _inputs(cfg, rng)
    hx *= 1e-3  # far below any output
    amaxes = M.calibrate(cfg, M.stack(cfg, params), x, hx)
    assert np.abs(ref.forward(cfg, params, x, hx).y).max() > 10 * np.abs(hx).max()
    assert amaxes["recurrent"] == [np.abs(hx).max()]


@pytest.mark.parametrize("parts", M.PARTS)
def test_plan_scales_and_which_gemms_are_8bit(parts):
    cfg = _cfg(RNNMode.LSTM, layers=2, proj_size=5)
    rng = np.random.default_rng(6)
    stacked = M.stack(cfg, ref.random_params(cfg, rng))
    amaxes = M.calibrate(cfg, stacked, *_inputs(cfg, rng))
    for fmt, top in (("int8", 127.0), ("e4m3", 448.0)):
        qp = M.plan(cfg, stacked, amaxes, fmt, parts)
        for name, quantized in (("input", parts != "recurrent"), ("recurrent", parts != "input"),
                                ("projection", parts != "input")):
            for k, s in enumerate(getattr(qp, name)):
                assert (s is not None) == quantized
                if s is None:
                    continue
                w = {"input": stacked[k].W, "recurrent": stacked[k].R,
                     "projection": stacked[k].P}[name]
                want_w = np.abs(w).max(axis=1) if fmt == "int8" else np.abs(w).max()
                np.testing.assert_allclose(s.weight, want_w / top, rtol=1e-15)
                assert s.act == pytest.approx(amaxes[name][k] / top, rel=1e-15)
        dq = M.weights_dequantized(stacked, qp)
        for k in range(cfg.pseudo_layers):
            for name in ("W", "R", "P"):
                changed = not np.array_equal(getattr(dq[k], name), getattr(stacked[k], name))
                assert changed == (parts == "both" or (parts == "input") == (name == "W"))


# ---------------------------------------------------------------------------- 8-bit error
BOUNDS = {"int8": 0.05, "e4m3": 0.1}  # relative max error of y and hy, hidden 32


def _relative_error(got, want):
    return max(np.abs(g - w).max() / np.abs(w).max() for g, w in zip(got, want))


@pytest.mark.parametrize("fmt", M.FORMATS)
@pytest.mark.parametrize("parts", M.PARTS)
@pytest.mark.parametrize("mode,proj", [(RNNMode.LSTM, None), (RNNMode.LSTM, 16),
                                       (RNNMode.GRU, None)], ids=["LSTM", "LSTM-proj", "GRU"])
def test_8bit_error_is_nonzero_and_bounded(fmt, parts, mode, proj):
    cfg = RNNConfig(seq_length=8, num_layers=2, hidden_size=32, mini_batch=4, input_size=12,
                    mode=mode, proj_size=proj, direction=DirectionMode.BIDIRECTIONAL)
    rng = np.random.default_rng(7)
    params = ref.random_params(cfg, rng)
    x, hx, cx = _inputs(cfg, rng)
    stacked = M.stack(cfg, params)
    qp = M.plan(cfg, stacked, M.calibrate(cfg, stacked, x, hx, cx), fmt, parts)
    got = M.forward(cfg, stacked, x, hx, cx, plan=qp)[:2]
    whole = ref.forward(cfg, params, x, hx, cx)
    rounded_w = ref.forward(cfg, M.unstack(cfg, M.weights_dequantized(stacked, qp)), x, hx, cx)
    for want in (whole, rounded_w):  # all rounding; the activations' rounding alone
        err = _relative_error(got, (want.y, want.hy))
        assert 1e-6 < err < BOUNDS[fmt], err
