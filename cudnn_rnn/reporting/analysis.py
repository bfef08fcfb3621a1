"""The questions the report answers, computed from records alone."""
from __future__ import annotations

from collections import Counter

from cudnn_rnn.matrix import baseline
from cudnn_rnn.matrix.record import config_label, max_error, ranked_timing
from cudnn_rnn.reporting.load import is_sample_shape


LOW_PRECISION = ("HALF", "BFLOAT16")

# NVIDIA's old RNN_example (cudnn_samples_v7 RNN/RNN_example.cu), call by call, as the seed
# ran it with CUDNN_DATA_INT8. Line numbers are the seed's; the calls are the sample's, in
# its order (the repeats of 373/402 are numLayers x linear layers = 2 x 2 for RNN_RELU).
SEED_CASCADE = (
    (285, "cudnnSetRNNDescriptor_v6(..., CUDNN_DATA_INT8)", "NOT_SUPPORTED",
     "the real refusal: INT8 is not an RNN data type"),
    (302, "cudnnGetRNNParamsSize(..., &weightsSize, CUDNN_DATA_INT8)", "NOT_SUPPORTED",
     "on the refused descriptor; weightsSize is left unwritten"),
    (309, "cudnnSetFilterNdDescriptor(wDesc, CUDNN_DATA_INT8, NCHW, 3, dimW)", "BAD_PARAM",
     "consequence: dimW was computed from the unwritten weightsSize"),
    (310, "cudnnSetFilterNdDescriptor(dwDesc, ...)", "BAD_PARAM", "the same, for dw"),
    (326, "cudnnGetRNNWorkspaceSize(...)", "NOT_SUPPORTED",
     "on the refused descriptor; workSize unwritten"),
    (328, "cudnnGetRNNTrainingReserveSize(...)", "NOT_SUPPORTED",
     "on the refused descriptor; reserveSize unwritten"),
    (330, "cudaMalloc(&workspace, workSize)", "out of memory",
     "consequence: an allocation of whatever the unwritten size variable held"),
    (373, "cudnnGetRNNLinLayerMatrixParams(...) x4", "BAD_PARAM",
     "consequence: refused descriptor and invalid filter descriptors"),
    (402, "cudnnGetRNNLinLayerBiasParams(...) x4", "BAD_PARAM", "consequence, as above"),
    (482, "cudnnRNNForwardTraining(...)", "BAD_PARAM", "consequence"),
    (516, "cudnnRNNBackwardData(...)", "BAD_PARAM", "consequence"),
    (541, "cudnnRNNBackwardWeights(...)", "BAD_PARAM", "consequence"),
)


def counts(records: list) -> dict:
    c = Counter(r["outcome"] for r in records)
    return dict(sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))


def fwd_tflops(rec: dict, kind: str = "forward_training") -> float | None:
    """The TFLOPS of the timing :func:`fwd_ms` gives (the same median)."""
    t, _basis = ranked_timing(rec, kind)
    return t["tflops"] if t else None


def fwd_ms(rec: dict, kind: str = "forward_training") -> float | None:
    """The median the report ranks by: graph replays where captured, else plain calls."""
    t, _basis = ranked_timing(rec, kind)
    return t["median_ms"] if t else None


def shape_label(rec: dict) -> str:
    s = rec["shape"]
    return f"{s['seq_length']}x{s['layers']}x{s['hidden']}x{s['batch']}"


def fastest(records: list, *, cell: str | None = None, data_types=None, sample_only=True,
            kind: str = "forward_training") -> dict | None:
    """The fastest verified cell of the product (not a variant: those change an axis of the
    seed's configuration, and time only the variant calls), at the sample's shape unless
    ``sample_only`` is False."""
    pool = [r for r in records if r["outcome"] == "OK" and fwd_ms(r, kind) is not None
            and not r.get("varies") and (cell is None or r["cell"] == cell)
            and (data_types is None or r["data_type"] in data_types)
            and (not sample_only or is_sample_shape(r))]
    return min(pool, key=lambda r: (fwd_ms(r, kind), r["id"])) if pool else None


def int8_answer(records: list, meta: dict) -> dict:
    """Can this RNN (the seed's: RNN_RELU, 20 2 512 64) run in INT8 here, and what instead."""
    int8 = [r for r in records if r["data_type"] == "INT8"]
    seed = next((r for r in int8 if r["cell"] == "RNN_RELU" and r["math_prec"] == "INT8"
                 and r["algo"] == "STANDARD" and is_sample_shape(r)), None)
    ran = [r for r in int8 if r["outcome"] in ("OK", "WRONG_RESULT")]
    where = Counter((r.get("failed_call"), r.get("status"), r.get("reason")) for r in int8
                    if r["outcome"] not in ("OK", "WRONG_RESULT", "SKIPPED"))
    alt = fastest(records, cell="RNN_RELU", data_types=LOW_PRECISION)
    alt_any = {cell: fastest(records, cell=cell, data_types=LOW_PRECISION)
               for cell in ("RNN_RELU", "RNN_TANH", "LSTM", "GRU")}
    return {
        "cells": len(int8),
        "ran": len(ran),
        "seed_cell": seed and {k: seed.get(k) for k in ("id", "outcome", "failed_stage", "failed_call",
                                                          "status", "status_code", "reason", "stages")},
        "where_int8_stops": [{"call": k[0], "status": k[1], "reason": k[2], "cells": v}
                             for k, v in sorted(where.items(),
                                                key=lambda kv: (-kv[1], str(kv[0])))],
        "alternative": alt and _alt(alt),
        "alternative_per_cell": {c: a and _alt(a) for c, a in alt_any.items()},
        "seed_replay": meta.get("seed_replay"),
        "cascade": [{"line": line, "call": call, "status": st, "meaning": m}
                    for line, call, st, m in SEED_CASCADE],
    }


