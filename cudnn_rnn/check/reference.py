"""An independent float64 model of cuDNN's RNNs: forward (y, hy, cy) and gradients.

Written from cuDNN's documented cell equations, not from its code, so the flow
can check what cuDNN computed. Conventions follow cuDNN:

* weights per *pseudo-layer* ``layer * dirs + direction``; gate order
  RELU/TANH ``(h)``, LSTM ``(i, f, g, o)``, GRU ``(r, z, n)``; ``W`` multiplies the
  layer input, ``R`` the recurrent state; every matrix is row-major
  ``(gate_rows, input_columns)``, so a pre-activation is ``x @ W.T``;
* LSTM ``c' = f*c + i*g``, ``h = o*tanh(c')``, with an optional projection
  ``r = h @ P.T`` that becomes the recurrent state and output;
* GRU ``n = tanh(W_n x + bW_n + r*(R_n h + bR_n))``, ``h' = (1-z)*n + z*h``;
* SKIP_INPUT: the first layer has no ``W``; its input enters every gate as is;
* bidirectional: direction 1 reads the sequence backwards and its outputs
  follow direction 0's in the feature dimension of ``y``.

Gradients are those of the scalar ``L = Σ y·dy + Σ hy·dhy + Σ cy·dcy``, which is
what cudnnRNNBackwardData_v8 / cudnnRNNBackwardWeights_v8 compute for given
``dy``, ``dhy`` and ``dcy``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cudnn_rnn.bindings.enums import RNNBiasMode, RNNInputMode, RNNMode
from cudnn_rnn.engine import walk
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.engine.weights import PROJECTION_ID


@dataclass
class LayerParams:
    """Weights of one pseudo-layer; ``None`` marks a matrix or bias cuDNN does not have."""
    W: list  # per gate: (hidden, layer_input) or None (SKIP_INPUT, first layer)
    R: list  # per gate: (hidden, proj)
    bW: list  # per gate: (hidden,) or None
    bR: list  # per gate: (hidden,) or None
    P: np.ndarray | None = None  # LSTM projection (proj, hidden)

    def zeros_like(self) -> "LayerParams":
        z = lambda a: None if a is None else array_module(a).zeros_like(a)  # noqa: E731
        return LayerParams([z(a) for a in self.W], [z(a) for a in self.R],
                           [z(a) for a in self.bW], [z(a) for a in self.bR], z(self.P))


@dataclass
class Forward:
    y: np.ndarray  # (T, B, proj*dirs)
    hy: np.ndarray  # (layers*dirs, B, proj)
    cy: np.ndarray | None  # (layers*dirs, B, hidden) for LSTM
    caches: list = field(default_factory=list, repr=False)


@dataclass
class Gradients:
    dx: np.ndarray
    dhx: np.ndarray
    dcx: np.ndarray | None
    dparams: list  # LayerParams per pseudo-layer


def array_module(a):
    """numpy, or cupy for a cupy array: the reference runs in float64 on either."""
    if type(a).__module__.split(".")[0] == "cupy":
        import cupy  # here, not at the top: already imported wherever a cupy array exists
        return cupy
    return np


def _sigmoid(a):
    xp = array_module(a)
    return 0.5 * (1.0 + xp.tanh(0.5 * a))


def random_params(cfg: RNNConfig, rng: np.random.Generator, scale: float | None = None) -> list:
    """Random weights of the shapes cuDNN uses (for tests that need no library)."""
    s = scale if scale is not None else 1.0 / np.sqrt(cfg.hidden_size)
    u = lambda *shape: rng.uniform(-s, s, size=shape)  # noqa: E731
    has_w_bias = cfg.bias_mode in (RNNBiasMode.SINGLE_INP_BIAS, RNNBiasMode.DOUBLE_BIAS)
    has_r_bias = cfg.bias_mode in (RNNBiasMode.SINGLE_REC_BIAS, RNNBiasMode.DOUBLE_BIAS)
    params = []
    for p in walk.pseudo_layers(cfg):
        skip = p.layer == 0 and cfg.input_mode == RNNInputMode.SKIP_INPUT
        inp = walk.layer_input_size(cfg, p.layer)
        g = cfg.gates
        params.append(LayerParams(
            W=[None if skip else u(cfg.hidden_size, inp) for _ in range(g)],
            R=[u(cfg.hidden_size, cfg.proj_size) for _ in range(g)],
            bW=[u(cfg.hidden_size) if has_w_bias else None for _ in range(g)],
            bR=[u(cfg.hidden_size) if has_r_bias else None for _ in range(g)],
            P=u(cfg.proj_size, cfg.hidden_size) if cfg.linear_layers == 9 else None,
        ))
    return params


# ---------------------------------------------------------------------------- one direction
def _input_side(p: LayerParams, xs: np.ndarray) -> list:
    """Pre-activations from the layer input for all steps at once: x @ W.T + bW."""
    out = []
    for W, bW in zip(p.W, p.bW):
        a = xs.copy() if W is None else xs @ W.T
        if bW is not None:
            a = a + bW
        out.append(a)
    return out


def _run_direction(mode: RNNMode, p: LayerParams, xs, h0, c0, active=None):
    """Forward over one batch of sequences (already in processing order). ``active``
    (T, B, 1) says which sequences have a step at each time (None: all): an inactive
    sequence keeps its state and outputs the padding fill, 0, so each sequence runs to its
    own length, and in reverse order starts at its own end."""
    xp = array_module(xs)  # numpy or cupy
    T = xs.shape[0]
    gx = _input_side(p, xs)
    h, c = h0, c0
    outs, steps = [], []
    for t in range(T):
        gh = [h @ R.T + (0.0 if bR is None else bR) for R, bR in zip(p.R, p.bR)]
        step = {"h_prev": h, "c_prev": c, "active": None if active is None else active[t]}
        if mode in (RNNMode.RNN_RELU, RNNMode.RNN_TANH):
            a = gx[0][t] + gh[0]
            hn = xp.maximum(a, 0.0) if mode == RNNMode.RNN_RELU else xp.tanh(a)
            step.update(a=a, hh=hn)
        elif mode == RNNMode.LSTM:
            i = _sigmoid(gx[0][t] + gh[0])
            f = _sigmoid(gx[1][t] + gh[1])
            g = xp.tanh(gx[2][t] + gh[2])
            o = _sigmoid(gx[3][t] + gh[3])
            c = f * c + i * g
            tc = xp.tanh(c)
            hh = o * tc
            step.update(i=i, f=f, g=g, o=o, tc=tc, hh=hh)
            hn = hh if p.P is None else hh @ p.P.T
        elif mode == RNNMode.GRU:
            r = _sigmoid(gx[0][t] + gh[0])
            z = _sigmoid(gx[1][t] + gh[1])
            n = xp.tanh(gx[2][t] + r * gh[2])
            hn = (1.0 - z) * n + z * h
            step.update(r=r, z=z, n=n, ghn=gh[2], hh=hn)
        else:  # pragma: no cover
            raise ValueError(mode)
        if active is None:
            h = hn
            outs.append(h)
        else:
            m = active[t]
            h = xp.where(m, hn, step["h_prev"])
            if c is not None:
                c = xp.where(m, c, step["c_prev"])
            outs.append(xp.where(m, hn, 0.0))
        steps.append(step)
    return xp.stack(outs), h, c, {"xs": xs, "steps": steps}


def _back_direction(mode: RNNMode, p: LayerParams, cache, d_out, dh_last, dc_last,
                    switched=None):
    """Backward through one direction; returns d(layer input), dh0, dc0 and dparams.
    ``switched`` ({t: [(b, unit), ...]}, steps in processing order): ReLU derivatives
    taken on the other side of zero (see :mod:`cudnn_rnn.check.kinks`)."""
    xs, steps = cache["xs"], cache["steps"]
    xp = array_module(xs)  # numpy or cupy
    T = xs.shape[0]
    dp = p.zeros_like()
    g = len(p.R)
    dgx = [xp.zeros((T,) + dh_last.shape[:1] + (p.R[0].shape[0],)) for _ in range(g)]
    dh, dc = dh_last, dc_last
    for t in reversed(range(T)):
        s = steps[t]
        m = s.get("active")
        dh_keep = dc_keep = 0.0  # what an inactive sequence passes by unchanged
        if m is None:
            dh = dh + d_out[t]
        else:
            dh_keep = xp.where(m, 0.0, dh)
            dh = xp.where(m, dh + d_out[t], 0.0)
            if dc is not None:
                dc_keep = xp.where(m, 0.0, dc)
                dc = xp.where(m, dc, 0.0)
        h_prev = s["h_prev"]
        dgh = [None] * g
        if mode in (RNNMode.RNN_RELU, RNNMode.RNN_TANH):
            if mode == RNNMode.RNN_RELU:
                slope = s["a"] > 0
                for b, u in (switched or {}).get(t, ()):
                    slope[b, u] = not bool(slope[b, u])
                da = dh * slope
            else:
                da = dh * (1.0 - s["hh"] ** 2)
            dgx[0][t] = da
            dgh[0] = da
        elif mode == RNNMode.LSTM:
            if p.P is not None:
                dp.P += dh.T @ s["hh"]
                dhh = dh @ p.P
            else:
                dhh = dh
            i, f, gg, o, tc = s["i"], s["f"], s["g"], s["o"], s["tc"]
            dct = dc + dhh * o * (1.0 - tc ** 2)
            das = [dct * gg * i * (1.0 - i), dct * s["c_prev"] * f * (1.0 - f),
                   dct * i * (1.0 - gg ** 2), dhh * tc * o * (1.0 - o)]
            dc = dct * f
            for k in range(4):
                dgx[k][t] = das[k]
                dgh[k] = das[k]
        else:  # GRU
            r, z, n, ghn = s["r"], s["z"], s["n"], s["ghn"]
            dn = dh * (1.0 - z)
            dz = dh * (h_prev - n)
            dan = dn * (1.0 - n ** 2)
            dgx[2][t] = dan
            dgh[2] = dan * r
            dgx[0][t] = dgh[0] = (dan * ghn) * r * (1.0 - r)
            dgx[1][t] = dgh[1] = dz * z * (1.0 - z)
            dh_carry = dh * z
        dh_prev = dh_carry if mode == RNNMode.GRU else 0.0
        for k in range(g):
            dp.R[k] += dgh[k].T @ h_prev
            if dp.bR[k] is not None:
                dp.bR[k] += dgh[k].sum(axis=0)
            dh_prev = dh_prev + dgh[k] @ p.R[k]
        dh = dh_prev + dh_keep
        if dc is not None:
            dc = dc + dc_keep
    dxs = xp.zeros_like(xs)
    for k in range(g):
        if p.W[k] is None:
            dxs += dgx[k]
        else:
            dp.W[k] += xp.einsum("tbh,tbi->hi", dgx[k], xs)
            dxs += dgx[k] @ p.W[k]
        if dp.bW[k] is not None:
            dp.bW[k] += dgx[k].sum(axis=(0, 1))
    return dxs, dh, dc, dp


# ---------------------------------------------------------------------------- whole network
def active_steps(lengths, T: int, xp=np):
    """(T, B, 1) booleans: sequence b has a step at time t (t < lengths[b])."""
    lengths = xp.asarray(lengths)
    return (xp.arange(T)[:, None] < lengths[None, :])[..., None]


def forward(cfg: RNNConfig, params: list, x, hx, cx=None, lengths=None) -> Forward:
    """y, hy, cy of the network for x (T, B, input), hx (L*D, B, proj), cx (L*D, B, hidden).

    ``lengths`` (B,) gives each sequence's own length (None: all T): past its end a
    sequence's outputs are the padding fill, 0, ``hy``/``cy`` are its state at its last
    step, and the reverse direction starts at its own end. Arrays may be numpy or cupy
    (all of one kind); the arithmetic is float64 either way.
    """
    xp = array_module(x)  # numpy or cupy
    x = xp.asarray(x, dtype=xp.float64)
    hx = xp.asarray(hx, dtype=xp.float64)
    lstm = cfg.mode == RNNMode.LSTM
    cx = xp.asarray(cx, dtype=xp.float64) if lstm else None
    hy = xp.empty_like(hx)
    cy = xp.empty_like(cx) if lstm else None
    layer_in = x
    caches = []
    active = None if lengths is None else active_steps(lengths, x.shape[0], xp)
    for layer in walk.layers(cfg):
        outs = []
        for p in layer:
            k = p.index
            mask = None if active is None else p.in_order(active)
            ys, hT, cT, cache = _run_direction(cfg.mode, params[k], p.in_order(layer_in), hx[k],
                                               cx[k] if lstm else None, mask)
            outs.append(p.in_order(ys))
            hy[k] = hT
            if lstm:
                cy[k] = cT
            caches.append(cache)
        layer_in = walk.joined(outs, xp)
    return Forward(layer_in, hy, cy, caches)


def backward(cfg: RNNConfig, params: list, fwd: Forward, dy, dhy, dcy=None,
             switched=None) -> Gradients:
    """dx, dhx, dcx and weight gradients of L = Σ y·dy + Σ hy·dhy + Σ cy·dcy.
    ``switched``: {layer·dirs + direction: {t: [(b, unit), ...]}} ReLU derivatives to take
    on the other side of zero."""
    xp = array_module(dy)  # numpy or cupy
    lstm = cfg.mode == RNNMode.LSTM
    dy = xp.asarray(dy, dtype=xp.float64)
    dhy = xp.asarray(dhy, dtype=xp.float64)
    dcy = xp.asarray(dcy, dtype=xp.float64) if lstm else None
    dhx = xp.empty_like(dhy)
    dcx = xp.empty_like(dcy) if lstm else None
    dparams: list = [None] * len(params)
    d_layer_out = dy
    P = cfg.proj_size
    for layer in reversed(walk.layers(cfg)):
        d_in = None
        for p in layer:
            k, d = p.index, p.direction
            d_out = p.in_order(d_layer_out[..., d * P:(d + 1) * P])
            dxs, dh0, dc0, dp = _back_direction(
                cfg.mode, params[k], fwd.caches[k], d_out, dhy[k],
                dcy[k] if lstm else None, (switched or {}).get(k))
            dxs = p.in_order(dxs)
            d_in = dxs if d_in is None else d_in + dxs
            dhx[k] = dh0
            if lstm:
                dcx[k] = dc0
            dparams[k] = dp
        d_layer_out = d_in
    return Gradients(d_layer_out, dhx, dcx, dparams)


def loss(fwd: Forward, dy, dhy, dcy=None) -> float:
    """The scalar whose gradients :func:`backward` returns."""
    total = float((fwd.y * dy).sum() + (fwd.hy * dhy).sum())
    if fwd.cy is not None and dcy is not None:
        total += float((fwd.cy * dcy).sum())
    return total


def flat_params(params: list) -> list:
    """Every array in ``params`` in a fixed order (for finite differences and norms)."""
    out = []
    for p in params:
        for group in (p.W, p.R, p.bW, p.bR):
            out.extend(a for a in group if a is not None)
        if p.P is not None:
            out.append(p.P)
    return out


# ---------------------------------------------------------------------------- cuDNN's weight layout
def params_from_arrays(cfg: RNNConfig, arrays: dict) -> list[LayerParams]:
    """cuDNN's weight entries, by (pseudo_layer, lin_id, kind) as
    :func:`cudnn_rnn.engine.readback.weight_arrays` gives them, as :class:`LayerParams` per
    pseudo-layer: IDs 0..gates-1 are the input matrices W (and biases bW), gates..2·gates-1
    the recurrent ones R (bR), ID 8 LSTM's projection P."""
    g = cfg.gates
    params = []
    for pseudo in range(cfg.pseudo_layers):
        get = lambda lin, kind: arrays.get((pseudo, lin, kind))  # noqa: E731
        params.append(LayerParams(
            W=[get(k, "matrix") for k in range(g)],
            R=[get(g + k, "matrix") for k in range(g)],
            bW=[get(k, "bias") for k in range(g)],
            bR=[get(g + k, "bias") for k in range(g)],
            P=get(PROJECTION_ID, "matrix") if cfg.mode == RNNMode.LSTM else None,
        ))
    return params


def arrays_from_params(cfg: RNNConfig, params: list[LayerParams]) -> dict:
    """Inverse of :func:`params_from_arrays` (for gradients of the reference)."""
    g = cfg.gates
    out = {}
    for pseudo, p in enumerate(params):
        for k in range(g):
            for key, arr in (((k, "matrix"), p.W[k]), ((g + k, "matrix"), p.R[k]),
                             ((k, "bias"), p.bW[k]), ((g + k, "bias"), p.bR[k])):
                if arr is not None:
                    out[(pseudo,) + key] = arr
        if p.P is not None:
            out[(pseudo, PROJECTION_ID, "matrix")] = p.P
    return out

