"""The axes beyond data type, precision, math and algorithm: what each variant changed.

A variant (``varies`` in its record: the cell it varies and the axis it changes, see
:mod:`cudnn_rnn.matrix.variants`) is compared with its base cell from the same run. Per
axis value: how many variants ran, how many the change *broke* (the base worked, the
variant was refused or wrong), how many it *fixed* (the reverse), and for the broken ones
which call refused them, with which status and reason, and for which combinations.
"""
from __future__ import annotations

from collections import Counter, defaultdict

from cudnn_rnn.matrix.record import config_label
from cudnn_rnn.reporting.grid import outcome_words

WORKS = ("OK", "SKIPPED")  # SKIPPED: every descriptor stage passed, no GPU to go further


def cause(rec: dict) -> tuple:
    """Why a variant failed, as one group: cuDNN's call, status and reason; for a wrong
    result, the outputs outside tolerance (not their errors, which differ per cell)."""
    if rec["outcome"] == "WRONG_RESULT":
        v = rec.get("verification") or {}
        tol, grad = v.get("tolerance"), v.get("gradient_tolerance") or v.get("tolerance")
        bad = sorted(k for k, e in (rec.get("errors") or {}).items()
                     if e is None or (tol is not None and e > (grad if k.startswith("d") else tol)))
        return ("-", "WRONG_RESULT", "outside tolerance: " + (", ".join(bad) or "?"))
    return (rec.get("failed_call") or "-", rec.get("status") or rec["outcome"],
            (rec.get("reason") or "")[:120])


def cause_text(group: dict) -> str:
    """A cause group (``call``, ``status``, ``reason``) as the reports show it."""
    return f"{group['call']} → {group['status']}" + (f" ({group['reason']})" if group["reason"]
                                                    else "")


def outcomes_text(outcomes: dict) -> str:
    """Outcome counts as the reports show them: ``NOT_SUPPORTED 48, OK 192`` (SKIPPED as
    :func:`~.grid.outcome_words` names it)."""
    return ", ".join(f"{outcome_words(k)} {v}" for k, v in sorted(outcomes.items()))


def value_of(rec: dict, axis: str) -> str:
    """How a variant's value on ``axis`` is shown."""
    if axis == "layers":
        n = rec["shape"]["layers"]
        return f"{n} layer" + ("s" if n != 1 else "")
    if axis == "proj_size":  # a record without projection holds projSize = hiddenSize
        proj = rec.get("proj_size")
        return "none" if proj in (None, rec["shape"]["hidden"]) else f"projection {proj}"
    if axis == "lengths":
        return f"lengths {rec.get('lengths') or 'equal'}"
    return str(rec.get(axis))


def summarise(records: list) -> list[dict]:
    """One row per (axis, value), in the order the run met them, with the broken variants
    grouped by :func:`cause`."""
    by_id = {r["id"]: r for r in records}
    rows: dict = {}  # in the order the run met them: axis by axis, value by value
    for r in records:
        v = r.get("varies")
        base = by_id.get((v or {}).get("base"))
        if not v or base is None:
            continue
        key = (v["axis"], value_of(r, v["axis"]))
        row = rows.setdefault(key, {"axis": key[0], "value": key[1], "variants": 0,
                                    "outcomes": Counter(), "broken": defaultdict(list),
                                    "fixed": [], "timed": []})
        row["variants"] += 1
        row["outcomes"][r["outcome"]] += 1
        if base["outcome"] in WORKS and r["outcome"] not in WORKS:
            row["broken"][cause(r)].append((r["algo"], f"{config_label(r)} {r['cell']}"))
        elif base["outcome"] not in WORKS and r["outcome"] in WORKS:
            row["fixed"].append(f"{config_label(r)} {r['cell']}")
    out = []
    for (axis, value), row in rows.items():
        broken = sorted(({"call": c, "status": s, "reason": why, "count": len(cells),
                          "by_algo": dict(Counter(a for a, _ in cells)),
                          "cells": sorted(n for _, n in cells)}
                         for (c, s, why), cells in row["broken"].items()),
                        key=lambda g: -g["count"])
        out.append({"axis": axis, "value": value, "variants": row["variants"],
                    "outcomes": dict(row["outcomes"]), "broken": broken,
                    "broken_count": sum(g["count"] for g in broken),
                    "fixed": sorted(row["fixed"])})
    return out


def markdown(rows: list) -> list[str]:
    """The per-axis section of matrix.md."""
    if not rows:
        return []
    out = ["## Every other axis, one at a time", "",
           "Each combination that got past cudnnSetRNNDescriptor_v8 at the sample's shape, with "
           "one other axis changed (its *variants*). *Broke*: the combination worked and the "
           "variant did not; *fixed*: the reverse, which only a combination refused after the RNN "
           "descriptor (or wrong) can show, as the variants of the others are not run.", "",
           "| axis | value | variants | outcomes | broke | fixed |", "|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['axis']} | {r['value']} | {r['variants']} | "
                   f"{outcomes_text(r['outcomes'])} | "
                   f"{r['broken_count']} | {len(r['fixed'])} |")
    out.append("")
    for r in rows:
        for g in r["broken"]:
            algos = ", ".join(f"{a} {n}" for a, n in sorted(g["by_algo"].items()))
            shown = ", ".join(g["cells"][:4]) + (", …" if g["count"] > 4 else "")
            out.append(f"- {r['axis']} = {r['value']}: {cause_text(g)}"
                       f": {g['count']} combinations (by algorithm: {algos}), e.g. {shown}")
    return out + [""]
