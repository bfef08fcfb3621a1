"""A numpy model of the persistent kernel: the partition of :mod:`cudnn_rnn.lowbit.partition`
run in float64, CTA by CTA, in an order the wait table allows, reading its weights from the
blob's bytes exactly as ``persistent.cu`` does (chunks, k-groups, gate-major rows).

Every state slot starts as NaN, so a step that reads a slot before its writer finished (a
wait target too low) makes NaN, and :func:`run` raises; a step whose waits can never be met
(a target too high) leaves every CTA blocked, and :func:`run` raises. Activations are not
rounded (the twin's 16-bit GEMMs are float64 too), INT8 and E4M3 activations are quantized
by the host rules the twin uses, so the result equals the twin on the weights as seen.
"""
from __future__ import annotations

import numpy as np

from cudnn_rnn.bindings.enums import DataType, RNNMode
from cudnn_rnn.engine import dtypes, walk
from cudnn_rnn.lowbit import model, quant, tables
from cudnn_rnn.lowbit.partition import CHUNK, FORMAT_BYTES, Partition
from cudnn_rnn.lowbit.tables import waits


def decode(raw: np.ndarray, fmt: str) -> np.ndarray:
    """float64 values of a row of code bytes in ``fmt``."""
    if fmt == "fp16":
        return raw.view(np.float16).astype(np.float64)
    if fmt == "bf16":
        return dtypes.decode(raw.view(np.uint16), DataType.BFLOAT16).astype(np.float64)
    if fmt == "int8":
        return raw.view(np.int8).astype(np.float64)
    return quant.decode_e4m3(raw).astype(np.float64)


def activation(v: np.ndarray, fmt: str, scale: float) -> np.ndarray:
    """What the tensor cores multiply for h = v: the code's value (not rounded in 16 bits,
    as the twin's float64 GEMMs)."""
    if fmt == "int8":
        return quant.quantize_int8(v, scale).astype(np.float64)
    if fmt == "e4m3":
        return quant.decode_e4m3(quant.quantize_e4m3(v, scale)).astype(np.float64)
    return v


def _sig(a):
    return 0.5 * (1.0 + np.tanh(0.5 * a))


def _cell(mode, X, R, h, c):
    if mode == RNNMode.RNN_RELU:
        return np.maximum(X[0] + R[0], 0.0), c
    if mode == RNNMode.RNN_TANH:
        return np.tanh(X[0] + R[0]), c
    if mode == RNNMode.LSTM:
        c = _sig(X[1] + R[1]) * c + _sig(X[0] + R[0]) * np.tanh(X[2] + R[2])
        return _sig(X[3] + R[3]) * np.tanh(c), c
    r, z = _sig(X[0] + R[0]), _sig(X[1] + R[1])
    return (1.0 - z) * np.tanh(X[2] + r * R[2]) + z * h, c


