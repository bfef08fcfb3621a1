"""Speeds read from a record's JSON form: the timing a record is ranked by (CUDA-graph replays
where captured, else plain calls), an objective's time over several calls, and speed-ups that
compare like with like (replays with replays, plain calls with plain calls, never one with
the other). :mod:`.record` re-exports them, where their callers import them from."""
from __future__ import annotations

from cudnn_rnn.matrix import baseline

TIMED_KINDS = ("forward_inference", "forward_training", "backward_data", "backward_weights")


def ranked_timing(rec: dict, kind: str) -> tuple[dict | None, str | None]:
    """The timing a record is ranked by for ``kind``, and which it is: the replays of the
    call's CUDA graph (``"graph"``) where it was captured, else the plain calls
    (``"plain"``); (None, None) when the call was not timed."""
    g = (rec.get("graph_timings") or {}).get(kind)
    if g:
        return g, "graph"
    t = (rec.get("timings") or {}).get(kind)
    return (t, "plain") if t else (None, None)


def same_basis_ratio(a_replay: float | None, a_plain: float | None,
                     b_replay: float | None, b_plain: float | None) -> float | None:
    """a's time over b's: replays over replays where both sides were captured, else plain
    calls over plain calls, never one over the other; None where neither pair exists."""
    if a_replay and b_replay:
        return a_replay / b_replay
    if a_plain and b_plain:
        return a_plain / b_plain
    return None


def objective_ms(rec: dict, kinds: tuple, plain: bool = False) -> float | None:
    """An objective's time (the calls ``kinds``, e.g. forward inference alone, or a training
    step's three): the sum of each call's ranked timing (graph replays where captured, else
    plain calls; only plain ones with ``plain``); None unless every call was timed."""
    found = [(rec.get("timings") or {}).get(k) if plain else ranked_timing(rec, k)[0]
             for k in kinds]
    return None if None in found else sum(t["median_ms"] for t in found)


def objective_basis(rec: dict, kinds: tuple) -> str | None:
    """``graph`` when every call of the objective was captured, ``plain`` when none was,
    else ``mixed``; the refusals are in the record's ``graph_refused``."""
    found = {ranked_timing(rec, k)[1] for k in kinds}
    return found.pop() if len(found) == 1 else "mixed"


def objective_replay_ms(rec: dict, kinds: tuple) -> float | None:
    """The objective's time in CUDA-graph replays; None unless every call was captured."""
    return objective_ms(rec, kinds) if objective_basis(rec, kinds) == "graph" else None


def objective_speedup(base: dict | None, rec: dict, kinds: tuple) -> float | None:
    """The baseline's time over ``rec``'s for the objective (:func:`same_basis_ratio`;
    replays count only where every call of the objective was captured)."""
    if base is None:
        return None
    return same_basis_ratio(objective_replay_ms(base, kinds), objective_ms(base, kinds, True),
                            objective_replay_ms(rec, kinds), objective_ms(rec, kinds, True))


def add_speedup(rec, by_id: dict) -> None:
    """Set the speed-up of a timed :class:`~cudnn_rnn.matrix.record.Record` over its FP32
    baseline, when that was timed in this run (``by_id``: this run's records so far, by id;
    a baseline is its own, at 1.0), per call: each call its own objective
    (:func:`objective_speedup`, the one rule of a speed-up, read from the records' JSON
    form as every reader reads it)."""
    if not rec.timings:
        return
    base_id = baseline.id_of(rec.id)
    rec.baseline_id = base_id
    base = rec if base_id == rec.id else by_id.get(base_id)
    if base is None or not base.timings:
        rec.speedup = None
        return
    base_json, rec_json = base.as_json(), rec.as_json()
    out = {}
    for k in TIMED_KINDS:
        ratio = objective_speedup(base_json, rec_json, (k,))
        if ratio is not None:
            out[k] = round(ratio, 4)
    rec.speedup = out
