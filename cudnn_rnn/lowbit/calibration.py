"""Calibration: the clipping threshold of each activation tensor's 8-bit scale.

A GEMM's activation operand is quantized per tensor with ``scale = threshold / top``
(top 127 for INT8, 448 for E4M3); values beyond the threshold saturate. Max calibration
takes the largest |x| seen; the others trade saturating a few large values for a finer
grid under them. All of them work from a :class:`Histogram` of |x| over a calibration
run (:data:`BINS` bins on [0, max |x|]), as TensorRT's calibrators do:

* ``max``: max |x|;
* ``p99.9``, ``p99.99``, ``p99.999``: the upper edge of the bin where that share of |x| is
  reached (percentile calibration);
* ``entropy``: TensorRT's entropy calibrator: for each candidate threshold (a bin edge
  from the number of quantization levels up), P is the histogram below it with every
  count above it added to the last bin, and Q is P as quantization sees it: bins whose
  centres round to the same grid value are merged and the merged count spread evenly
  over that group's non-empty bins; the threshold with the smallest KL(P || Q) wins.
  TensorRT merges fixed groups of bins (128 levels); here the groups come from the
  format's own grid, so E4M3's uneven steps are judged by what E4M3 does;
* ``mse``: the threshold with the smallest mean squared error between the bin centres and
  their quantized values (saturation included), weighted by the counts.

Each method answers a threshold; :func:`thresholds` makes the ``amaxes``-shaped dict that
:func:`cudnn_rnn.lowbit.model.plan` takes.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from cudnn_rnn.check.reference import array_module
from cudnn_rnn.lowbit import quant

BINS = 2048
PERCENTILES = {"p99.9": 99.9, "p99.99": 99.99, "p99.999": 99.999}
METHODS = ("max", *PERCENTILES, "entropy", "mse")
TOP = {"int8": quant.INT8_MAX, "e4m3": quant.E4M3_MAX}
FIRST_CANDIDATE = 128  # the fewest bins below a candidate threshold (TensorRT's 128 levels)


@dataclass
class Histogram:
    """Counts of |x| in :data:`BINS` equal bins on [0, ``amax``] (float64, numpy). The
    edges and centres are computed once (the searches below read them per candidate)."""
    counts: np.ndarray
    amax: float

    @cached_property
    def edges(self) -> np.ndarray:
        return np.linspace(0.0, self.amax, self.counts.size + 1)

    @cached_property
    def centres(self) -> np.ndarray:
        e = self.edges
        return 0.5 * (e[:-1] + e[1:])


def histogram(values, bins: int = BINS) -> Histogram:
    """The histogram of |values| (numpy or cupy, any shape; computed where they are).
    ValueError if a value is NaN or infinite, or there are none."""
    xp = array_module(values)
    a = xp.abs(xp.asarray(values, dtype=xp.float64)).ravel()
    if a.size == 0:
        raise ValueError("no values to calibrate on")
    if not bool(xp.isfinite(a).all()):
        raise ValueError("calibration values hold NaN or infinity")
    top = float(a.max())
    if top == 0.0:
        return Histogram(np.zeros(bins), 0.0)
    counts, _ = xp.histogram(a, bins=bins, range=(0.0, top))
    counts = counts.get() if xp is not np else counts
    return Histogram(np.asarray(counts, dtype=np.float64), top)


def fake_quant(values: np.ndarray, threshold: float, fmt: str) -> np.ndarray:
    """``values`` (>= 0) as the format's per-tensor quantization at ``threshold`` gives them."""
    scale = threshold / TOP[fmt]
    if fmt == "int8":
        return quant.fake_quant_int8(values, scale)
    return quant.fake_quant_e4m3(values, scale)


def percentile(h: Histogram, q: float) -> float:
    """The upper edge of the first bin at which ``q`` percent of the counts are reached."""
    cum = np.cumsum(h.counts)
    i = int(np.searchsorted(cum, q / 100.0 * cum[-1], side="left"))
    return float(h.edges[min(i, h.counts.size - 1) + 1])


def _candidates(h: Histogram) -> range:
    return range(min(FIRST_CANDIDATE, h.counts.size), h.counts.size + 1)


def kl_divergence(h: Histogram, i: int, fmt: str) -> float:
    """KL(P || Q) for the threshold at edge ``i`` (see the module docstring)."""
    p = h.counts[:i].copy()
    p[-1] += h.counts[i:].sum()
    grid = fake_quant(h.centres[:i], float(h.edges[i]), fmt)
    _, group = np.unique(grid, return_inverse=True)
    nonzero = h.counts[:i] > 0
    mass = np.bincount(group, weights=h.counts[:i])
    members = np.bincount(group, weights=nonzero.astype(np.float64))
    q = np.where(nonzero, mass[group] / np.maximum(members[group], 1), 0.0)
    p_sum, q_sum = p.sum(), q.sum()
    if p_sum == 0 or q_sum == 0:
        return np.inf
    p, q = p / p_sum, q / q_sum
    keep = p > 0
    if np.any(keep & (q == 0)):
        return np.inf  # the outliers' bin is empty in Q: this threshold loses them entirely
    return float(np.sum(p[keep] * np.log(p[keep] / q[keep])))


def mean_squared_error(h: Histogram, threshold: float, fmt: str) -> float:
    """The count-weighted mean of (centre - quantized centre)**2 at ``threshold``."""
    c = h.centres
    return float(np.sum(h.counts * (c - fake_quant(c, threshold, fmt)) ** 2) / h.counts.sum())


def threshold(h: Histogram, method: str, fmt: str) -> float:
    """The clipping threshold ``method`` chooses for the histogram ``h`` in format ``fmt``."""
    if method not in METHODS:
        raise ValueError(f"unknown calibration method {method!r} (choose from {METHODS})")
    if fmt not in TOP:
        raise ValueError(f"unknown format {fmt!r} (choose from {tuple(TOP)})")
    if h.amax == 0.0 or method == "max":
        return h.amax
    if method in PERCENTILES:
        return percentile(h, PERCENTILES[method])
    if method == "entropy":
        scores = [(kl_divergence(h, i, fmt), i) for i in _candidates(h)]
    else:
        scores = [(mean_squared_error(h, float(h.edges[i]), fmt), i) for i in _candidates(h)]
    best = min(scores)[1]  # the smallest score; the lowest threshold among equals
    return float(h.edges[best])


def thresholds(histograms: dict, method: str, fmt: str) -> dict:
    """``{gemm: [threshold per pseudo-layer or None]}`` from ``{gemm: [Histogram or None]}``."""
    return {name: [None if h is None else threshold(h, method, fmt) for h in per_layer]
            for name, per_layer in histograms.items()}


def collect(run, gemms=("input", "recurrent", "projection")) -> dict:
    """Histograms of every GEMM's activation operand: ``run(fn)`` must call ``fn(pseudo_layer,
    gemm, operand)`` for each operand (as :func:`cudnn_rnn.lowbit.model.observe` does);
    the operands of one GEMM are pooled over steps."""
    seen: dict = {}

    def fn(k, name, a):
        seen.setdefault((name, k), []).append(a)

    run(fn)
    layers = 1 + max(k for _, k in seen) if seen else 0
    out = {name: [None] * layers for name in gemms}
    for (name, k), parts in seen.items():
        xp = array_module(parts[0])
        out[name][k] = histogram(xp.concatenate([p.ravel() for p in parts]))
    return out
