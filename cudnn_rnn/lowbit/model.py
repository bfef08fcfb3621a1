"""The host model of the 8-bit RNN engine: an inference forward built from GEMMs, in float64.

cuDNN's RNN API refuses INT8 and FP8, so the GPU engine builds the forward from cuBLASLt
GEMMs, and this module is its exact numpy twin, organised the same way. Per layer and
direction (pseudo-layer ``layer * dirs + direction``):

* the *input GEMM*: the layer input of all T steps, ``(T*B, in) @ W.T`` -> ``(T*B, gates*hidden)``;
* per step the *recurrent GEMM*: ``(B, proj) @ R.T`` -> ``(B, gates*hidden)``;
  for an LSTM with a projection also ``hh @ P.T`` -> ``(B, proj)`` (part of "recurrent");
* the gate math elementwise in float (float64 here, FP32 on the GPU), biases added after
  the GEMMs (``bR`` kept apart because GRU's ``n`` gate multiplies it by ``r``).

A :class:`QuantPlan` makes chosen GEMMs 8-bit. INT8: activations per tensor, weights per
output channel (row of the stacked matrix), int32 accumulation, result ``acc * act_scale *
w_scale[row]``. FP8 E4M3: activations and weights per tensor, the E4M3 values multiplied and
summed in float64 (exact for these products; the GPU sums in FP32), times ``act_scale *
w_scale``. Scales come from :func:`calibrate` (max |operand| of a float64 run) and
:func:`plan`. Sequences all have length T (no per-sequence lengths).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cudnn_rnn.bindings.enums import RNNMode
from cudnn_rnn.check.reference import LayerParams, array_module
from cudnn_rnn.engine import walk
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.lowbit import quant

FORMATS = ("int8", "e4m3")
PARTS = ("input", "recurrent", "both")
GEMMS = ("input", "recurrent", "projection")  # the activation operands calibrate measures


@dataclass
class Stacked:
    """One pseudo-layer's weights as the GEMMs take them: gate blocks in cuDNN's order
    (RELU/TANH h; LSTM i,f,g,o; GRU r,z,n) stacked along the rows, gate k at rows
    ``k*hidden:(k+1)*hidden``. ``W`` is None for a SKIP_INPUT first layer (its input then
    enters every gate as is); biases are zeros where the bias mode has none."""
    W: np.ndarray | None  # (gates*hidden, layer_input)
    R: np.ndarray  # (gates*hidden, proj)
    bW: np.ndarray  # (gates*hidden,)
    bR: np.ndarray  # (gates*hidden,)
    P: np.ndarray | None = None  # LSTM projection (proj, hidden)


def stack(cfg: RNNConfig, params: list[LayerParams]) -> list[Stacked]:
    """The reference's per-gate LayerParams as :class:`Stacked`, one per pseudo-layer."""
    zeros = np.zeros(cfg.hidden_size)
    rows = lambda blocks: np.concatenate([zeros if b is None else b for b in blocks])  # noqa: E731
    return [Stacked(W=None if p.W[0] is None else np.concatenate(p.W, axis=0),
                    R=np.concatenate(p.R, axis=0), bW=rows(p.bW), bR=rows(p.bR), P=p.P)
            for p in params]


def moved(stacked: list[Stacked], xp) -> list[Stacked]:
    """``stacked`` as ``xp`` arrays (cupy: the float64 model then runs on the GPU)."""
    return [Stacked(*(None if a is None else xp.asarray(a) for a in (s.W, s.R, s.bW, s.bR, s.P)))
            for s in stacked]


def unstack(cfg: RNNConfig, stacked: list[Stacked]) -> list[LayerParams]:
    """Inverse of :func:`stack` (biases come back as arrays, zeros where there were none),
    so stacked weights can be fed to :func:`cudnn_rnn.check.reference.forward`."""
    H, g = cfg.hidden_size, cfg.gates
    split = lambda a: [None if a is None else a[k * H:(k + 1) * H] for k in range(g)]  # noqa: E731
    return [LayerParams(W=split(s.W), R=split(s.R), bW=split(s.bW), bR=split(s.bR), P=s.P)
            for s in stacked]


@dataclass(frozen=True)
class GemmScales:
    """Scales of one quantized GEMM: ``act`` for the activation operand (per tensor) and
    ``weight`` for the weight: a float (per tensor: E4M3 by default), or one per weight row,
    shape (rows,) (per output channel: INT8, and E4M3 when a plan asks for it)."""
    act: float
    weight: float | np.ndarray


@dataclass(frozen=True, eq=False)
class QuantPlan:
    """Which GEMMs are 8-bit, in which format, with which scales. ``input``, ``recurrent``
    and ``projection`` hold one :class:`GemmScales` per pseudo-layer, or None where that
    GEMM runs in float (not among ``parts``, or absent: no W under SKIP_INPUT, no P)."""
    fmt: str  # "int8" or "e4m3"
    parts: str  # "input", "recurrent" (recurrent and projection GEMMs) or "both"
    input: tuple
    recurrent: tuple
    projection: tuple


