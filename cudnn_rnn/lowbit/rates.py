"""Dense GEMM rates of cuBLASLt per precision, measured now: what 8 bits can buy on this GPU.

The GEMM engine's own :class:`~cudnn_rnn.lowbit.gemm.Matmul` (TN, FP32 or int32 output,
the heuristic's first algorithm) on random operands (:func:`operand`: zeros would flatter
it, since tensor cores multiplying zeros draw less power and hold higher clocks), no
value read back. Medians of CUDA-event timed calls after
warm-up (:func:`cudnn_rnn.engine.timing.time_call`), 2·M·N·K operations each. A precision
the GPU or cuBLASLt refuses is reported with cuBLASLt's call and status instead of a rate.
"""
from __future__ import annotations

from cudnn_rnn.bindings.cublaslt.errors import CublasLtError
from cudnn_rnn.engine import timing
from cudnn_rnn.engine.gpu import cupy_or_raise
from cudnn_rnn.lowbit import kernels
from cudnn_rnn.lowbit.gemm import LtHandle, Matmul, Shape
from cudnn_rnn.matrix.jobs import job

PRECISIONS = ("fp16", "bf16", "int8", "fp8")
WORKSPACE_BYTES = 32 << 20


def operand(xp, rng, shape: tuple, precision: str):
    """Random codes of ``precision``'s operand format in its buffer's dtype
    (``kernels.FORMATS``), values in [-1, 1] for the 16-bit formats, every int8 code but
    -128, every finite E4M3 code (none of the two NaN codes); ``xp`` numpy or CuPy and
    ``rng`` its ``default_rng``."""
    fmt = kernels.OPERANDS[precision]
    u = rng.random(shape, dtype=xp.float32)
    if fmt == "fp16":
        return (u * 2 - 1).astype(xp.float16)
    if fmt == "bf16":  # the upper half of a float32's bits
        return ((u * 2 - 1).view(xp.uint32) >> 16).astype(xp.uint16)
    if fmt == "int8":
        return (xp.floor(u * 255) - 127).astype(xp.int8)
    if fmt == "e4m3":  # magnitude codes 0..126 (127 is NaN), the sign from the low bits
        mag = xp.floor(u * 127).astype(xp.uint8)
        sign = ((u * 1024).astype(xp.uint32) & 1).astype(xp.uint8) << 7
        return mag | sign
    raise ValueError(f"no random operand for {precision!r} (format {fmt!r})")


def gemm_rate(cp, handle: LtHandle, precision: str, shape: Shape, reps: int, warmup: int) -> dict:
    """One GEMM's rate: ``{tflops, tflops_q1, tflops_q3, timing, algorithm workspace}``."""
    with Matmul(precision, shape, handle.lt) as mm:
        chosen = mm.choose(handle, WORKSPACE_BYTES)
        rng = cp.random.default_rng(0)
        a = operand(cp, rng, (shape.M, shape.K), precision)
        w = operand(cp, rng, (shape.N, shape.K), precision)
        out = cp.empty((shape.M, shape.N), kernels.OUTPUT_DTYPE[precision])
        ws = cp.empty(WORKSPACE_BYTES, cp.uint8)
        stream = cp.cuda.get_current_stream()
        t = timing.time_call(cp, stream, lambda: mm.run(w.data.ptr, a.data.ptr, out.data.ptr,
                                                        ws.data.ptr, ws.nbytes, stream.ptr),
                             reps, warmup)
    flop = 2.0 * shape.M * shape.N * shape.K
    return {"tflops": round(timing.tflops(flop, t.median_ms), 2),
            "tflops_q1": round(timing.tflops(flop, t.q3_ms), 2),
            "tflops_q3": round(timing.tflops(flop, t.q1_ms), 2),
            "timing": t.as_record(), "algorithm_workspace_bytes": chosen["workspace_bytes"]}


@job
def gemm_rates(sizes: list, precisions=PRECISIONS, reps: int = 30, warmup: int = 3) -> dict:
    """``{"rates": {"int8 MxNxK": rate or {"refused": ...}}, "library": ...}`` for every
    (M, N, K) of ``sizes`` (``out (M, N) = a (M, K) @ w.T``) and every precision."""
    cp = cupy_or_raise()
    handle = LtHandle()
    rates = {}
    try:
        for m, n, k in sizes:
            for p in precisions:
                key = f"{p} {m}x{n}x{k}"
                try:
                    rates[key] = gemm_rate(cp, handle, p, Shape(m, n, k), reps, warmup)
                except CublasLtError as exc:
                    rates[key] = {"refused": f"{exc.call}: {exc.status_name} ({exc.reason})"}
    finally:
        handle.close()
    return {"rates": rates, "library": handle.lt.describe()}
