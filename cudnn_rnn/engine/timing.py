"""Timing device work with CUDA events: warm-up, repeats, median and spread."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Timing:
    median_ms: float
    min_ms: float
    max_ms: float
    q1_ms: float
    q3_ms: float
    reps: int

    def as_record(self) -> dict:
        return {"median_ms": self.median_ms, "min_ms": self.min_ms, "max_ms": self.max_ms,
                "q1_ms": self.q1_ms, "q3_ms": self.q3_ms, "reps": self.reps}

    def describe(self) -> str:
        return (f"{self.median_ms:.4f} ms median of {self.reps} "
                f"(IQR {self.q1_ms:.4f}-{self.q3_ms:.4f}, min {self.min_ms:.4f}, max {self.max_ms:.4f})")


def quartiles(values) -> tuple[float, float, float]:
    """(first quartile, median, third quartile) of ``values``, linearly interpolated: this
    project's one rule for a measurement's spread."""
    q1, med, q3 = np.percentile(np.asarray(values, dtype=float), [25, 50, 75])
    return float(q1), float(med), float(q3)


def time_call(cp, stream, fn, reps: int = 10, warmup: int = 2, budget_s: float | None = None,
              min_reps: int = 5) -> Timing:
    """Time ``fn()`` (which enqueues work on ``stream``) with an event pair per repeat.

    The repeats are enqueued back to back and read after one synchronisation, so host
    work between calls overlaps device work, as in an application's loop. With
    ``budget_s``, a call measured slow in warm-up gets fewer repeats, never fewer than
    ``min_reps`` (nor more than ``reps``): about ``budget_s`` of device time per measurement.
    """
    if reps < 1:
        raise ValueError("reps must be at least 1")
    first = cp.cuda.Event(), cp.cuda.Event()
    first[0].record(stream)
    for _ in range(max(warmup, 1)):
        fn()
    first[1].record(stream)
    stream.synchronize()
    if budget_s is not None:
        per_call_s = cp.cuda.get_elapsed_time(*first) / 1e3 / max(warmup, 1)
        if per_call_s > 0:
            reps = max(min(reps, int(budget_s / per_call_s)), min(min_reps, reps))
    pairs = []
    for _ in range(reps):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record(stream)
        fn()
        end.record(stream)
        pairs.append((start, end))
    stream.synchronize()
    times = np.array([cp.cuda.get_elapsed_time(s, e) for s, e in pairs])
    q1, med, q3 = quartiles(times)
    return Timing(med, float(times.min()), float(times.max()), q1, q3, reps)


def tflops(flop: float, ms: float) -> float:
    """The rate of ``flop`` operations in ``ms`` milliseconds, in TFLOPS: this project's one
    formula (NaN for a non-positive time). :func:`seconds_at` is its inverse."""
    return flop / (ms * 1e-3) / 1e12 if ms > 0 else float("nan")


def seconds_at(flop: float, rate_tflops: float) -> float:
    """Seconds that ``flop`` operations take at ``rate_tflops``."""
    return flop / (rate_tflops * 1e12)