class Model:
    """The kernel's state in float64: slots of h and of each layer input, counters."""

    def __init__(self, part: Partition, blob: np.ndarray, vectors: list, gx0: list,
                 hx, cx, scales: dict, x=None):
        """``x``: the input, which layer 0 multiplies itself where ``part.input_inside``
        (its codes in its layer-input slots before the launch, as the engine writes them)."""
        cfg = self.cfg = part.cfg
        self.part, self.blob, self.vectors, self.gx0 = part, blob, vectors, gx0
        T, B, H, D = cfg.seq_length, cfg.mini_batch, cfg.hidden_size, cfg.dirs
        self.hwidth = part.hrowb // FORMAT_BYTES[part.fh]
        self.xwidth = part.xrowb // FORMAT_BYTES[part.fx] if part.fx else 0
        L = cfg.pseudo_layers
        self.hq = np.full((L, T + 1, B, self.hwidth), np.nan)
        self.hq[:, :, :, H:] = 0.0  # padding: zero bytes in the kernel's buffers
        self.xin = np.full((L, T, B, max(self.xwidth, 1)), np.nan)
        self.xin[:, :, :, D * H:] = 0.0
        for p in walk.layers(cfg)[0] if part.input_inside else []:
            self.xin[p.index] = 0.0
            self.xin[p.index, :, :, :cfg.input_size] = activation(
                np.asarray(x, np.float64), part.fx, scales["x"][p.index])
        self.y = np.full((T, B, D * H), np.nan)
        self.hy = np.full((L, B, H), np.nan)
        self.cy = np.full((L, B, H), np.nan)
        self.hx, self.cx, self.scales = hx, cx, scales
        self.counters = np.zeros(len(part.groups), dtype=np.int64)
        self.waits = waits(part)
        self.pls = walk.pseudo_layers(cfg)

    def weights(self, s) -> tuple[np.ndarray, np.ndarray]:
        """The slice's rows from the blob: (input part, recurrent part) as float64."""
        rows = tables.rows(self.part, self.blob, s)
        xb, hb = s.nxc * CHUNK, (s.nc - s.nxc) * CHUNK
        wx = np.stack([decode(r[:xb].copy(), self.part.fx) for r in rows]) if xb else None
        wh = np.stack([decode(r[xb:xb + hb].copy(), self.part.fh) for r in rows])
        return wx, wh

    def start(self, s, own):
        """What the kernel does before step 0: h0 (c0) in, h0's codes into slot 0."""
        p = self.pls[s.k]
        rows, units = slice(s.b0, s.b0 + s.nb), slice(s.j0, s.j0 + s.nu)
        own["h"] = self.hx[p.index][rows, units].copy()
        own["c"] = None if self.cx is None else self.cx[p.index][rows, units].copy()
        self.hq[p.index, 0, rows, units] = activation(own["h"], self.part.fh,
                                                      self.scales["h"][p.index])

    def step(self, s, own, step: int, wx, wh):
        cfg, part = self.cfg, self.part
        p = self.pls[s.k]
        T, B, H = cfg.seq_length, cfg.mini_batch, cfg.hidden_size
        t = p.time(step, T)
        rows, units = slice(s.b0, s.b0 + s.nb), slice(s.j0, s.j0 + s.nu)
        xstate = self.xin[p.index, t, rows, :self.xwidth] if s.nxc else None
        hstate = self.hq[p.index, step, rows, :]
        if np.isnan(hstate).any() or (xstate is not None and np.isnan(xstate).any()):
            raise AssertionError(f"CTA of pseudo-layer {s.k} units {s.j0}+ read an unwritten "
                                 f"slot at step {step}")
        sx = np.zeros((s.mpad, s.nb))
        sh = np.zeros((s.mpad, s.nb))
        for kg in range(s.ks):  # each k-group's chunks, as the kernel splits K
            for c in s.chunks(kg):
                if c < s.nxc:
                    f = slice(c * CHUNK // FORMAT_BYTES[part.fx],
                              (c + 1) * CHUNK // FORMAT_BYTES[part.fx])
                    sx += wx[:, f] @ xstate[:, f].T
                else:
                    w = FORMAT_BYTES[part.fh]
                    f = slice((c - s.nxc) * CHUNK // w, (c - s.nxc + 1) * CHUNK // w)
                    sh += wh[:, f] @ hstate[:, f].T
        v = self.vectors[p.index]
        X, R = [], []
        for q, r in enumerate(tables.gate_rows(part, s)):  # the rows of gate q, unit by unit
            cols = slice(q * H + s.j0, q * H + s.j0 + s.nu)
            if p.layer == 0 and not s.nxc:
                x_part = self.gx0[p.direction][t * B + s.b0:t * B + s.b0 + s.nb, cols]
            else:
                x_part = (sx[r] * v["dqx"][cols][:, None]).T
            X.append(x_part + v["bW"][cols])
            R.append((sh[r] * v["dqh"][cols][:, None]).T + v["bR"][cols])
        h, c = _cell(cfg.mode, X, R, own["h"], own["c"])
        own["h"], own["c"] = h, c
        self.hq[p.index, step + 1, rows, units] = activation(h, part.fh, self.scales["h"][p.index])
        readers = walk.layers(cfg)[p.layer + 1] if p.layer + 1 < cfg.num_layers else []
        cols = slice(p.direction * H + s.j0, p.direction * H + s.j0 + s.nu)
        for r in readers:
            self.xin[r.index, t, rows, cols] = activation(h, part.fx, self.scales["x"][r.index])
        if not readers:
            self.y[t, rows, cols] = h
        if step == T - 1:
            self.hy[p.index, rows, units] = h
            if c is not None:
                self.cy[p.index, rows, units] = c

    def signals(self, s) -> bool:
        """Whether a CTA advances its group's counter after a step (as the kernel: in
        clusters only where a layer above reads it)."""
        return not self.part.cluster or \
            walk.pseudo_layers(self.cfg)[s.k].layer + 1 < self.cfg.num_layers

    def ready(self, cta: int, step: int, done: list) -> bool:
        """Whether ``cta``'s waits for ``step`` are met; in clusters also the cluster
        barrier: every CTA of its cluster (consecutive CTAs) has finished the step before."""
        c = self.part.cluster
        if c and min(done[cta - cta % c:cta - cta % c + c]) < step:
            return False
        return all(ctr < 0 or self.counters[ctr] >= target
                   for ctr, target in self.waits[cta, step])

    def run(self, seed: int = 0):
        """Every CTA to the end, the next runnable one drawn at random each time."""
        part, T = self.part, self.cfg.seq_length
        rng = np.random.default_rng(seed)
        own = [dict() for _ in part.slices]
        rows = [self.weights(s) for s in part.slices]
        for i, s in enumerate(part.slices):
            self.start(s, own[i])
            self.counters[s.ctr] += 1
        done = [0] * part.grid
        while min(done) < T:
            runnable = [i for i in range(part.grid)
                        if done[i] < T and self.ready(i, done[i], done)]
            if not runnable:
                raise AssertionError(f"deadlock: no CTA can take its next step ({done})")
            i = int(rng.choice(runnable))
            self.step(part.slices[i], own[i], done[i], *rows[i])
            if self.signals(part.slices[i]):
                self.counters[part.slices[i].ctr] += 1
            done[i] += 1
        return self.y, self.hy, (self.cy if self.cx is not None else None)


def first_layer_projection(cfg, stacked, x, plan) -> list:
    """Layer 0's input GEMM outputs, dequantized (what the kernel reads as gx times dqx),
    per direction, as the twin computes them."""
    flat = np.asarray(x, np.float64).reshape(cfg.seq_length * cfg.mini_batch, -1)
    out = []
    for p in walk.layers(cfg)[0]:  # in time order, as cuBLASLt computes it for each direction
        scales = None if plan is None else plan.input[p.index]
        out.append(model.gemm(flat, stacked[p.index].W, scales,
                              None if plan is None else plan.fmt))
    return out
