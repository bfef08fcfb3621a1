"""cuDNN's documented RNN constraints (data/documented_constraints.toml) against the measurement."""
from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from cudnn_rnn.engine.config import sequence_lengths

DATA = Path(__file__).resolve().parent.parent / "data" / "documented_constraints.toml"
AXES = ("data_type", "math_prec", "math_type", "algo", "cell", "direction", "layout",
        "input_mode", "bias_mode", "projection", "lengths_order")


def axis_of(rec: dict, axis: str):
    """A record's value on a rule's axis. Two are derived: ``projection`` (``yes`` where
    projSize is below hiddenSize) and ``lengths_order`` of the batch's sequence lengths
    (``equal``, ``sorted``: non-increasing, or ``unsorted``)."""
    if axis == "projection":
        proj, hidden = rec.get("proj_size"), (rec.get("shape") or {}).get("hidden")
        return "yes" if proj is not None and hidden is not None and proj < hidden else "no"
    if axis == "lengths_order":
        return lengths_order(rec)
    return rec.get(axis)


MAX_DRAWN = 1 << 20  # batch rows whose lengths a report draws from a record's lengths form


def lengths_order(rec: dict) -> str:
    """The order of the lengths the cell ran: as recorded (``seq_lengths``), else from its
    ``lengths`` form (records before the resolved lengths were kept)."""
    text, shape = rec.get("lengths") or "equal", rec.get("shape") or {}
    lengths = rec.get("seq_lengths")
    if lengths is None and text == "equal":  # known without the batch's lengths
        return "equal"
    if lengths is None and (shape.get("batch") or 0) > MAX_DRAWN:
        return "unknown"  # a record claiming a batch no cell ran: not drawn in memory
    if lengths is None:
        try:
            lengths = sequence_lengths(text, shape["seq_length"], shape["batch"])
        except (KeyError, ValueError):
            return "equal" if text == "equal" else "unknown"
    if all(n == shape["seq_length"] for n in lengths):
        return "equal"
    return "sorted" if all(a >= b for a, b in zip(lengths, lengths[1:])) else "unsorted"


@dataclass(frozen=True)
class Rule:
    id: str
    text: str
    when: dict
    require: dict | None
    unsupported: bool
    kind: str
    sources: tuple
    min_version: int | None = None
    max_version: int | None = None

    def applies(self, rec: dict, version: int) -> bool:
        if self.min_version is not None and version < self.min_version:
            return False
        if self.max_version is not None and version > self.max_version:
            return False
        return all(axis_of(rec, axis) in values for axis, values in self.when.items())

    def forbids(self, rec: dict, version: int) -> bool:
        if self.kind != "support" or not self.applies(rec, version):
            return False
        if self.unsupported:
            return True
        return not all(axis_of(rec, axis) in values
                       for axis, values in (self.require or {}).items())


@dataclass
class Constraints:
    rules: list
    sources: dict

    def documented(self, rec: dict, version: int) -> tuple[bool, list]:
        """(documented as supported, the rules that forbid it)."""
        forbidding = [r for r in self.rules if r.forbids(rec, version)]
        return not forbidding, forbidding


def load(path: Path = DATA) -> Constraints:
    data = tomllib.loads(Path(path).read_text())
    sources = data.get("sources", {})
    rules = []
    for raw in data.get("rule", []):
        unknown_axes = set(raw.get("when", {})) - set(AXES)
        if unknown_axes:
            raise ValueError(f"rule {raw.get('id')}: unknown axis {sorted(unknown_axes)}")
        for s in raw.get("source", []):
            if s not in sources:
                raise ValueError(f"rule {raw.get('id')}: unknown source {s!r}")
        rules.append(Rule(raw["id"], raw["text"], raw.get("when", {}), raw.get("require"),
                          bool(raw.get("unsupported", False)), raw.get("kind", "support"),
                          tuple(raw.get("source", [])), raw.get("min_version"),
                          raw.get("max_version")))
    return Constraints(rules, sources)


def version_number(text: str | None) -> int:
    try:
        major, minor, patch = (int(x) for x in (text or "0.0.0").split("."))
    except ValueError:
        return 0
    return major * 10000 + minor * 100 + patch


MEASURED_WORKS = ("OK", "WRONG_RESULT")  # WRONG_RESULT ran; it is wrong about numbers, not support
NOT_JUDGED = ("SKIPPED", "CRASH", "TIMEOUT", "HOST_ERROR", "ERROR")


def contradictions(records: list, constraints: Constraints) -> list[dict]:
    """Cells whose measured support disagrees with the documented rules.

    * documented unsupported, but every stage ran (OK or WRONG_RESULT);
    * documented supported, but cuDNN refused a call.
    Cells that did not reach a verdict (SKIPPED without a GPU, CRASH, TIMEOUT, ERROR) are not
    judged.
    """
    out = []
    for rec in sorted(records, key=lambda r: r["id"]):
        if rec["outcome"] in NOT_JUDGED:
            continue
        version = version_number(rec.get("cudnn_version"))
        supported, forbidding = constraints.documented(rec, version)
        works = rec["outcome"] in MEASURED_WORKS
        if works and not supported:
            out.append({"id": rec["id"], "documented": "unsupported",
                        "measured": rec["outcome"], "rules": [r.id for r in forbidding],
                        "detail": "; ".join(r.text for r in forbidding)})
        elif not works and supported and _documented_type(rec, constraints, version):
            out.append({"id": rec["id"], "documented": "supported", "measured": rec["outcome"],
                        "rules": [], "detail": f"{rec.get('failed_call')} -> {rec.get('status')}"
                        + (f" ({rec['reason']})" if rec.get("reason") else "")})
    return out


def _documented_type(rec: dict, constraints: Constraints, version: int) -> bool:
    """Only data types the documentation names can be 'documented supported'."""
    return rec.get("data_type") in ("HALF", "FLOAT", "DOUBLE") or (
        rec.get("data_type") == "BFLOAT16" and version >= 91300)


def group(found: list[dict]) -> list[dict]:
    """Contradictions grouped by (direction of the disagreement, rule or failure)."""
    groups: dict = {}
    for c in found:
        key = (c["documented"], ",".join(c["rules"]) or c["detail"])
        g = groups.setdefault(key, {"documented": c["documented"], "measured": set(),
                                    "rules": c["rules"], "detail": c["detail"], "cells": []})
        g["measured"].add(c["measured"])
        g["cells"].append(c["id"])
    out = []
    for g in groups.values():
        g["measured"] = sorted(g["measured"])
        g["cells"] = sorted(g["cells"])
        g["count"] = len(g["cells"])
        out.append(g)
    return sorted(out, key=lambda g: (-g["count"], g["documented"], g["detail"]))
