"""The RNN forward (inference) built from cuBLASLt GEMMs and CuPy kernels, on the GPU.

Per pseudo-layer (``layer * dirs + direction``), on one stream:

1. the layer input of all T steps in the input GEMM's operand format (one kernel);
2. the *input GEMM*: ``(T*B, in) @ W.T`` into a (T*B, gates*hidden) buffer, one call;
3. h and c start from hx and cx (copies into hy and cy, which the steps update in place),
   and hx in the recurrent GEMM's operand format (one kernel);
4. per step (in reverse order for direction 1): the *recurrent GEMM* ``(B, H) @ R.T``,
   then :func:`cudnn_rnn.lowbit.kernels.gates`, which writes h into y and, rounded, into
   the operand the next step's GEMM reads.

That is the host model :mod:`cudnn_rnn.lowbit.model` step for step, with FP32 gate math
and the GEMMs in the precisions :mod:`cudnn_rnn.lowbit.operands` chose. Everything is
enqueued; nothing synchronises, so :meth:`GemmEngine.forward` can be captured in a CUDA graph
and replayed. Not built: SKIP_INPUT, LSTM projection, variable sequence lengths
(:class:`Unsupported`, with the reason).
"""
from __future__ import annotations

import numpy as np

from cudnn_rnn.bindings.enums import RNNInputMode, RNNMode
from cudnn_rnn.engine import walk
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.engine.gpu import follow
from cudnn_rnn.lowbit import kernels
from cudnn_rnn.lowbit.gemm import LtHandle, Matmul, Shape, rnn_shapes
from cudnn_rnn.lowbit.operands import Operands, eight_bit_precisions, prepare

WORKSPACE_BYTES = 32 << 20  # the most any GEMM may use (cuBLAS's own default on Hopper)
# (compute capability major, minor) each precision's tensor-core GEMM needs
MIN_CAPABILITY = {"int8": (7, 5), "fp8": (8, 9), "bf16": (8, 0), "tf32": (8, 0)}


class Unsupported(ValueError):
    """What this engine does not build, or this GPU cannot run; the message says which."""


def check_supported(cfg: RNNConfig, precisions, capability: tuple[int, int]) -> None:
    """:class:`Unsupported` unless the engine builds ``cfg`` and this GPU (compute
    ``capability``) has tensor-core GEMMs of every one of ``precisions``."""
    if cfg.input_mode == RNNInputMode.SKIP_INPUT:
        raise Unsupported("the GEMM engine builds LINEAR_INPUT only (SKIP_INPUT has no input GEMM)")
    if cfg.mode == RNNMode.LSTM and cfg.proj_size != cfg.hidden_size:
        raise Unsupported("the GEMM engine builds no LSTM projection")
    if not cfg.equal_lengths:
        raise Unsupported("the GEMM engine runs sequences of equal length only")
    for p in sorted(set(precisions)):
        need = MIN_CAPABILITY.get(p)
        if need and tuple(capability) < need:
            raise Unsupported(f"{p} tensor-core GEMMs need compute capability "
                              f"{need[0]}.{need[1]}+, this GPU has {capability[0]}.{capability[1]}")


def capability(cp) -> tuple[int, int]:
    """This device's compute capability as (major, minor)."""
    cc = cp.cuda.Device().compute_capability  # e.g. "90"
    return int(cc[:-1]), int(cc[-1])


