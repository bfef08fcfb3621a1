"""ReLU's kink: a gradient check that allows cuDNN its side of zero.

ReLU's derivative is a step. Where a float64 pre-activation lies within cuDNN's rounding
of zero, cuDNN may land on the other side of it, and the whole gradient term of that unit
at that step switches on or off: dx and dw then differ from the reference by the size of
one term, with no arithmetic error anywhere. The error does not shrink with the
precision; it depends on whether such a unit exists in the batch.

The recheck, for a ReLU cell whose outputs passed and whose gradients did not: the
reference's pre-activations closer to zero than :data:`MARGIN` times the measured output
error (relative to that direction's root-mean-square pre-activation) are the candidates,
nearest to zero first, at most :data:`MAX_CANDIDATES` of them. Each in turn is switched
to the other side; a switch is kept when it lowers the worst gradient error. The cell then
passes only if its gradients are within the unchanged tolerance, and the record keeps how
many candidates there were, which were switched, and the errors before. A real error in
the gradients is not within reach of a handful of switched terms, so it still fails.
"""
from __future__ import annotations

import numpy as np

from cudnn_rnn.bindings.enums import RNNMode
from cudnn_rnn.check import reference
from cudnn_rnn.check.verify import GRADIENT_OUTPUTS, Verification, compare_with, expected_parts

MARGIN = 50.0  # candidates: |a| below this many output errors (relative to rms(a))
MAX_CANDIDATES = 16


def applies(cfg, check: Verification) -> bool:
    """A ReLU cell whose outputs passed and some gradient did not."""
    failed = check.failures
    return cfg.mode == RNNMode.RNN_RELU and bool(failed) and all(
        n in GRADIENT_OUTPUTS for n in failed)


def candidates(fwd, output_error: float, limit: int = MAX_CANDIDATES) -> list:
    """(|a| / rms, k, t, b, unit) of the pre-activations within the margin, nearest first."""
    found = []
    for k, cache in enumerate(fwd.caches):
        steps = cache["steps"]
        xp = reference.array_module(steps[0]["a"])
        rms = float(xp.sqrt(sum(float((s["a"] ** 2).sum()) for s in steps)
                            / sum(s["a"].size for s in steps)))
        if rms == 0:
            continue
        bound = MARGIN * max(output_error, np.finfo(np.float64).eps) * rms
        for t, s in enumerate(steps):
            running = s.get("active")  # a finished sequence's step is not computed
            for b, u in xp.argwhere(xp.abs(s["a"]) < bound).tolist():
                if running is None or bool(running[b, 0]):
                    found.append((abs(float(s["a"][b, u])) / rms, k, t, b, u))
    found.sort()
    return found[:limit] if len(found) > limit else found


def _worst(check: Verification) -> float:
    return max(check.errors[n] / check.gradient_tolerance for n in check.errors
               if n in GRADIENT_OUTPUTS)


def recheck(cfg, host: dict, outputs: dict, check: Verification, xp=np) -> Verification:
    """``check`` again, with the reference's ReLU derivative switched where that explains
    cuDNN's gradients (see the module's text); the result carries ``kinks``."""
    params, fwd, dy, dhy, dcy = expected_parts(cfg, host, xp)
    output_error = max(check.errors[n] for n in check.errors if n not in GRADIENT_OUTPUTS)
    near = candidates(fwd, output_error)
    switched: dict = {}
    best, kept = check, []
    for _rel, k, t, b, u in near:
        trial = {kk: {tt: list(v) for tt, v in steps.items()} for kk, steps in switched.items()}
        trial.setdefault(k, {}).setdefault(t, []).append((b, u))
        grads = reference.backward(cfg, params, fwd, dy, dhy, dcy, switched=trial)
        again = compare_with(cfg, (reference.Forward(fwd.y, fwd.hy, fwd.cy), grads), outputs)
        if _worst(again) < _worst(best):
            best, switched = again, trial
            kept.append({"direction_index": k, "step": t, "batch": b, "unit": u,
                         "distance": _rel})
        if best.passed:
            break
    result = Verification(dict(best.errors), check.tolerance, check.gradient_tolerance,
                          check.nonfinite, check.padding)
    result.kinks = {"candidates": len(near), "switched": kept, "margin": MARGIN,
                    "errors_before": {n: check.errors[n] for n in check.errors
                                      if n in GRADIENT_OUTPUTS}}
    return result
