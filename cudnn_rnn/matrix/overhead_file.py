"""The overhead check's ``overhead.json`` (:mod:`cudnn_rnn.compare.overhead`): its schema and
its reader."""
from __future__ import annotations

from pathlib import Path

from cudnn_rnn.matrix.errors import BadInput
from cudnn_rnn.matrix.jsontypes import (BOOL, NAME, NUM, POS_INT, POS_NUM, SCALAR, STR, Dict,
                                        List, Obj, Opt, problem)
from cudnn_rnn.matrix.runs import read_json_dict


def _measured_row(row: dict, where: str) -> str | None:
    if "ratio" not in row:
        return None
    return MEASURED_ROW(row, where)


def _captured(c: dict, where: str) -> str | None:
    """The range over processes is both ends or none (one process records the ratio only)."""
    ends = [k for k in ("ratio_min", "ratio_max") if k in c]
    if len(ends) == 1:
        return f"{where}: {ends[0]!r} without the other end of the range"
    return None


MEASURED_ROW = Obj({
    "ratio": NUM, "ratio_min": NUM, "ratio_max": NUM, "fwd_mode": STR,
    "config": Obj({k: NAME for k in ("data_type", "math_prec", "math_type", "algo", "layout")},
                  required={"data_type", "math_prec", "math_type", "algo", "layout"}),
    "ours": Obj({"median_ms": POS_NUM}, required={"median_ms"}),
    "torch": Obj({"median_ms": POS_NUM}, required={"median_ms"}),
    "host_enqueue": Obj({"ours_us": NUM, "torch_us": NUM}, required={"ours_us", "torch_us"}),
    "isolated_ratio": NUM, "queued_ratio": Opt(NUM),
    "queued": Opt(Obj({"host_ahead": BOOL}, required={"host_ahead"})),
    "arguments_differ": List(STR)},
    required={"ratio", "ratio_min", "ratio_max", "fwd_mode", "config", "ours", "torch",
              "host_enqueue", "isolated_ratio"},
    rule=lambda r, w: (f"{w}.queued: needed beside queued_ratio"
                       if r.get("queued_ratio") is not None and not r.get("queued") else None))
OVERHEAD = Obj({
    "target": NUM, "processes": POS_INT, "rounds": Opt(POS_INT), "worst_ratio": Opt(NUM),
    "median_ratio": Opt(NUM), "worst_single_process": Opt(NUM), "provenance": Opt(Dict(SCALAR)),
    "rows": List(Obj({"shape": Obj({k: SCALAR for k in ("cell", "seq", "layers", "hidden",
                                                        "batch", "dtype")},
                                   required={"cell", "seq", "layers", "hidden", "batch", "dtype"}),
                      "training_mode": BOOL, "skipped": Opt(STR),
                      # both sides in CUDA graphs: the replays' ratio over processes
                      "captured": Opt(Obj({"ratio": NUM, "ratio_min": NUM, "ratio_max": NUM,
                                           "ours_ms": POS_NUM, "torch_ms": POS_NUM,
                                           "processes": POS_INT, "skipped": Opt(STR)},
                                          rule=_captured))},
                     required={"shape", "training_mode"}, rule=_measured_row))},
    required={"target", "rows"})



def read_overhead(path: str | Path) -> dict | None:
    """``overhead.json``, checked (None when absent)."""
    p = Path(path)
    if not p.exists():
        return None
    data = read_json_dict(p)
    wrong = "not a JSON object" if data is None else problem(data, OVERHEAD, "the file")
    if wrong:
        raise BadInput(f"{p} is not the overhead check's overhead.json ({wrong})")
    return data
