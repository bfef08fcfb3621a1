"""Dense GEMM rates of cuBLASLt per precision, measured now: what 8 bits can buy on this GPU.

The GEMM engine's own :class:`~cudnn_rnn.lowbit.gemm.Matmul` (TN, FP32 or int32 output,
the heuristic's first algorithm) on operands of zeros: a GEMM's speed does not depend on
its values here, and no value is read back. Medians of CUDA-event timed calls after
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


def gemm_rate(cp, handle: LtHandle, precision: str, shape: Shape, reps: int, warmup: int) -> dict:
    """One GEMM's rate: ``{tflops, tflops_q1, tflops_q3, timing, algorithm workspace}``."""
    with Matmul(precision, shape, handle.lt) as mm:
        chosen = mm.choose(handle, WORKSPACE_BYTES)
        operand = kernels.FORMATS[kernels.OPERANDS[precision]][0]  # its buffer's dtype
        a = cp.zeros((shape.M, shape.K), operand)
        w = cp.zeros((shape.N, shape.K), operand)
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
