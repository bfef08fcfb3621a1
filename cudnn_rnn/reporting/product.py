"""Every axis value across a whole run, and every wrong result grouped.

The default matrix varies one axis at a time around each working combination (:mod:`.axes`
reads those variants). A product spec (``probes/full.toml``) has no variants: every cell
holds one value of each axis, so the question becomes, per axis value, how its cells ended
and what stopped the ones that did not work: cuDNN's call, status and reason, most common
first. Wrong results (every call succeeded, the numbers did not match the float64
reference) are listed whatever the spec, grouped by configuration, cell and direction, with
the outputs outside tolerance and their largest errors: these are the cells a user must
never deploy, and a count in the header alone would hide them.
"""
from __future__ import annotations

from collections import Counter, defaultdict

from cudnn_rnn.matrix.record import config_label
from cudnn_rnn.reporting.axes import WORKS, cause, cause_text, outcomes_text, value_of

AXES = ("algo", "cell", "direction", "input_mode", "bias_mode", "proj_size", "layout", "layers",
        "lengths")
TOP_CAUSES = 3


def _value(rec: dict, axis: str) -> str:
    return rec["algo"] if axis == "algo" else rec["cell"] if axis == "cell" else value_of(rec, axis)


def summarise(records: list) -> list[dict]:
    """Per (axis, value), for runs without variants: the outcomes of every cell holding the
    value and the most common causes among those that did not work; axes the run holds at
    one value are left out. Empty for a run with variants, whose per-axis answer
    :mod:`.axes` gives."""
    if not records or any(r.get("varies") for r in records):
        return []
    rows: dict = {}
    for axis in AXES:
        for r in records:
            key = (axis, _value(r, axis))
            row = rows.setdefault(key, {"outcomes": Counter(), "causes": Counter()})
            row["outcomes"][r["outcome"]] += 1
            if r["outcome"] not in WORKS:
                row["causes"][cause(r)] += 1
    values = Counter(axis for axis, _ in rows)
    return [{"axis": axis, "value": value, "cells": sum(row["outcomes"].values()),
             "outcomes": dict(row["outcomes"]),
             "causes": [{"call": c, "status": s, "reason": why, "count": n}
                        for (c, s, why), n in sorted(row["causes"].items(),
                                                     key=lambda kv: (-kv[1], kv[0]))[:TOP_CAUSES]]}
            for (axis, value), row in sorted(rows.items(), key=lambda kv: (AXES.index(kv[0][0]),
                                                                          kv[0][1]))
            if values[axis] > 1]  # an axis the run holds at one value says nothing


def wrong(records: list) -> list[dict]:
    """WRONG_RESULT cells grouped by configuration, cell and direction, largest groups first;
    per group the outputs outside tolerance and each output's largest error."""
    groups: dict = defaultdict(list)
    for r in records:
        if r["outcome"] == "WRONG_RESULT":
            groups[(config_label(r), r["cell"], r["direction"])].append(r)
    out = []
    for (config, cell, direction), recs in groups.items():
        worst: dict = {}
        for r in recs:
            for k, e in (r.get("errors") or {}).items():
                if e is not None:
                    worst[k] = max(worst.get(k, 0.0), e)
        out.append({"configuration": config, "cell": cell, "direction": direction,
                    "count": len(recs), "outside": cause(recs[0])[2],
                    "largest_errors": worst, "example": min(r["id"] for r in recs)})
    return sorted(out, key=lambda g: (-g["count"], g["configuration"], g["cell"]))


def markdown(rows: list, wrong_groups: list) -> list[str]:
    """The per-axis-value section of a product run and the wrong-results section of any."""
    out = []
    if rows:
        out += ["## Every axis value across the run", "",
                "Each cell holds one value of every axis (a product spec). Per value: how its "
                f"cells ended, and the {TOP_CAUSES} most common causes among those that did not "
                "work.", "", "| axis | value | cells | outcomes | most common causes |",
                "|---|---|---|---|---|"]
        for r in rows:
            causes = "; ".join(f"{cause_text(c)}: {c['count']}" for c in r["causes"])
            out.append(f"| {r['axis']} | {r['value']} | {r['cells']} | "
                       f"{outcomes_text(r['outcomes'])} | "
                       f"{causes.replace('|', '¦')} |")
        out.append("")
    if wrong_groups:
        out += ["## Wrong results", "",
                "Every call returned SUCCESS, but the numbers did not match the float64 "
                "reference within the stated tolerance. No speed is claimed for these cells.", "",
                "| configuration | cell | direction | cells | outside tolerance | largest errors "
                "| example |", "|---|---|---|---|---|---|---|"]
        for g in wrong_groups:
            errs = ", ".join(f"{k} {v:.1e}" for k, v in sorted(g["largest_errors"].items()))
            out.append(f"| {g['configuration']} | {g['cell']} | {g['direction']} | {g['count']} "
                       f"| {g['outside']} | {errs} | `{g['example']}` |")
        out.append("")
    return out
