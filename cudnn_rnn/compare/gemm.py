"""The dense GEMM rate of this GPU, measured now: the ceiling a benchmark's TFLOPS is read against.

``cupy.matmul`` (cuBLAS) on random matrices: 8192³ for the dense rate, and the skinny
shapes of one RNN time step (gates·hidden × batch × hidden) for what a recurrence can reach: float16, the arithmetic an RNN with
HALF data runs on tensor cores, and float32 for comparison. CuPy's compute-type setting
for the dtype is recorded with each rate (``compute_type``: CuPy's own constant). Medians of CUDA-event
timed calls after warm-up, as everywhere in this project.
"""
from __future__ import annotations

import numpy as np

from cudnn_rnn.engine.timing import tflops, time_call
from cudnn_rnn.matrix.jobs import job

DENSE = ({"dtype": "float16", "m": 8192, "n": 8192, "k": 8192},
         {"dtype": "float32", "m": 8192, "n": 8192, "k": 8192})


def gemm_rate(dtype: str = "float16", m: int = 8192, n: int = 8192, k: int = 8192,
              reps: int = 20, warmup: int = 3) -> dict:
    """TFLOPS of one (``m`` × ``k``) · (``k`` × ``n``) matmul (2mnk floating-point operations)."""
    import cupy as cp  # here: this module is imported, as a worker job, without a GPU
    rng = cp.random.default_rng(0)
    a = (rng.random((m, k), dtype=cp.float32) * 2 - 1).astype(dtype)
    b = (rng.random((k, n), dtype=cp.float32) * 2 - 1).astype(dtype)
    out = cp.empty((m, n), dtype=dtype)
    stream = cp.cuda.get_current_stream()
    t = time_call(cp, stream, lambda: cp.matmul(a, b, out=out), reps, warmup)
    flop = 2.0 * m * n * k
    rates = {"tflops": tflops(flop, t.median_ms),
             "tflops_q1": tflops(flop, t.q3_ms),  # the slower quartile time
             "tflops_q3": tflops(flop, t.q1_ms)}
    return {"dtype": dtype, "m": m, "n": n, "k": k, "compute_type": _compute_type(cp, dtype),
            "timing": t.as_record(), **{k: round(v, 2) for k, v in rates.items()}}


def _compute_type(cp, dtype: str):
    try:
        from cupy._core import _routines_linalg as linalg  # CuPy's private helper, if any
        code = linalg.get_compute_type(np.dtype(dtype))
        names = {getattr(linalg, n): n for n in dir(linalg) if n.startswith("COMPUTE_TYPE_")}
        return names.get(code, code)
    except Exception:  # a CuPy without this private helper
        return None


@job
def gemm_rates(sizes=DENSE, reps: int = 20) -> dict:
    """:func:`gemm_rate` for each of ``sizes`` (dicts of its keywords), keyed ``dtype mxnxk``."""
    out = {}
    for s in sizes:
        r = gemm_rate(reps=reps, **s)
        out[f"{r['dtype']} {r['m']}x{r['n']}x{r['k']}"] = r
    return {"rates": out, "numpy": np.__version__}
