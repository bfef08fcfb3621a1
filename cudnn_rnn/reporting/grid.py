"""How one record is shown in a grid: short text, long text, colour class; and a data type's
grid that one refusal covers whole, said once."""
from __future__ import annotations

from cudnn_rnn.matrix.record import (DESCRIPTOR_ONLY, OUTCOME_SHORT, OUTCOME_WORDS, max_error,
                                     ranked_timing)
from cudnn_rnn.reporting.analysis import fwd_ms
from cudnn_rnn.reporting.load import is_sample_shape


def planned(records: list, at_sample: bool = True) -> list:
    """The planned cells (no variant) at the sample's shape (the grids), or at the others."""
    return [r for r in records if is_sample_shape(r) == at_sample and not r.get("varies")]

SHORT_STATUS = {"NOT_SUPPORTED": "NS", "BAD_PARAM": "BP", "WRONG_RESULT": "WRONG", "CRASH": "CRASH",
                "TIMEOUT": "TIMEOUT", "INTERNAL_ERROR": "IE", "EXECUTION_FAILED": "EF",
                "HOST_ERROR": "HOST"} | OUTCOME_SHORT
SHORT_CALL = {
    "cudnnSetRNNDescriptor_v8": "SetRNN", "cudnnSetRNNDataDescriptor": "SetData",
    "cudnnSetTensorNdDescriptor": "SetTensor", "cudnnGetRNNWeightSpaceSize": "WSpace",
    "cudnnGetRNNTempSpaceSizes": "TempSz", "cudnnGetRNNWeightParams": "WParams",
    "cudnnBuildRNNDynamic": "Build", "cudnnRNNForward": "Fwd", "cudnnRNNBackwardData_v8": "BwdD",
    "cudnnRNNBackwardWeights_v8": "BwdW", "cudnnCreate": "Create",
    "cudnnSetDropoutDescriptor": "Dropout",
}
LEGEND = [
    ("`4.1 TF x1.9`", "verified against float64, then timed: forward-training TFLOPS and "
                      "speed-up over FLOAT/FLOAT/FMA/STANDARD of the same cell and shape. The "
                      "time is from replays of the call's CUDA graph where it was captured (bit "
                      "for bit the plain call's output; marked `g`), else from plain calls; the "
                      "speed-up compares replays only where both the cell and its FP32 baseline "
                      "were captured, else plain calls with plain calls"),
    ("`NS@SetRNN`", "CUDNN_STATUS_NOT_SUPPORTED returned by cudnnSetRNNDescriptor_v8"),
    ("`BP@...`", "CUDNN_STATUS_BAD_PARAM; other calls: SetData cudnnSetRNNDataDescriptor, "
                 "WSpace cudnnGetRNNWeightSpaceSize, TempSz cudnnGetRNNTempSpaceSizes, WParams "
                 "cudnnGetRNNWeightParams, Build cudnnBuildRNNDynamic, Fwd cudnnRNNForward, "
                 "BwdD/BwdW cudnnRNNBackwardData_v8/Weights_v8"),
    ("`WRONG`", "every call succeeded but the numbers are outside the stated tolerance; "
                "no speed is claimed"),
    (f"`{OUTCOME_SHORT['SKIPPED']}`", f"{OUTCOME_WORDS['SKIPPED']} ({DESCRIPTOR_ONLY})"),
    ("`CRASH` / `TIMEOUT`", "the worker process died or hung on this cell, or the cell left "
                            "the CUDA context in error"),
    ("`ERROR`", "this tool's own code raised on this cell (a bug to report, not a cuDNN "
                "outcome)"),
]


LEGEND_CLASS = ("ok-fast", "ns", "bp", "wrong", "desc", "crash", "crash")  # LEGEND's colours
# the outcomes each LEGEND entry explains (None: the calls' short names, where any call
# refused): a grid's legend has the entries of what its cells hold
LEGEND_OUTCOMES = (("OK",), ("NOT_SUPPORTED",), None, ("WRONG_RESULT",), ("SKIPPED",),
                   ("CRASH", "TIMEOUT"), ("ERROR",))


def legend(records: list) -> list[tuple]:
    """(key, text, colour class) of the :data:`LEGEND` entries for what ``records`` hold."""
    outcomes = {r["outcome"] for r in records}
    refused = any(r.get("failed_call") for r in records)
    return [(k, v, cls) for (k, v), cls, what in zip(LEGEND, LEGEND_CLASS, LEGEND_OUTCOMES)
            if (refused if what is None else bool(outcomes & set(what)))]


def outcome_words(outcome: str) -> str:
    """An outcome as the reports name it (SKIPPED: passed the descriptor stages)."""
    return OUTCOME_WORDS.get(outcome, outcome)