# ---------------------------------------------------------------------------- one GEMM
def weight_column(scales: GemmScales):
    """A weight scale as it broadcasts over ``w[out, in]``: (out, 1) per channel, else a
    scalar."""
    w_scale = np.asarray(scales.weight, dtype=np.float64)
    return w_scale.reshape(-1, 1) if w_scale.ndim else w_scale


def weight_side(w, scales: GemmScales, fmt: str):
    """The weight operand as an 8-bit GEMM takes it: int8 codes (INT8) or the float64
    values of the E4M3 codes (E4M3), before the output scale; numpy or cupy as ``w``."""
    if fmt == "int8":
        return quant.quantize_int8(w, weight_column(scales))
    if fmt == "e4m3":
        xp = array_module(w)
        return quant.decode_e4m3(quant.quantize_e4m3(w, weight_column(scales))).astype(xp.float64)
    raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")


def gemm(a: np.ndarray, w: np.ndarray, scales: GemmScales | None, fmt: str | None,
         w_side=None) -> np.ndarray:
    """``a @ w.T`` for a (M, K) and w (N, K): in float64 when ``scales`` is None, else as
    the 8-bit engine computes it from quantized operands (see the module docstring);
    ``w_side`` is :func:`weight_side` of ``w`` when the caller keeps it between steps. numpy
    or cupy; on the GPU the INT8 products are summed in float64, exact as long as
    K * 127**2 < 2**53 (as the int32 sum is for K <= quant.INT8_GEMM_SAFE_K)."""
    if scales is None:
        return a @ w.T
    xp = array_module(a)
    w_side = weight_side(w, scales, fmt) if w_side is None else w_side
    w_col = weight_column(scales)
    out_scale = xp.asarray(scales.act * np.ravel(scales.weight) if w_col.ndim
                           else scales.act * float(w_col))
    if fmt == "int8":
        a_q = quant.quantize_int8(a, scales.act)
        if xp is np:
            return quant.gemm_int32(a_q, w_side.T) * out_scale
        return (a_q.astype(xp.float64) @ w_side.astype(xp.float64).T) * out_scale
    a_8 = quant.decode_e4m3(quant.quantize_e4m3(a, scales.act)).astype(xp.float64)
    return (a_8 @ w_side.T) * out_scale


# ---------------------------------------------------------------------------- forward
def _sigmoid(a):
    return 0.5 * (1.0 + array_module(a).tanh(0.5 * a))


def _direction(cfg: RNNConfig, s: Stacked, xs, h, c, run_gemm):
    """One direction over xs (T, B, in), already in processing order; ``run_gemm(name, a,
    w)`` does each GEMM. Returns the outputs (T, B, proj) and the last h and c."""
    xp = array_module(xs)
    T, B, _ = xs.shape
    g, H, mode = cfg.gates, cfg.hidden_size, cfg.mode
    flat = xs.reshape(T * B, -1)
    gx = xp.tile(flat, g) if s.W is None else run_gemm("input", flat, s.W)
    gx = (gx + s.bW).reshape(T, B, g, H)
    outs = []
    for t in range(T):
        gh = (run_gemm("recurrent", h, s.R) + s.bR).reshape(B, g, H)
        pre = gx[t] + gh
        if mode == RNNMode.RNN_RELU:
            h = xp.maximum(pre[:, 0], 0.0)
        elif mode == RNNMode.RNN_TANH:
            h = xp.tanh(pre[:, 0])
        elif mode == RNNMode.LSTM:
            i, f, o = _sigmoid(pre[:, 0]), _sigmoid(pre[:, 1]), _sigmoid(pre[:, 3])
            c = f * c + i * xp.tanh(pre[:, 2])
            hh = o * xp.tanh(c)
            h = hh if s.P is None else run_gemm("projection", hh, s.P)
        elif mode == RNNMode.GRU:
            r, z = _sigmoid(pre[:, 0]), _sigmoid(pre[:, 1])
            n = xp.tanh(gx[t][:, 2] + r * gh[:, 2])
            h = (1.0 - z) * n + z * h
        else:
            raise ValueError(mode)
        outs.append(h)
    return xp.stack(outs), h, c


def _run(cfg, stacked, x, hx, cx, plan, observe):
    """The network; ``observe(pseudo_layer, gemm_name, operand)`` sees every activation
    operand (for calibration)."""
    lstm = cfg.mode == RNNMode.LSTM
    xp = array_module(x)
    x, hx = xp.asarray(x, xp.float64), xp.asarray(hx, xp.float64)
    cx = xp.asarray(cx, xp.float64) if lstm else None
    hy, cy = xp.empty_like(hx), (xp.empty_like(cx) if lstm else None)
    layer_in = x
    sides = {}  # the quantized weights, once per GEMM rather than once per step
    for layer in walk.layers(cfg):
        outs = []
        for p in layer:
            k = p.index

            def run_gemm(name, a, w, k=k):
                if observe is not None:
                    observe(k, name, a)
                scales = None if plan is None else getattr(plan, name)[k]
                if scales is None:
                    return gemm(a, w, None, None)
                if (k, name) not in sides:
                    sides[(k, name)] = weight_side(w, scales, plan.fmt)
                return gemm(a, w, scales, plan.fmt, sides[(k, name)])

            ys, hy[k], c_last = _direction(cfg, stacked[k], p.in_order(layer_in), hx[k],
                                           cx[k] if lstm else None, run_gemm)
            if lstm:
                cy[k] = c_last
            outs.append(p.in_order(ys))
        layer_in = walk.joined(outs, xp)
    return layer_in, hy, cy


