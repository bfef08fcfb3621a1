"""The benchmark's 8-bit rows: per shape, the GEMM engine's best 8-bit configuration against
the best verified 16-bit cuDNN configuration and PyTorch's best, all CUDA-graph replays,
and cuBLASLt's dense rates per precision.

Pure functions over a benchmark's recorded shape lines (their ``engine`` candidates, see
:func:`cudnn_rnn.matrix.bench.compact_engine`) and run entries (``engine_gemm``). Ratios
compare replays with replays where both sides were captured, else plain calls with plain
calls (:func:`cudnn_rnn.matrix.bench.candidates_ratio`, as the rest of the report).
"""
from __future__ import annotations

from cudnn_rnn.reporting.bench_pieces import timed
from cudnn_rnn.reporting.load import is_sample_shape
from cudnn_rnn.reporting.markdown import figure
from cudnn_rnn.matrix.bench import (candidates_ratio, median_ms, plain_ms, replay_ms, verified,
                                    vs_torch_best)


def _engine_ok(rec: dict) -> list[dict]:
    return [c for c in rec.get("engine") or [] if c["outcome"] == "OK" and c.get("timing")]


def _fastest(cands: list[dict]) -> dict | None:
    return min(cands, key=lambda c: (median_ms(c), c["config"])) if cands else None


def shape_row(rec: dict) -> dict | None:
    """One shape's 8-bit line; None where the GEMM engine did not run at this shape."""
    if "engine" not in rec:
        return None
    ok = _engine_ok(rec)
    eight = _fastest([c for c in ok if c.get("format")])
    # the GEMM engine's own (a record before the persistent kernel names no engine)
    eight_gemm = _fastest([c for c in ok if c.get("format") and c.get("engine") != "persistent"])
    eight_persistent = _fastest([c for c in ok if c.get("format")
                                 and c.get("engine") == "persistent"])
    cudnn16 = _fastest([c for c in verified(rec)
                        if c["config"].split("/")[0] in ("HALF", "BFLOAT16")])
    cudnn_fp16 = _fastest([c for c in verified(rec) if c["config"].startswith("HALF/")])
    engine_fp16 = next((c for c in ok if c["config"] == "fp16"), None)
    vs_torch, tb = vs_torch_best(rec.get("torch"), replay_ms(eight), plain_ms(eight))
    return {"id": rec["id"], "shape": rec["shape"], "best_8bit": eight,
            "best_8bit_gemm": eight_gemm, "best_8bit_persistent": eight_persistent,
            "best_16bit_cudnn": cudnn16,
            "speedup_vs_cudnn16": candidates_ratio(cudnn16, eight),
            "torch_best": tb, "speedup_vs_torch_best": vs_torch,
            "engine_fp16_over_cudnn_fp16": candidates_ratio(engine_fp16, cudnn_fp16),
            "per_config": {c["config"]: {"ms": median_ms(c), "max_error": c.get("max_error"),
                                         "vs_cudnn16": candidates_ratio(cudnn16, c)} for c in ok},
            "not_verified": [{"config": c["config"], "outcome": c["outcome"],
                              "call": c.get("failed_call"), "status": c.get("status"),
                              "reason": c.get("reason")}
                             for c in rec.get("engine") or [] if c["outcome"] != "OK"]}


ENGINE_WORDS = {"best_8bit_gemm": "cuBLASLt GEMMs", "best_8bit_persistent": "persistent kernel"}


