"""The module's own times and the accelerated module's, eager and in a CUDA graph, measured
in the same process right after the ranking, by the code that times PyTorch everywhere in
this project (:func:`cudnn_rnn.compare.pytorch.time_step` on PyTorch's current stream,
:func:`~cudnn_rnn.compare.pytorch.graph_of`: warm-up on a side stream, then
``torch.cuda.graph``)."""
from __future__ import annotations

from cudnn_rnn.compare.pytorch import graph_of, same, time_step


def step_of(module, x, torch):
    """One inference call of ``module`` on ``x`` (no_grad), as the timing repeats it; it
    returns the module's outputs."""
    def step():
        with torch.no_grad():
            return module(x)
    return step


def tensors(out) -> list:
    """Every tensor of a module's returns ((y, h_n) or (y, (h_n, c_n))), in order."""
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in tensors(o)]
    return [] if out is None else [out]


def _timed(step, reps: int, budget_s: float) -> dict:
    t = time_step(step, reps, 3, budget_s)
    return dict(t, ms=t["median_ms"])


def times(step, reps: int, budget_s: float, ours: bool = False) -> dict:
    """``{"eager": timing, "graph": timing}``, each a timing record with ``ms``, or
    ``{"skipped": why}`` where the call or its capture failed (a module PyTorch cannot
    capture is a finding to show, not an error). ``ours``: the accelerated module, which
    must run: only a capture's refusal (PyTorch's or CUDA's RuntimeError) is shown, and
    anything else is raised (a bug of this package, not a finding); its replay is timed only
    where it writes the plain call's outputs bit for bit."""
    shown = RuntimeError if ours else Exception
    out = {}
    try:
        out["eager"] = _timed(step, reps, budget_s)
    except shown as exc:  # noqa: BLE001 - any failure of the user's call is shown
        if ours:
            raise
        out["eager"] = {"skipped": f"{type(exc).__name__}: {_first_line(exc)}"}
        return out | {"graph": {"skipped": "the eager call failed"}}
    try:
        replay = graph_of(step)
    except shown as exc:  # noqa: BLE001 - PyTorch's and CUDA's refusals of a capture
        out["graph"] = {"skipped": f"capture failed: {type(exc).__name__}: {_first_line(exc)}"}
        return out
    if ours:
        first, plain, replayed = tensors(step()), tensors(step()), tensors(replay())
        why = ("two plain calls' outputs differ: the replay cannot be checked, not timed"
               if not same(first, plain) else
               "its replay's outputs differ from the plain call's: not timed"
               if not same(plain, replayed) else None)
        if why:
            out["graph"] = {"skipped": why}
            return out
    out["graph"] = _timed(replay, reps, budget_s)
    return out


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else ""
