"""ReLU's kink: a gradient check that allows cuDNN its side of zero.

ReLU's derivative is a step. Where a float64 pre-activation lies within cuDNN's rounding
of zero, cuDNN may land on the other side of it, and the whole gradient term of that unit
at that step switches on or off: dx and dw then differ from the reference by the size of
one term, with no arithmetic error anywhere. The error does not shrink with the
precision; it depends on whether such a unit exists in the batch.

The recheck applies where the tolerance is tight enough for one term to break it: true
FP32 (FMA math) and DOUBLE, a RELU cell whose outputs passed, whose gradients did not, and
are finite. The reference's pre-activations closer to zero than :data:`MARGIN` times the
measured output error (relative to that direction's root-mean-square pre-activation) are
the candidates, nearest to zero first, at most :data:`MAX_CANDIDATES` of them. Each in turn
is switched to the other side; a switch is kept only when it lowers every gradient error
by at least :data:`MIN_GAIN` of it (a real kink moves dx, dhx and dw together). The cell
then passes only if its gradients are within the unchanged tolerance. The record keeps
the bound, how many pre-activations were within it, each switch, and, when the recheck
does not pass, the errors against the plain reference. A real error in the gradients is
not within reach of a handful of switched terms, so it still fails.
"""
from __future__ import annotations

import math

import numpy as np

from cudnn_rnn.bindings.enums import DataType, MathType, RNNMode
from cudnn_rnn.check import reference
from cudnn_rnn.check.verify import GRADIENT_OUTPUTS, Verification, compare_with, expected_parts

MARGIN = 50.0  # candidates: |a| below this many output errors (relative to rms(a))
MAX_CANDIDATES = 16
MIN_GAIN = 0.1  # a switch must lower every gradient error by this fraction of it
OUTPUTS = ("y", "hy", "cy")  # the training forward's outputs, which backward runs from


def applies(cfg, check: Verification) -> bool:
    """A RELU cell in true FP32 or DOUBLE whose outputs passed and some finite gradient
    did not."""
    failed = check.failures
    tight = cfg.math_prec == DataType.DOUBLE or (
        cfg.math_prec == DataType.FLOAT and cfg.math_type == MathType.FMA_MATH)
    return (cfg.mode == RNNMode.RNN_RELU and tight and bool(failed)
            and all(n in GRADIENT_OUTPUTS for n in failed)
            and all(math.isfinite(check.errors[n]) and not check.nonfinite.get(n)
                    for n in check.errors if n in GRADIENT_OUTPUTS))


def candidates(fwd, output_error: float, limit: int = MAX_CANDIDATES) -> tuple[list, int, float]:
    """((|a| / rms, k, t, b, unit) of the nearest pre-activations within the bound, nearest
    first, at most ``limit``; how many were within it; the bound as a fraction of rms).
    ``t`` is the step in processing order (time T-1-t for a reverse direction)."""
    bound = MARGIN * max(output_error, float(np.finfo(np.float64).eps))
    found, within = [], 0
    for k, cache in enumerate(fwd.caches):
        steps = cache["steps"]
        xp = reference.array_module(steps[0]["a"])
        a = xp.stack([s["a"] for s in steps])  # (T, B, units)
        rms = math.sqrt(float((a ** 2).mean()))
        if rms == 0:
            continue
        dist = xp.abs(a) / rms
        if steps[0].get("active") is not None:  # a finished sequence's step is not computed
            running = xp.stack([s["active"] for s in steps])  # (T, B, 1)
            dist = xp.where(xp.broadcast_to(running, dist.shape), dist, xp.inf)
        flat = dist.ravel()
        within += int((flat < bound).sum())
        n = min(limit, flat.size)
        nearest = xp.argpartition(flat, n - 1)[:n] if n < flat.size else xp.arange(flat.size)
        values = flat[nearest]
        keep = nearest[values < bound]
        for i, d in zip(keep.tolist(), flat[keep].tolist()):
            t, rest = divmod(i, a.shape[1] * a.shape[2])
            found.append((d, k, t) + divmod(rest, a.shape[2]))
    found.sort()
    return found[:limit], within, bound


def _gradient_errors(check: Verification) -> dict:
    return {n: e for n, e in check.errors.items() if n in GRADIENT_OUTPUTS}


def _finite(errors: dict) -> dict:
    return {n: e if math.isfinite(e) else None for n, e in errors.items()}


def recheck(cfg, host: dict, outputs: dict, check: Verification, xp=np) -> Verification:
    """``check`` again, with the reference's ReLU derivative switched where that explains
    cuDNN's gradients (see the module's text); the result carries ``kinks``."""
    params, fwd, dy, dhy, dcy = expected_parts(cfg, host, xp)
    output_error = max(check.errors[n] for n in OUTPUTS if n in check.errors)
    near, within, bound = candidates(fwd, output_error)
    switched: dict = {}
    best, kept = check, []
    for distance, k, t, b, u in near:
        trial = {kk: {tt: list(v) for tt, v in steps.items()} for kk, steps in switched.items()}
        trial.setdefault(k, {}).setdefault(t, []).append((b, u))
        grads = reference.backward(cfg, params, fwd, dy, dhy, dcy, switched=trial)
        again = compare_with(cfg, (reference.Forward(fwd.y, fwd.hy, fwd.cy), grads), outputs)
        was, now = _gradient_errors(best), _gradient_errors(again)
        if all(now[n] <= (1 - MIN_GAIN) * was[n] for n in was if was[n] > 0):
            best, switched = again, trial
            time = t if k % cfg.dirs == 0 else len(fwd.caches[k]["steps"]) - 1 - t
            kept.append({"direction_index": k, "step": t, "time": time, "batch": b,
                         "unit": u, "distance": distance})
        if best.passed:
            break
    source = best if best.passed else check  # a failed recheck reports the plain errors
    result = Verification(dict(source.errors), check.tolerance, check.gradient_tolerance,
                          check.nonfinite, check.padding)
    result.kinks = {"bound": bound, "within_bound": within, "tried": len(near),
                    "switched": kept, "passed": best.passed}
    if best.passed:
        result.kinks["errors_before"] = _finite(_gradient_errors(check))
    else:
        result.kinks["errors_after"] = _finite(_gradient_errors(best))
    return result