def forward(cfg: RNNConfig, stacked: list[Stacked], x, hx, cx=None,
            plan: QuantPlan | None = None):
    """(y, hy, cy) for x (T, B, input), hx (L*D, B, proj), cx (L*D, B, hidden; LSTM only),
    shapes as in :func:`cudnn_rnn.check.reference.forward`; the GEMMs that ``plan`` names
    are 8-bit (None: all float64, which equals the reference). cy is None but for LSTM."""
    return _run(cfg, stacked, x, hx, cx, plan, None)


# ---------------------------------------------------------------------------- scales
def observe(cfg: RNNConfig, stacked: list[Stacked], x, hx, cx, fn) -> None:
    """Run the float64 network and call ``fn(pseudo_layer, gemm_name, operand)`` with every
    activation operand of every GEMM, in order (numpy or cupy, as the inputs)."""
    _run(cfg, stacked, x, hx, cx, None, fn)


def calibrate(cfg: RNNConfig, stacked: list[Stacked], x, hx, cx=None) -> dict:
    """max |operand| of each GEMM's activation over a float64 run: ``{"input": [...],
    "recurrent": [...], "projection": [...]}``, one float per pseudo-layer. Runs in numpy,
    or on the GPU when the weights and inputs are cupy arrays. "input" is the
    layer input over all steps; "recurrent" every h fed to R, hx included; "projection"
    every hh fed to P. None where that GEMM does not exist (SKIP_INPUT's W, no P)."""
    seen = {name: [None] * len(stacked) for name in GEMMS}

    def seen_max(k, name, a):
        m = float(quant.amax(a))
        seen[name][k] = m if seen[name][k] is None else max(seen[name][k], m)

    observe(cfg, stacked, x, hx, cx, seen_max)
    return seen


def _weight_scale(w: np.ndarray, fmt: str, channel: bool):
    rule = quant.int8_scale if fmt == "int8" else quant.e4m3_scale
    if channel:
        return np.asarray(rule(quant.amax(w, axis=0))).ravel()
    return float(rule(quant.amax(w)))


def quantized(parts: str) -> tuple:
    """The GEMMs (of :data:`GEMMS`) a plan on ``parts`` runs in 8 bits, where they exist: the
    projection goes with the recurrent product it feeds."""
    return {"input": ("input",), "recurrent": ("recurrent", "projection"),
            "both": GEMMS}[parts]


def plan(cfg: RNNConfig, stacked: list[Stacked], amaxes: dict, fmt: str,
         parts: str, channel: bool | None = None) -> QuantPlan:
    """Scales: an activation's from its ``amaxes`` entry (max |x| from :func:`calibrate`, or
    the threshold another calibration method chose: values beyond it saturate), a weight's
    from the weight's max |w|, per output channel (row) when ``channel`` is true, else per
    tensor; ``channel=None`` is per channel for INT8 and per tensor for E4M3."""
    if fmt not in FORMATS or parts not in PARTS:
        raise ValueError(f"fmt must be in {FORMATS} and parts in {PARTS}, got {fmt!r}, {parts!r}")
    act_scale = quant.int8_scale if fmt == "int8" else quant.e4m3_scale
    channel = fmt == "int8" if channel is None else channel
    chosen = {name: name in quantized(parts) for name in GEMMS}
    weights = {"input": lambda s: s.W, "recurrent": lambda s: s.R, "projection": lambda s: s.P}
    scales = {}
    for name in GEMMS:
        per_layer = []
        for k, s in enumerate(stacked):
            w = weights[name](s)
            per_layer.append(None if w is None or not chosen[name] else GemmScales(
                act=float(act_scale(amaxes[name][k])), weight=_weight_scale(w, fmt, channel)))
        scales[name] = tuple(per_layer)
    return QuantPlan(fmt=fmt, parts=parts, **scales)


def weights_dequantized(stacked: list[Stacked], plan: QuantPlan) -> list[Stacked]:
    """The weights as the plan's 8-bit GEMMs see them (quantize-dequantize images; float
    GEMMs' weights and all biases unchanged). Running these in float64 isolates the error
    of rounding the activations."""
    def image(w, scales):
        if scales is None:
            return w
        if plan.fmt == "int8":
            return quant.fake_quant_int8(w, weight_column(scales))
        return quant.fake_quant_e4m3(w, weight_column(scales))

    return [Stacked(W=image(s.W, plan.input[k]), R=image(s.R, plan.recurrent[k]),
                    bW=s.bW, bR=s.bR, P=image(s.P, plan.projection[k]))
            for k, s in enumerate(stacked)]