class Forward:
    """What both 8-bit engines share: x, hx, cx in and y, hy, cy out (cupy float32, set by
    :meth:`_io`), the outputs by name in :attr:`buf` (what
    :mod:`cudnn_rnn.engine.capture` checks), uploads and copies on :attr:`stream`; the
    caller's arrays in place of the :data:`BINDABLE` ones (:meth:`bind`)."""

    BINDABLE: tuple = ("x", "hx", "cx", "y", "hy", "cy")  # what the forward reads by name

    def bind(self, stream=None, **arrays) -> None:
        """Run the next forwards on ``stream`` (where given) and read or write the given
        device arrays in place of the engine's own buffers of those names (of
        :attr:`BINDABLE`): each float32, C-contiguous and of its own buffer's shape. Nothing
        is copied: the forward then reads and writes the caller's memory
        (:mod:`cudnn_rnn.torch` binds PyTorch's tensors this way). ValueError names what does
        not fit."""
        for name, a in arrays.items():
            own = getattr(self, name, None) if name in self.BINDABLE else None
            if own is None:
                raise ValueError(f"{type(self).__name__} binds {', '.join(self.BINDABLE)} "
                                 f"only, not {name}")
            if a.shape != own.shape or a.dtype != own.dtype or not a.flags.c_contiguous:
                raise ValueError(f"{name} must be a C-contiguous {own.dtype} array of shape "
                                 f"{own.shape}, got {a.dtype} {a.shape}")
        for name, a in arrays.items():
            setattr(self, name, a)
            if name in self.buf:
                self.buf[name] = a
        if stream is not None and stream.ptr != self.stream.ptr:
            follow(stream, self.stream)  # the set-up, and what came since
            self.stream = stream

    def _set_up(self) -> None:
        """Order :attr:`stream` after the set-up. ``__init__``'s uploads and buffer fills
        go to the stream current then (CuPy's default), which a non-blocking stream does
        not wait for: without this a first forward can read weights or an input buffer
        before they land (seen on the H200 at LSTM 50/1/4096/256, where the weights take
        milliseconds to copy: outputs computed from x = 0, relative error 0.998)."""
        self.stream.wait_event(self.cp.cuda.get_current_stream().record())

    def _io(self) -> None:
        cp, c = self.cp, self.cfg
        f32 = cp.float32
        self.x = cp.zeros(c.x_shape(), f32)
        self.hx = cp.zeros(c.h_shape(), f32)
        self.cx = cp.zeros(c.c_shape(), f32) if c.has_cell_state else None
        self.y = cp.zeros(c.y_shape(), f32)
        self.hy = cp.zeros(c.h_shape(), f32)
        self.cy = cp.zeros(c.c_shape(), f32) if c.has_cell_state else None
        self.buf = {n: a for n, a in (("y", self.y), ("hy", self.hy), ("cy", self.cy))
                    if a is not None}

    def set_inputs(self, x, hx, cx=None) -> None:
        """Upload x (T, B, input), hx (L*D, B, H) and, for LSTM, cx (as float32)."""
        cp = self.cp
        with self.stream:
            self.x[...] = cp.asarray(x, dtype=cp.float32)
            self.hx[...] = cp.asarray(hx, dtype=cp.float32)
            if self.cx is not None:
                self.cx[...] = cp.asarray(cx, dtype=cp.float32)

    def outputs(self) -> dict:
        """Copies of y, hy and (LSTM) cy, made on the stream after the forward."""
        with self.stream:
            out = {n: a.copy() for n, a in self.buf.items()}
        self.stream.synchronize()
        return out

    def close(self) -> None:
        """Release what the engine holds outside CuPy's pool."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Layer:
    """One pseudo-layer on the device: weights, factors, biases and its two GEMMs."""

    def __init__(self, cp, ops: Operands, x_shape: Shape, h_shape: Shape, matmul):
        up = lambda a: cp.asarray(a)  # noqa: E731
        self.W, self.R = up(ops.input.codes), up(ops.recurrent.codes)
        self.dqx, self.dqh = up(ops.input.dq), up(ops.recurrent.dq)
        self.bW, self.bR = up(ops.bW), up(ops.bR)
        self.x_scale = np.float32(ops.input.act_scale)
        self.h_scale = np.float32(ops.recurrent.act_scale)
        self.px, self.ph = ops.input.precision, ops.recurrent.precision
        self.gemm_x = matmul(self.px, x_shape)
        self.gemm_h = matmul(self.ph, h_shape)


class GemmEngine(Forward):
    """An inference forward of ``cfg`` on float64 ``stacked`` weights (see
    :mod:`cudnn_rnn.lowbit.model`): ``plan``'s GEMMs in 8 bits, the others in
    ``float_precision``. :meth:`set_inputs` uploads x, hx, cx; :meth:`forward` enqueues
    the whole sequence on :attr:`stream`; :attr:`y`, :attr:`hy`, :attr:`cy` hold the
    outputs (cupy float32), also as :attr:`buf` by name (what
    :mod:`cudnn_rnn.engine.capture` checks). :meth:`close` releases the cuBLASLt objects."""

    def __init__(self, cfg: RNNConfig, stacked, float_precision: str, plan=None, stream=None,
                 lt=None):
        from cudnn_rnn.engine.gpu import cupy_or_raise
        cp = self.cp = cupy_or_raise()
        self.cfg, self.plan = cfg, plan
        check_supported(cfg, {float_precision} | eight_bit_precisions(plan), capability(cp))
        self.operands = prepare(stacked, float_precision, plan, xp=cp)
        self.stream = stream or cp.cuda.Stream(non_blocking=True)
        self.handle = LtHandle(lt)
        self._matmuls: dict = {}
        self.layers: list[_Layer] = []
        try:
            for ops in self.operands:
                self.layers.append(_Layer(cp, ops, *rnn_shapes(cfg, ops.input.codes.shape[1]),
                                          self._matmul))
            self.workspace = cp.empty(WORKSPACE_BYTES, dtype=cp.uint8)
            self._buffers()
            self._set_up()
        except BaseException:
            self.close()
            raise

    def _matmul(self, precision: str, shape: Shape) -> Matmul:
        """One descriptor per (precision, shape), its algorithm chosen once."""
        key = (precision, shape)
        if key not in self._matmuls:
            m = Matmul(precision, shape, self.handle.lt)
            self._matmuls[key] = m
            m.choose(self.handle, WORKSPACE_BYTES)
        return self._matmuls[key]

    def _buffers(self) -> None:
        cp, c = self.cp, self.cfg
        T, B, H, g, D = c.seq_length, c.mini_batch, c.hidden_size, c.gates, c.dirs
        f32 = cp.float32
        self._io()
        self.between = cp.zeros((T, B, D * H), f32) if c.num_layers > 1 else None
        self.no_c = cp.zeros(1, f32)
        self.acc_x, self.acc_h, self.x_op, self.h_op = {}, {}, {}, {}
        for L in self.layers:
            for prec, acc, rows in ((L.px, self.acc_x, T * B), (L.ph, self.acc_h, B)):
                out = kernels.OUTPUT_DTYPE[prec]
                if out not in acc:
                    acc[out] = cp.empty((rows, g * H), dtype=out)
            key = (kernels.OPERANDS[L.px], L.W.shape[1])
            if key not in self.x_op:
                self.x_op[key] = cp.empty((T * B, L.W.shape[1]), kernels.FORMATS[key[0]][0])
            fmt = kernels.OPERANDS[L.ph]
            if fmt not in self.h_op:
                self.h_op[fmt] = cp.empty((B, H), kernels.FORMATS[fmt][0])

    def forward(self) -> None:
        """Enqueue the whole forward on :attr:`stream` (no synchronisation)."""
        c = self.cfg
        T, B, H, g, D = c.seq_length, c.mini_batch, c.hidden_size, c.gates, c.dirs
        ws, stream = self.workspace, self.stream
        with stream:
            layer_in = self.x
            for layer in walk.layers(c):
                out = self.y if (c.num_layers - 1 - layer[0].layer) % 2 == 0 else self.between
                for p in layer:
                    k, d = p.index, p.direction
                    L = self.layers[k]
                    fmt_x, fmt_h = kernels.OPERANDS[L.px], kernels.OPERANDS[L.ph]
                    x_op = self.x_op[(fmt_x, L.W.shape[1])]
                    kernels.quantizer(fmt_x)(layer_in, L.x_scale, x_op, size=x_op.size)
                    gx = self.acc_x[kernels.OUTPUT_DTYPE[L.px]]
                    L.gemm_x.run(L.W.data.ptr, x_op.data.ptr, gx.data.ptr, ws.data.ptr,
                                 ws.nbytes, stream.ptr)
                    h, hq = self.hy[k], self.h_op[fmt_h]
                    h[...] = self.hx[k]
                    cc = self.no_c
                    if self.cy is not None:
                        cc = self.cy[k]
                        cc[...] = self.cx[k]
                    kernels.quantizer(fmt_h)(h, L.h_scale, hq, size=hq.size)
                    gh = self.acc_h[kernels.OUTPUT_DTYPE[L.ph]]
                    step = kernels.gates(c.mode, str(gx.dtype), str(gh.dtype), fmt_h)
                    for s in range(T):
                        t = p.time(s, T)
                        L.gemm_h.run(L.R.data.ptr, hq.data.ptr, gh.data.ptr, ws.data.ptr,
                                     ws.nbytes, stream.ptr)
                        step(gx, L.dqx, L.bW, gh, L.dqh, L.bR, L.h_scale, H, g * H, t * B,
                             t * B * D * H + d * H, D * H, h, cc, out, hq, size=B * H)
                layer_in = out

    def algorithms(self) -> list[dict]:
        """Each distinct GEMM: precision, M, N, K and the workspace its algorithm takes."""
        return [{"precision": p, "M": s.M, "N": s.N, "K": s.K,
                 "workspace_bytes": m.workspace_needed} for (p, s), m in self._matmuls.items()]

    def close(self) -> None:
        for m in self._matmuls.values():
            m.close()
        self._matmuls = {}
        self.handle.close()