def seed_answers(s: dict) -> list[dict]:
    """The project's own 8-bit paths at the seed's shape, per cell mode: each engine's
    fastest verified 8-bit configuration against cuDNN's best verified 16-bit one (what
    the support matrix's INT8 answer names beside cuDNN's refusal)."""
    out = []
    for row in s.get("shapes") or []:
        sh = row["shape"]
        if not is_sample_shape(row) or sh.get("input") != sh["hidden"]:  # the seed's input: H
            continue
        for key, words in ENGINE_WORDS.items():
            c = row.get(key)
            if c:
                cudnn16 = row["best_16bit_cudnn"]
                out.append({"cell": sh["cell"], "engine": words, "config": c["config"],
                            "ms": median_ms(c), "timed_as": c.get("timed_as"),
                            "max_error": c.get("max_error"),
                            "vs_cudnn16": candidates_ratio(cudnn16, c),
                            "cudnn16": cudnn16 and cudnn16["config"]})
    return out


def summarise(records: list[dict], runs: list[dict]) -> dict:
    rows = [r for r in (shape_row(rec) for rec in records) if r]
    rates = {}
    for run in runs:
        rates.update(((run.get("engine_gemm") or {}).get("rates")) or {})
    return {"shapes": rows, "gemm_rates": rates}


def markdown(s: dict) -> str:
    """The section of bench.md; empty when no shape ran the engine."""
    if not s["shapes"]:
        return ""
    out = ["## 8-bit RNNs from cuBLASLt GEMMs (cuDNN's RNN API refuses INT8 and FP8)", "",
           "The same forward built from cuBLASLt GEMMs (one input GEMM over all steps, one "
           "recurrent GEMM and one fused gate kernel per step, captured in a CUDA graph): INT8 "
           "(int8 x int8 -> int32, weights per output channel, activations per tensor) or FP8 "
           "E4M3 (per-tensor scales, FP32 accumulation) on the input GEMM, the recurrent GEMMs or "
           "both, the other GEMMs in FP16, scales from max |x| of a separate calibration batch. "
           "Each was compared with the float64 reference on the original weights and on the "
           "weights as the GEMMs see them, and stayed within its stated bound, before it was "
           "timed. Times are graph replays: median ms (interquartile range, n = repeats); "
           "ratios are of medians measured in the same process.",
           "", "| shape | best 8-bit | ms | max error | best 16-bit cuDNN | ms | x 16-bit cuDNN "
           "| PyTorch's best (graph if ours is) | x PyTorch | engine FP16 time / cuDNN FP16 time |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in s["shapes"]:
        sh, e, c, tb = r["shape"], r["best_8bit"], r["best_16bit_cudnn"], r["torch_best"]
        out.append(f"| {sh['cell']} {sh['seq_length']}, {sh['layers']}, {sh['hidden']}, "
                   f"{sh['batch']} | {e['label'] if e else 'none verified'} | "
                   f"{timed(e)} | {figure(e and e['max_error'], '.1e')} | "
                   f"{c['config'] if c else 'none verified'} | {timed(c)} | "
                   f"{figure(r['speedup_vs_cudnn16'])} | "
                   f"{(tb['variant'] + ' ' + figure(tb['ms'], '.4f')) if tb else ''} | "
                   f"{figure(r['speedup_vs_torch_best'])} | "
                   f"{figure(r['engine_fp16_over_cudnn_fp16'])} |")
    refused = [(r["id"], n) for r in s["shapes"] for n in r["not_verified"]]
    if refused:
        out += ["", "Not verified or refused:", ""] + [
            f"- `{i}` {n['config']}: {n['outcome']} at {n['call']} ({n['status']}): {n['reason']}"
            for i, n in refused]
    if s["gemm_rates"]:
        out += ["", "cuBLASLt dense GEMM rates in this run (TN, out = a (M x K) @ w.T (K x N); "
                "TFLOPS or TOPS, median and interquartile range):", "",
                "| M x N x K | precision | rate |", "|---|---|---|"]
        for key, v in s["gemm_rates"].items():
            prec, size = key.split(" ", 1)
            rate = (f"{v['tflops']:.1f} ({v['tflops_q1']:.1f}-{v['tflops_q3']:.1f})"
                    if "tflops" in v else v.get("refused", ""))
            out.append(f"| {size} | {prec} | {rate} |")
    return "\n".join(out) + "\n"
