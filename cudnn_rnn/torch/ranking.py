"""Which verified configuration an accelerated module runs.

The precision asked for decides what runs (:data:`PRECISIONS`: cuDNN's families through
:func:`cudnn_rnn.charlm.rows.cudnn_row`, the engines' 8-bit formats through
:func:`~cudnn_rnn.charlm.rows.engine_row`, both driven by
:func:`cudnn_rnn.charlm.table.run_table`) and which rows the choice may come from. Of the
rows that verified (each by its own rule: cuDNN against the float64 reference on the values
it holds, an 8-bit engine against its quantized float64 twin) and whose largest error
against the module in float64 is within the tolerance, the tuner's ranking
(:func:`cudnn_rnn.tune.rank`: graph replays where captured) orders the eligible ones; the
first is the choice, the rest (then cuDNN's rows of any precision, the fallback of a shape
or a PackedSequence no engine serves) are tried in that order where the choice does not
serve a shape.

Rows that differ only by the calibration method keep the most accurate one
(:func:`cudnn_rnn.charlm.table.method_score`): methods cost the same, so ranking them by
time would pick one by the noise of its timing.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from cudnn_rnn.charlm.table import FLOAT_FAMILIES, method_score
from cudnn_rnn.lowbit import calibration, model
from cudnn_rnn.matrix.record import max_error
from cudnn_rnn.torch.errors import NotAccelerated
from cudnn_rnn.tune import cost_ms, rank


@dataclass(frozen=True)
class Precision:
    """``families``: cuDNN's families run; ``formats``: the engines' 8-bit formats run (their
    FP16 rows always run); ``eligible``: the record families the choice may come from."""
    families: tuple
    formats: tuple
    eligible: frozenset


PRECISIONS = {
    "auto": Precision(FLOAT_FAMILIES, model.FORMATS, frozenset(FLOAT_FAMILIES + model.FORMATS)),
    "fp32": Precision(("fp32",), (), frozenset({"fp32"})),
    "tf32": Precision(("tf32",), (), frozenset({"tf32"})),
    "fp16": Precision(("fp16",), (), frozenset({"fp16"})),
    "bf16": Precision(("bf16",), (), frozenset({"bf16"})),
    # the 8-bit ones run cuDNN's FP16 family as well: the fallback of what no engine serves
    "int8": Precision(("fp16",), ("int8",), frozenset({"int8"})),
    "fp8": Precision(("fp16",), ("e4m3",), frozenset({"e4m3"})),
}
# each row's part in the choice, as the table shows it, in the table's order (report.ORDER):
# "failed" and "passed" show the row's own reason ("passed": verified in the ranking, then
# not served in the module, tuning.settle)
STATUS = {"chosen": "chosen", "ranked": "ranked", "fallback": "cuDNN fallback", "passed": "",
          "other": "another precision", "calibration": "a better calibration is ranked",
          "outside": "outside the tolerance", "same": "same run as another method",
          "failed": ""}


def precision(name) -> Precision:
    """The :class:`Precision` named ``name``; :class:`NotAccelerated` for an unknown one."""
    if name not in PRECISIONS:
        raise NotAccelerated(f"precision {name!r} is not one of {', '.join(PRECISIONS)}")
    return PRECISIONS[name]


def tolerance(value) -> float:
    """``value`` as a tolerance: a finite number above zero, else :class:`NotAccelerated`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or value <= 0:
        raise NotAccelerated(f"tolerance must be a positive, finite number (a relative error "
                             f"such as 1e-2), got {value!r}")
    return float(value)


def methods(value) -> tuple:
    """``value`` as the calibration methods an 8-bit row is tried with: None for every one
    of :data:`~cudnn_rnn.lowbit.calibration.METHODS`, else a method's name or a sequence of
    names (in the table's order, once each); :class:`NotAccelerated` for an unknown or
    empty one."""
    if value is None:
        return calibration.METHODS
    names = [value] if isinstance(value, str) else \
        list(value) if isinstance(value, (list, tuple)) else [value]
    unknown = [m for m in names if m not in calibration.METHODS]
    if unknown or not names:
        raise NotAccelerated(f"calibration method {(unknown or [value])[0]!r} is not one of "
                             f"{', '.join(calibration.METHODS)} (give one name or a list)")
    return tuple(m for m in calibration.METHODS if m in names)


def less_accurate_calibrations(records: list) -> set:
    """Ids of the verified 8-bit rows whose configuration (engine, format, part) has a row
    of another calibration method that did better by
    :func:`~cudnn_rnn.charlm.table.method_score` (ties: the earlier method)."""
    groups: dict = {}
    for r in records:
        if r["outcome"] == "OK" and r.get("format") and not r.get("same_run_as"):
            groups.setdefault((r["engine"], r["format"], r["parts"]), []).append(r)
    losers = set()
    for rows in groups.values():
        best = min(rows, key=lambda r: (method_score(r),
                                        calibration.METHODS.index(r["calibration"])))
        losers |= {r["id"] for r in rows if r is not best}
    return losers


def within(rec: dict, limit: float) -> bool:
    """A verified, timed row whose largest error against the module is within ``limit``."""
    err = max_error(rec)
    return (rec["outcome"] == "OK" and cost_ms(rec, False) is not None and err is not None
            and err <= limit)


def ranked(records: list, prec: Precision, limit: float) -> tuple[list, list]:
    """(the eligible rows within the tolerance, fastest first; cuDNN's other rows within it,
    fastest first): the order a shape tries them in."""
    losers = less_accurate_calibrations(records)
    usable = [r for r in records if within(r, limit) and not r.get("same_run_as")
              and r["id"] not in losers]
    order = rank(usable, training=False)
    mine = [r for r in order if r["family"] in prec.eligible]
    fallbacks = [r for r in order if r["engine"] == "cuDNN" and r["family"] not in prec.eligible]
    return mine, fallbacks


def statuses(records: list, prec: Precision, limit: float) -> dict:
    """Each record's part in the choice, by id: a key of :data:`STATUS`."""
    mine, fallbacks = ranked(records, prec, limit)
    losers = less_accurate_calibrations(records)
    out = {r["id"]: "ranked" for r in mine} | {r["id"]: "fallback" for r in fallbacks}
    if mine:
        out[mine[0]["id"]] = "chosen"
    for r in records:
        if r["id"] in out:
            continue
        out[r["id"]] = ("failed" if r["outcome"] != "OK" else "same" if r.get("same_run_as")
                        else "calibration" if r["id"] in losers
                        else "outside" if not within(r, limit) else "other")
    return out


def refusal(records: list, name: str, prec: Precision, limit: float, shape: tuple) -> str:
    """The one line :func:`~cudnn_rnn.torch.accelerate` refuses with when no eligible row is
    within the tolerance: the nearest miss, or the first failure."""
    mine = [r for r in records if r["family"] in prec.eligible]
    where = f"at seq {shape[0]}, batch {shape[1]}"
    ok = [r for r in mine if r["outcome"] == "OK" and max_error(r) is not None]
    if ok:
        best = min(ok, key=max_error)
        return (f"no {name} configuration of {len(mine)} verified within tolerance {limit:g} "
                f"{where}: the most accurate, {best['label']}, is off by {max_error(best):.3g} "
                f"from the module in float64; give a larger tolerance or another precision")
    if not mine:
        return f"no {name} configuration ran {where}"
    first = mine[0]
    return (f"none of the {len(mine)} {name} configurations verified {where}: "
            f"{first['label']}: {first['outcome']} ({first.get('reason') or first.get('status')})"
            f"; try precision='auto'")