def one_refusal(records: list, data_type: str) -> dict | None:
    """The refusal every cell of ``data_type``'s grid got, when one covers it whole (the
    same outcome, call, status and reason: INT8 and FP8 on cuDNN 9), else None; its
    ``text`` says it once in place of the grid."""
    rows, cols, index = grid(records, data_type)
    causes = {(r["outcome"], r.get("failed_call"), r.get("status"), r.get("reason"))
              for r in index.values()}
    if len(causes) != 1 or len(index) < 2:
        return None
    outcome, call, status, reason = causes.pop()
    if outcome in ("OK", "SKIPPED", "WRONG_RESULT") or not call:
        return None
    text = (f"All {len(index)} cells ({len(rows)} math precision x math type rows, {len(cols)} "
            f"algorithm x cell columns) are refused by `{call}` with `CUDNN_STATUS_{status}`"
            + (f": `{reason}`." if reason else " (cuDNN logs no reason)."))
    return {"call": call, "status": status, "reason": reason, "cells": len(index), "text": text}


def short(rec: dict | None) -> str:
    if rec is None:
        return ""
    o = rec["outcome"]
    if o == "OK":
        t, _how = ranked_timing(rec, "forward_training")
        if not t:
            return "OK"
        sp = (rec.get("speedup") or {}).get("forward_training")
        return f"{t['tflops']:.1f} TF" + (f" x{sp:.2f}" if sp else "")
    text = SHORT_STATUS.get(o, o)
    if o in ("WRONG_RESULT", "SKIPPED", "CRASH", "TIMEOUT", "ERROR"):
        return text
    call = rec.get("failed_call")
    return f"{text}@{SHORT_CALL.get(call, call)}" if call else text


def long(rec: dict) -> str:
    o = rec["outcome"]
    lines = [rec["id"], "outcome: " + (f"{outcome_words(o)} ({DESCRIPTOR_ONLY})"
                                        if o in OUTCOME_WORDS else o)]
    if rec.get("failed_call"):
        lines.append(f"failed: {rec['failed_call']} -> CUDNN_STATUS_{rec.get('status')} "
                     f"({rec.get('status_code')})")
    if rec.get("reason"):
        lines.append(f"reason: {rec['reason']}")
    if rec.get("stages"):
        lines.append("stages passed: " + ", ".join(rec["stages"]))
    if rec.get("timings"):
        t = rec["timings"]
        lines.append("ms (median, plain calls): " + ", ".join(
            f"{k} {v['median_ms']:.4g}" for k, v in t.items()))
    if rec.get("graph_timings"):
        lines.append("ms (median, CUDA-graph replays): " + ", ".join(
            f"{k} {v['median_ms']:.4g}" for k, v in rec["graph_timings"].items()))
    for kind, why in (rec.get("graph_refused") or {}).items():
        lines.append(f"{kind} not captured: {why}")
    if rec.get("errors"):
        lines.append(f"max relative error vs float64: {max_error(rec):.2e}")
    return "\n".join(lines)


def css_class(rec: dict | None) -> str:
    if rec is None:
        return "none"
    o = rec["outcome"]
    if o == "OK":
        sp = (rec.get("speedup") or {}).get("forward_training") or 1.0
        return "ok-fast" if sp >= 1.5 else "ok" if sp >= 0.9 else "ok-slow"
    return {"NOT_SUPPORTED": "ns", "BAD_PARAM": "bp", "WRONG_RESULT": "wrong", "SKIPPED": "desc",
            "CRASH": "crash", "TIMEOUT": "crash", "ERROR": "crash"}.get(o, "other")


def grid(records: list, data_type: str):
    """Rows (math_prec, math_type) × columns (algo, cell) of one data type's records."""
    mine = [r for r in records if r["data_type"] == data_type]
    rows = sorted({(r["math_prec"], r["math_type"]) for r in mine}, key=_row_order)
    cols = sorted({(r["algo"], r["cell"]) for r in mine}, key=_col_order)
    index = {(r["math_prec"], r["math_type"], r["algo"], r["cell"]): r for r in mine}
    return rows, cols, index


PREC_ORDER = ["FLOAT", "DOUBLE", "HALF", "BFLOAT16", "INT8", "INT32"]
DATA_TYPE_ORDER = PREC_ORDER + ["FP8_E4M3", "FP8_E5M2"]
MATH_ORDER = ["DEFAULT", "TENSOR_OP", "TENSOR_OP_ALLOW_CONVERSION", "FMA"]
ALGO_ORDER = ["STANDARD", "PERSIST_STATIC", "PERSIST_DYNAMIC", "PERSIST_STATIC_SMALL_H"]
CELL_ORDER = ["RNN_RELU", "RNN_TANH", "LSTM", "GRU"]


def data_types(records: list) -> list[str]:
    """The data types present, in the report's order (unknown ones last, by name)."""
    return sorted({r["data_type"] for r in records}, key=lambda d: (_idx(DATA_TYPE_ORDER, d), d))


def _idx(order, v):
    return order.index(v) if v in order else len(order)


def _row_order(k):
    return (_idx(PREC_ORDER, k[0]), _idx(MATH_ORDER, k[1]))


def _col_order(k):
    return (_idx(ALGO_ORDER, k[0]), _idx(CELL_ORDER, k[1]))


def fmt_ms(rec: dict) -> str:
    """The ranked forward-training median; ``g`` marks a CUDA-graph replay."""
    ms = fwd_ms(rec)
    if ms is None:
        return ""
    return f"{ms:.3f}" + (" g" if ranked_timing(rec, "forward_training")[1] == "graph" else "")
