"""The rows the precision table shows, from the job's records (:mod:`.table`).

* one row per float precision: the fastest verified cuDNN configuration of each family
  (FP32 true/FMA, TF32, FP16, BF16), ranked by CUDA-graph replays where captured;
* the GEMM engine in FP16 (what the engine itself costs, beside cuDNN's FP16);
* per 8-bit format (INT8, FP8 E4M3) and quantized part (input, recurrent, both): the row
  of the best calibration method (lowest bits per character; for a user's model, lowest
  error against FP32), and in ``calibration`` every method's figure;
* the persistent kernel in FP16, and per 8-bit format and part at the calibration method
  the GEMM engine found best (the same plan, a faster engine);
* ``targets``: FP16 and BF16 (cuDNN's rows and the persistent kernel's) within 0.1 % of
  FP32's bits per character, the best
  8-bit configuration of each format within 1 %, with which calibration and parts reach them;
* ``answer``: which precision to deploy (:func:`answer`).
"""
from __future__ import annotations

from cudnn_rnn.charlm.table import FORMAT_FAMILY, FLOAT_FAMILIES, speedup
from cudnn_rnn.lowbit.calibration import METHODS
from cudnn_rnn.lowbit.model import FORMATS, PARTS
from cudnn_rnn.matrix.record import ranked_timing

TARGETS = {"fp16": 0.1, "bf16": 0.1, "int8": 1.0, "fp8": 1.0}  # % of FP32's bits per character


def _timed(rec: dict) -> tuple:
    t, basis = ranked_timing(rec, "forward_inference")
    plain = (rec.get("timings") or {}).get("forward_inference")
    return (t or {}).get("median_ms"), basis, (plain or {}).get("median_ms"), t


def row(rec: dict, base: dict | None, batch: int, task: bool) -> dict:
    ms, basis, plain, t = _timed(rec)
    m = rec.get("metrics") or {}
    out = {"id": rec["id"], "family": rec["family"], "engine": rec["engine"],
           "label": rec["label"], "calibration": rec.get("calibration"),
           "parts": rec.get("parts"), "ms": ms, "basis": basis, "plain_ms": plain,
           "spread": None if t is None else [t["q1_ms"], t["q3_ms"]],
           "us_per_sequence": None if ms is None else 1000.0 * ms / batch,
           "speedup_fp32": speedup(base, rec),
           "error_fp64": max((rec.get("errors") or {}).values(), default=None)}
    out.update(m)
    if task and base is not None and "bpc" in m:
        fp32 = base["metrics"]["bpc"]
        out["dbpc_pct"] = 100.0 * (m["bpc"] - fp32) / fp32
    return out


def _score(r: dict, task: bool) -> float:
    return r["bpc"] if task else r.get("error_vs_fp32", float("inf"))


def summarise(result: dict) -> dict:
    recs = result["records"]
    by_id = {r["id"]: r for r in recs}
    base = by_id.get(result["baseline"])
    task = result["source"]["task"] is not None
    batch = result["source"]["shape"]["batch"]
    ok = [r for r in recs if r["outcome"] == "OK" and _timed(r)[0] is not None]
    rows, calibration = [], {}
    for fam in FLOAT_FAMILIES:
        cands = [r for r in ok if r["engine"] == "cuDNN" and r["family"] == fam]
        if cands:
            rows.append(row(min(cands, key=lambda r: (_timed(r)[0], r["id"])), base, batch, task))
    rows += [row(r, base, batch, task) for r in ok if r["id"] == "lowbit/fp16"]
    for fmt in FORMATS:
        for part in PARTS:
            mine = [row(r, base, batch, task) for r in ok if r["engine"] == "cuBLASLt"
                    and r.get("format") == fmt and r.get("parts") == part]
            calibration[f"{fmt}/{part}"] = {r["calibration"]: r for r in mine}
            if mine:
                rows.append(dict(min(mine, key=lambda r: (_score(r, task), METHODS.index(
                    r["calibration"]))), family=FORMAT_FAMILY[fmt]))
    # the persistent kernel: FP16, and each 8-bit plan at the GEMM engine's best method
    rows += [dict(row(r, base, batch, task), family=FORMAT_FAMILY.get(r.get("format"), "fp16"))
             for r in ok if r["engine"] == "persistent"]
    failed = [{"id": r["id"], "label": r["label"], "outcome": r["outcome"],
               "call": r.get("failed_call"), "status": r.get("status"),
               "reason": r.get("reason")} for r in recs if r["outcome"] != "OK"]
    out = {"rows": rows, "calibration": calibration, "not_verified_or_refused": failed,
           "task": task, "baseline": result["baseline"]}
    out["targets"] = targets(rows, calibration) if task and base is not None else None
    out["answer"] = answer(rows, task)
    return out


def targets(rows: list, calibration: dict) -> dict:
    """Per precision: the target, the best row's Δ bits per character, whether it is met,
    and for 8 bits which (part, calibration) pairs meet it."""
    out = {}
    for fam, limit in TARGETS.items():
        # FP16 and BF16: cuDNN's and the persistent kernel's rows (the GEMM engine's FP16 is
        # its control, not a deployment)
        mine = [r for r in rows if r["family"] == fam and r.get("dbpc_pct") is not None
                and (fam in ("int8", "fp8") or r["engine"] != "cuBLASLt")]
        if not mine:
            out[fam] = {"limit_pct": limit, "met": None, "reason": "no verified row"}
            continue
        best = min(mine, key=lambda r: r["dbpc_pct"])
        entry = {"limit_pct": limit, "best": best["id"], "dbpc_pct": best["dbpc_pct"],
                 "met": best["dbpc_pct"] <= limit}
        if fam in ("int8", "fp8"):
            fmt = next(f for f, t in FORMAT_FAMILY.items() if t == fam)
            every = [(key.split("/")[1], m, r["dbpc_pct"]) for key, cal in calibration.items()
                     if key.startswith(fmt + "/") for m, r in cal.items()
                     if r.get("dbpc_pct") is not None]
            entry["meeting"] = [f"{p}/{m}" for p, m, d in every if d <= limit]
            entry["missing"] = [f"{p}/{m}" for p, m, d in every if d > limit]
        out[fam] = entry
    return out


def _overlap(a: dict, b: dict) -> bool:
    """Whether two rows' timing quartiles overlap (their times are not told apart)."""
    if not a.get("spread") or not b.get("spread"):
        return a is b
    return a["spread"][0] <= b["spread"][1] and b["spread"][0] <= a["spread"][1]


def answer(rows: list, task: bool) -> dict | None:
    """What to deploy: among the verified rows within their precision's target (FP32 is
    its own), the fastest; where other such rows' timing quartiles overlap it, the most
    accurate of them (time does not tell them apart). Also the fastest row of all."""
    timed = [r for r in rows if r.get("ms") is not None]
    if not timed:
        return None
    fastest = min(timed, key=lambda r: r["ms"])
    if not task:
        return {"fastest": fastest["id"], "deploy": None, "tied": []}
    within = [r for r in timed if r["family"] == "fp32" or (
        r.get("dbpc_pct") is not None and r["dbpc_pct"] <= TARGETS.get(r["family"], 0.1))]
    if not within:
        return {"fastest": fastest["id"], "deploy": None, "tied": []}
    quickest = min(within, key=lambda r: r["ms"])
    tied = [r for r in within if _overlap(r, quickest)]
    deploy = min(tied, key=lambda r: (r.get("dbpc_pct", 0.0), r["ms"]))
    return {"fastest": fastest["id"], "deploy": deploy["id"],
            "tied": [r["id"] for r in tied if r is not deploy]}
