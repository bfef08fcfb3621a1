"""What an accelerated module shows of its choice: :class:`Choice` (``fast.choice``) and the
ranking it came from (``fast.table()``), from the plan alone (a loaded plan shows what its
tuning measured).

Speed-ups compare like with like, as everywhere in this project: a row's CUDA-graph replays
with the module in a CUDA graph, its plain calls with the module's eager calls, each
measured in the same process, right after the ranking.
"""
from __future__ import annotations

from dataclasses import dataclass

from tabulate import tabulate

from cudnn_rnn.matrix.record import max_error
from cudnn_rnn.torch.plan import describe_machine, label_of
from cudnn_rnn.torch.ranking import STATUS
from cudnn_rnn.tune import basis, cost_ms

ORDER = tuple(STATUS)  # the rows' statuses in the table's order


def rows(records: list, status: dict) -> list[dict]:
    """Every record as a row of the table: the ranked ones in rank order, then the others
    (the verified by their error, then the refused and wrong)."""
    out = []
    for r in records:
        ok = r["outcome"] == "OK"
        out.append({"id": r["id"], "label": label_of(r), "engine": r["engine"],
                    "family": r["family"], "status": status[r["id"]],
                    "error": max_error(r) if ok else None,
                    "ms": cost_ms(r, False) if ok else None,
                    "plain_ms": cost_ms(r, False, plain=True) if ok else None,
                    "timed_as": basis(r, False) if ok else None,
                    "reason": None if ok else f"{r['outcome']}: {r.get('reason') or ''}".strip()})
    return sorted(out, key=_rank)


def _rank(row: dict) -> tuple:
    return (ORDER.index(row["status"]),
            row["ms"] if row["status"] in ("chosen", "ranked", "fallback", "passed")
            else row["error"] if row["error"] is not None else float("inf"))


def passed_over(rows: list, reasons: dict, chosen: str) -> list:
    """``rows`` with the ranked rows of ``reasons`` (id -> why) passed over, each saying why
    it did not serve the module, and the row ``chosen`` the choice, in the table's order."""
    out = []
    for row in rows:
        if row["id"] in reasons:
            row = dict(row, status="passed",
                       reason=f"verified in the ranking, not in the module: {reasons[row['id']]}")
        elif row["id"] == chosen:
            row = dict(row, status="chosen")
        out.append(row)
    return sorted(out, key=_rank)


def speedup(module_ms: float | None, ms: float | None) -> float | None:
    return module_ms / ms if module_ms and ms else None


def _time(times: dict, who: str, how: str) -> float | None:
    return ((times or {}).get(who) or {}).get(how, {}).get("ms")


@dataclass(frozen=True)
class Choice:
    """What runs and why: the chosen configuration, its verified error against the module
    in float64, its time, and the module's own times measured beside it."""
    label: str
    engine: str
    precision: str
    tolerance: float
    error: float
    ms: float | None
    plain_ms: float | None
    timed_as: str | None
    ranked: int
    run: int
    module_eager_ms: float | None
    module_graph_ms: float | None
    shape: tuple

    @classmethod
    def of(cls, plan) -> "Choice":
        c, rep = plan.choice, plan.report
        row = next((r for r in rep.get("rows", []) if r["id"] == c.id), {})
        times = rep.get("times", {})
        return cls(c.label, c.engine, plan.precision, plan.tolerance, c.max_error, c.ms,
                   c.plain_ms, row.get("timed_as"),
                   sum(r["status"] in ("chosen", "ranked") for r in rep.get("rows", [])),
                   len(rep.get("rows", [])), _time(times, "module", "eager"),
                   _time(times, "module", "graph"), tuple(plan.shape))

    def __str__(self) -> str:
        # like with like only: a graph replay against the module in a graph, plain calls
        # against the module's eager calls (as the table's columns)
        vs = []
        graph = speedup(self.module_graph_ms, self.ms) if self.timed_as == "graph" else None
        if graph:
            vs.append(f"the module in a CUDA graph {self.module_graph_ms:.4f} ms (x{graph:.2f})")
        eager = speedup(self.module_eager_ms, self.plain_ms)
        if eager:
            vs.append(f"eager {self.module_eager_ms:.4f} ms (x{eager:.2f} over plain calls)")
        replay = self.timed_as == "graph"
        ranked = self.ms if replay else (self.ms or self.plain_ms)
        times = [f"{ranked:.4f} ms ({'graph' if replay else 'plain calls'})" if ranked else None,
                 f"plain calls {self.plain_ms:.4f} ms" if self.plain_ms and replay else None]
        timed = "; ".join(t for t in times if t)
        timed = f"; {timed}" if timed else "; not timed"
        return (f"{self.label} ({self.engine}): the fastest of {self.ranked} {self.precision} "
                f"configurations verified within tolerance {self.tolerance:g} "
                f"({self.run} run) at seq {self.shape[0]}, batch {self.shape[1]}; error "
                f"{self.error:.3g} against the module in float64{timed}"
                + (f"; against {', '.join(vs)}" if vs else ""))


def _fmt(value, digits: str = ".4f") -> str:
    return "" if value is None else format(value, digits)


def table(plan) -> str:
    """The ranking the choice came from, the module's own times, and this module's."""
    rep = plan.report
    times = rep.get("times", {})
    m_eager, m_graph = _time(times, "module", "eager"), _time(times, "module", "graph")
    body = [(i + 1, r["label"], r["family"], _fmt(r["error"], ".2e"), _fmt(r["ms"]),
             r["timed_as"] or "", _fmt(r["plain_ms"]),
             _fmt(speedup(m_graph, r["ms"]) if r["timed_as"] == "graph" else None, ".2f"),
             _fmt(speedup(m_eager, r["plain_ms"]), ".2f"),
             STATUS[r["status"]] or r["reason"] or "")
            for i, r in enumerate(rep.get("rows", []))]
    head = (f"{plan.module.describe()}; example seq {plan.shape[0]}, batch {plan.shape[1]} "
            f"({rep.get('example', 'given')}); precision {plan.precision}, tolerance "
            f"{plan.tolerance:g}; errors against the module in float64; tuned on "
            f"{describe_machine(plan.tuned_on())}")
    lines = [head, tabulate(body, headers=("#", "configuration", "precision", "error", "ms",
                                           "timed as", "plain ms", "x module graph",
                                           "x module eager", ""))]
    for who, name in (("module", "the module itself"), ("accelerated", "this module")):
        t = times.get(who) or {}
        lines.append(f"{name}: " + ", ".join(
            f"{how} " + (f"{t[how]['ms']:.4f} ms" if "ms" in t.get(how, {})
                         else t.get(how, {}).get("skipped", "not timed"))
            for how in ("eager", "graph")))
    return "\n".join(lines)