def _alt(r: dict) -> dict:
    return {"id": r["id"], "config": config_label(r), "cell": r["cell"], "shape": shape_label(r),
            "forward_training_ms": fwd_ms(r), "tflops": fwd_tflops(r),
            "speedup": (r.get("speedup") or {}).get("forward_training"),
            "speedup_inference": (r.get("speedup") or {}).get("forward_inference"),
            "max_error": max_error(r)}


def sweep(records: list) -> dict:
    """Speed-ups over FP32 across the shape sweep, per configuration and shape."""
    rows = [r for r in records if str(r.get("block", "")).startswith("shape sweep")
            and r["outcome"] == "OK" and r.get("timings")]
    configs = sorted({config_label(r) for r in rows} - {baseline.LABEL})
    table = {}
    for r in rows:
        key = (r["cell"], r["shape"]["hidden"], r["shape"]["batch"])
        table.setdefault(key, {})[config_label(r)] = {
            "speedup": (r.get("speedup") or {}).get("forward_training"),
            "speedup_inference": (r.get("speedup") or {}).get("forward_inference"),
            "ms": fwd_ms(r), "tflops": fwd_tflops(r),
            "max_error": max_error(r)}
    lines = []
    for (cell, h, b), cfgs in sorted(table.items()):
        lines.append({"cell": cell, "hidden": h, "batch": b,
                      "multiple_of_8": h % 8 == 0 and b % 8 == 0, "configs": cfgs})
    return {"configs": configs, "rows": lines, "findings": _sweep_findings(lines)}


def _sweep_findings(rows: list) -> list[str]:
    """Plain statements about when FP16 tensor-op math pays off, with the numbers."""
    out = []
    tc = "HALF/FLOAT/TENSOR_OP/STANDARD"
    for cell in sorted({r["cell"] for r in rows}):
        mine = [r for r in rows if r["cell"] == cell and tc in r["configs"]
                and r["configs"][tc]["speedup"] is not None]  # None: its baseline was not timed
        if not mine:
            continue
        best = max(mine, key=lambda r: r["configs"][tc]["speedup"])
        worst = min(mine, key=lambda r: r["configs"][tc]["speedup"])
        out.append(f"{cell}: FP16 tensor-op forward training runs {best['configs'][tc]['speedup']:.2f}x "
                   f"FP32 at hidden {best['hidden']}, batch {best['batch']} but "
                   f"{worst['configs'][tc]['speedup']:.2f}x at hidden {worst['hidden']}, "
                   f"batch {worst['batch']}.")
        for r8 in [r for r in mine if r["multiple_of_8"]]:
            twin = _twin(r8, mine)
            if twin:
                a, b = r8["configs"][tc]["speedup"], twin["configs"][tc]["speedup"]
                out.append(f"{cell}: hidden {r8['hidden']} x batch {r8['batch']} (multiples of 8) "
                           f"{a:.2f}x vs hidden {twin['hidden']} x batch {twin['batch']} "
                           f"(not) {b:.2f}x.")
    return out


def _twin(r8: dict, rows: list) -> dict | None:
    """The non-multiple-of-8 shape just below a multiple-of-8 one (e.g. 2044x127 for 2048x128)."""
    cands = [r for r in rows if not r["multiple_of_8"] and r["hidden"] < r8["hidden"]
             and r8["hidden"] - r["hidden"] <= 8]
    return min(cands, key=lambda r: r8["hidden"] - r["hidden"]) if cands else None


def performance_rule(rows: list) -> list[dict]:
    """The documented multiple-of-8 rule for FP16 tensor ops, checked on the sweep's twins.

    Where the multiple-of-8 shape gains (> 1.1x FP32) the rule *holds* if its twin that is
    not a multiple of 8 gains clearly less (< 90 % of it) and is *contradicted* otherwise
    (tensor cores evidently used anyway). Where neither gains, the shape is too small for
    tensor-op math to matter and the rule is not tested ("no gain")."""
    tc = "HALF/FLOAT/TENSOR_OP/STANDARD"
    out = []
    for r8 in rows:
        if not r8["multiple_of_8"] or tc not in r8["configs"]:
            continue
        twin = _twin(r8, [r for r in rows if r["cell"] == r8["cell"] and tc in r["configs"]])
        if not twin:
            continue
        a, b = r8["configs"][tc]["speedup"], twin["configs"][tc]["speedup"]
        if a is None or b is None:
            continue
        out.append({"cell": r8["cell"], "multiple": f"{r8['hidden']}x{r8['batch']}",
                    "not_multiple": f"{twin['hidden']}x{twin['batch']}", "speedup_multiple": a,
                    "speedup_not_multiple": b, "contradicted": b >= 0.9 * a and a > 1.1,
                    "verdict": ("no gain" if a <= 1.1 else
                                "contradicted" if b >= 0.9 * a else "holds")})
    return out
