"""The benchmark report: ``bench.json`` and ``bench.md`` from ``bench.jsonl`` + ``bench.run.json``
(and ``overhead.json`` when the overhead check has written one beside them).

Pure functions over recorded data: nothing here runs cuDNN, so the report can be rebuilt
and tested anywhere (``python -m cudnn_rnn.reporting.bench results/<gpu>/<cudnn>``).

Conventions, stated in the report too: FLOP counts are RNN_example's (input and recurrent
GEMMs: matrices × 2 × hidden² × seqLength × batch × layers; DeepBench counts only the
recurrent half, so its TFLOPS are half of these for the same time); times are medians of
CUDA-event timed calls with the interquartile range; every speed-up is a ratio of two
medians measured in the same run (same worker process, same GPU).
"""
from __future__ import annotations

import sys
from pathlib import Path

from bindings.enums import RNNMode

from ..cli import BadInput
from ..config import GATES
from ..jsontypes import (ANY, BOOL, INT, NAME, NUM, POS_INT, POS_NUM, STR, Dict, List, Obj, Opt,
                         Pred, problem)
from ..provenance import folder_name
from ..results import MalformedResults, read_records, write_json
from ..runs import read_json_dict
from .analysis import config_label
from .load import SCALAR

PROVENANCE_KEYS = ("gpu", "compute_capability", "driver_version", "cuda_runtime_cudnn",
                   "cuda_runtime_cupy", "cupy", "cudnn_version", "library_path",
                   "library_source", "commit", "command", "date")

SCHEMA = 1
FP32 = "FLOAT/FLOAT/FMA/STANDARD"
TF32_MATH = ("DEFAULT", "TENSOR_OP_ALLOW_CONVERSION")
GEMM_TARGET = 0.5
TORCH_TARGET = 3.0


def fp16_target(shape: dict) -> bool:
    """The shapes of the FP16 target: LSTM with hidden ≥ 2048 and batch ≥ 128."""
    return shape["cell"] == "LSTM" and shape["hidden"] >= 2048 and shape["batch"] >= 128


def _config_name(v) -> bool:
    return isinstance(v, str) and len(v.split("/")) == 4


FULL_TIMING = Obj({"median_ms": POS_NUM, "q1_ms": NUM, "q3_ms": NUM, "reps": POS_INT,
                   "min_ms": NUM, "max_ms": NUM}, required={"median_ms", "q1_ms", "q3_ms", "reps"})
CANDIDATE = Obj({"config": Pred(_config_name, "DATA/PREC/MATH/ALGO"), "outcome": NAME,
                 "status": Opt(STR), "failed_stage": Opt(STR), "failed_call": Opt(STR),
                 "reason": Opt(STR), "timing": Opt(FULL_TIMING), "tflops": Opt(NUM),
                 "max_error": Opt(NUM), "tolerance": Opt(NUM), "gradient_tolerance": Opt(NUM),
                 "implicit": Opt(BOOL), "duration_s": Opt(NUM), "cell_id": Opt(STR)},
                required={"config", "outcome", "status", "failed_call", "reason", "timing",
                          "tflops", "max_error"})
BENCH_RECORD = Obj({
    "id": STR, "outcome": NAME, "group": STR, "session": Opt(STR), "objective": Opt(STR),
    "shape": Obj({"cell": Pred(lambda v: v in RNNMode.__members__, "an RNN mode such as LSTM"),
                  "seq_length": POS_INT, "layers": POS_INT, "hidden": POS_INT, "batch": POS_INT,
                  "input": POS_INT},
                 required={"cell", "seq_length", "layers", "hidden", "batch"}),
    "flop": POS_INT, "candidates": List(CANDIDATE),
    "torch": Opt(Obj({"ms": Opt(POS_NUM), "q1_ms": Opt(NUM), "q3_ms": Opt(NUM),
                      "skipped": Opt(STR)})),
    "duration_s": Opt(NUM)}, required={"id", "outcome", "group", "shape", "flop", "candidates"})
PROVENANCE = Obj({k: SCALAR for k in PROVENANCE_KEYS}, required=PROVENANCE_KEYS)
RUN = Obj({"session": STR, "provenance": PROVENANCE,
           "gemm": Opt(Obj({"rates": Dict(Obj({"tflops": POS_NUM, "tflops_q1": NUM,
                                               "tflops_q3": NUM, "compute_type": SCALAR},
                                              required={"tflops", "tflops_q1", "tflops_q3"})),
                            "skipped": Opt(STR)})),
           "spec": Opt(STR), "deadline_s": Opt(NUM), "budget_s": Opt(NUM), "reps": Opt(INT),
           "spec_shapes": Opt(List(STR)), "stopped": Opt(STR), "wall_s": Opt(NUM)},
          required={"session", "provenance"})
RUN_FILE = Obj({"kind": STR, "identity": Opt(Dict(ANY)), "runs": List(RUN)}, required={"runs"})


def _measured_row(row: dict, where: str) -> str | None:
    if "ratio" not in row:
        return None
    return MEASURED_ROW(row, where)


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
                      "training_mode": BOOL, "skipped": Opt(STR)},
                     required={"shape", "training_mode"}, rule=_measured_row))},
    required={"target", "rows"})


def read_run_file(path: str | Path) -> dict:
    """``bench.run.json``, checked: ``{"identity": ..., "runs": [...]}`` (no runs when absent)."""
    p = Path(path)
    if not p.exists():
        return {"runs": []}
    data = read_json_dict(p)
    wrong = "not a JSON object" if data is None else problem(data, RUN_FILE, "the file")
    if wrong:
        raise BadInput(f"{p} is not a benchmark's bench.run.json ({wrong})")
    return data


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


def _verified(rec: dict) -> list[dict]:
    return [c for c in rec["candidates"] if c["outcome"] == "OK" and c.get("timing")]


def _ms(c: dict | None) -> float | None:
    return c["timing"]["median_ms"] if c and c.get("timing") else None


def best(rec: dict, where=lambda c: True) -> dict | None:
    """The fastest verified candidate of a shape record (that ``where`` accepts)."""
    ok = [c for c in _verified(rec) if where(c)]
    return min(ok, key=lambda c: (_ms(c), c["config"])) if ok else None


def is_tf32(c: dict) -> bool:
    d, _p, m, _a = c["config"].split("/")
    return d == "FLOAT" and m in TF32_MATH


def is_fp16(c: dict) -> bool:
    return c["config"].startswith("HALF/")


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def gemm_of(run: dict | None, key: str) -> dict | None:
    return ((run or {}).get("gemm") or {}).get("rates", {}).get(key)


def _gates(cell: str) -> int:
    return GATES[RNNMode[cell]]


def gemm_keys(shape: dict) -> tuple[str, str]:
    """Keys of the FP16 input GEMM (all steps at once) and of one recurrent step's GEMM."""
    m, k = _gates(shape["cell"]) * shape["hidden"], shape["hidden"]
    return (f"float16 {m}x{shape['seq_length'] * shape['batch']}x{k}",
            f"float16 {m}x{shape['batch']}x{k}")


def gemm_model(rec: dict, run: dict | None, fp16: dict | None) -> dict | None:
    """What cuBLAS alone would take for the forward's GEMMs, measured in the same run:
    one input GEMM over all steps plus seqLength recurrent-step GEMMs, in sequence. Their
    FLOPs are exactly RNN_example's count; cuDNN adds the gates' element-wise work."""
    s = rec["shape"]
    if s["layers"] != 1:
        return None
    in_key, step_key = gemm_keys(s)
    g_in, g_step = gemm_of(run, in_key), gemm_of(run, step_key)
    if not g_in or not g_step:
        return None
    m, k = _gates(s["cell"]) * s["hidden"], s["hidden"]
    t_in = 2 * m * s["seq_length"] * s["batch"] * k / (g_in["tflops"] * 1e12)
    t_step = 2 * m * s["batch"] * k / (g_step["tflops"] * 1e12)
    model_ms = (t_in + s["seq_length"] * t_step) * 1e3
    return {"input_gemm_tflops": g_in["tflops"], "step_gemm_tflops": g_step["tflops"],
            "model_ms": model_ms, "model_tflops": rec["flop"] / (model_ms * 1e-3) / 1e12,
            "recurrent_share": s["seq_length"] * t_step * 1e3 / model_ms,
            "fp16_over_model": (model_ms / _ms(fp16)) if fp16 else None}


def shape_row(rec: dict, run: dict | None) -> dict:
    """One shape's line of the report: the winner and every ratio, all from this record."""
    win = best(rec)
    fp32 = next((c for c in _verified(rec) if c["config"] == FP32), None)
    tf32 = best(rec, is_tf32)
    fp16 = best(rec, is_fp16)
    torch = rec.get("torch") or {}
    dense = gemm_of(run, "float16 8192x8192x8192")

    def frac(c, rate):
        return c["tflops"] / rate["tflops"] if c and c.get("tflops") and rate else None
    return {
        "id": rec["id"], "group": rec["group"], "shape": rec["shape"], "session": rec.get("session"),
        "winner": win, "fp32": fp32, "tf32": tf32, "fp16": fp16,
        "torch_ms": torch.get("ms"), "torch_skipped": torch.get("skipped"),
        "torch_q": (torch.get("q1_ms"), torch.get("q3_ms")),
        "speedup_fp32": _ratio(_ms(fp32), _ms(win)), "speedup_tf32": _ratio(_ms(tf32), _ms(win)),
        "speedup_torch": _ratio(torch.get("ms"), _ms(win)),
        "gemm_fraction": frac(win, dense), "fp16_gemm_fraction": frac(fp16, dense),
        "dense_fp16_tflops": dense["tflops"] if dense else None,
        "gemm_model": gemm_model(rec, run, fp16),
        "refused": [{"config": c["config"], "outcome": c["outcome"], "status": c["status"],
                     "call": c["failed_call"], "reason": c["reason"]}
                    for c in rec["candidates"] if c["outcome"] != "OK"],
        "duration_s": rec.get("duration_s"),
    }


def summarise(records: list[dict], runs: list[dict], overhead: dict | None = None) -> dict:
    by_session = {r["session"]: r for r in runs}
    rows = [shape_row(r, by_session.get(r.get("session"))) for r in records]
    seed = next((r for r in rows if r["group"] == "seed" and r["shape"]["cell"] == "LSTM"), None)
    fp16_rows = [r for r in rows if fp16_target(r["shape"])]
    fracs = [r["fp16_gemm_fraction"] for r in fp16_rows if r["fp16_gemm_fraction"] is not None]
    done = {r["id"] for r in rows}
    return {
        "schema": SCHEMA, "runs": runs, "shapes": rows,
        "not_run": [s for s in (runs[-1].get("spec_shapes") or [] if runs else []) if s not in done],
        "targets": {
            "seed_vs_torch": {"target": TORCH_TARGET,
                              "measured": seed["speedup_torch"] if seed else None,
                              "met": bool(seed and seed["speedup_torch"]
                                          and seed["speedup_torch"] >= TORCH_TARGET)},
            "fp16_gemm_fraction": {"target": GEMM_TARGET, "shapes": len(fp16_rows),
                                   "min": min(fracs) if fracs else None,
                                   "max": max(fracs) if fracs else None,
                                   "met": bool(fracs) and min(fracs) >= GEMM_TARGET},
            "overhead": None if not overhead else {
                "target": overhead.get("target"), "worst": overhead.get("worst_ratio"),
                "median": overhead.get("median_ratio"), "processes": overhead.get("processes", 1),
                "worst_single_process": overhead.get("worst_single_process"),
                "met": overhead.get("worst_ratio") is not None
                and overhead["worst_ratio"] <= overhead["target"]},
        },
        "overhead": overhead,
    }


# ------------------------------------------------------------------------------ markdown
def _f(v, fmt=".2f", none=""):
    return none if v is None else format(v, fmt)


def _pct(v):
    return "" if v is None else f"{100 * v:.0f}%"


def _timing(c):
    if not c or not c.get("timing"):
        return ""
    t = c["timing"]
    return f"{t['median_ms']:.4f} ({t['q1_ms']:.4f}-{t['q3_ms']:.4f}, n={t['reps']})"


def _paren(text: str) -> str:
    return f" ({text})" if text else ""


def _span(values, fmt) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "not measured"
    lo, hi = min(values), max(values)
    return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)}–{fmt(hi)}"


def _why_below(fp16_rows: list[dict]) -> str:
    """The measured reason the FP16 target is missed, from this run's numbers only."""
    short = [r for r in fp16_rows if r["fp16_gemm_fraction"] is not None
             and r["fp16_gemm_fraction"] < GEMM_TARGET]
    if not short:
        return "No FP16 configuration verified at these shapes, so there is no rate to compare."
    names = ", ".join(f"{r['shape']['hidden']}/{r['shape']['batch']}/{r['shape']['seq_length']}"
                      for r in short)
    models = [r["gemm_model"] for r in short if r["gemm_model"]]
    if not models:
        return (f"Below {_pct(GEMM_TARGET)} at {names} (hidden/batch/seq); the GEMMs it is made of "
                "were not measured in that run, so this report cannot say more.")
    step = _span([m["step_gemm_tflops"] / r["dense_fp16_tflops"] for r, m in
                  zip(short, models) if r["dense_fp16_tflops"]], _pct)
    share = _span([m["recurrent_share"] for m in models], _pct)
    over = [m["fp16_over_model"] for m in models if m["fp16_over_model"]]
    verdict = (f"cuDNN runs {_span(over, lambda v: f'{v:.2f}')}× the speed of issuing the same "
               "GEMMs through cuBLAS, so it already spends these FLOPs "
               + ("better than" if min(over) >= 1.0 else "about as well as")
               + " the GEMM library would: the shortfall belongs to the shape"
               if over and min(over) >= 0.9 else
               f"cuDNN reaches only {_span(over, lambda v: f'{v:.2f}')}× the GEMM-only model, so "
               "part of the shortfall is cuDNN's own (element-wise work, synchronisation between "
               "steps)")
    return (f"Why {names} (hidden/batch/seq) stay below {_pct(GEMM_TARGET)}: the recurrence is a "
            f"chain of skinny GEMMs whose N is the batch. Timed alone, one step's GEMM reaches "
            f"{step} of the dense rate, and the steps are {share} of the GEMM-only model's time. "
            f"{verdict}. A larger batch (more columns per step) is what moves it: compare the "
            "batch-256 rows.")


def _tol(c: dict) -> str:
    out, grad = c.get("tolerance"), c.get("gradient_tolerance")
    if grad is None or grad == out:
        return _f(out, ".0e")
    return f"{_f(out, '.0e')} outputs, {_f(grad, '.0e')} gradients"


def _provenance_lines(runs: list[dict]) -> list[str]:
    out = []
    for r in runs:
        p = r["provenance"]
        out.append(f"- run `{r['session']}`: {p['gpu']} (compute capability {p['compute_capability']}), "
                   f"driver {p['driver_version']}, CUDA runtime {p['cuda_runtime_cudnn']} (cuDNN's) / "
                   f"{p['cuda_runtime_cupy']} (CuPy {p['cupy']}), cuDNN {p['cudnn_version']} from "
                   f"`{p['library_path']}` ({p['library_source']}), commit `{p['commit']}`, "
                   f"`{p['command']}`, {p['date']}, wall {r.get('wall_s', '?')} s"
                   + (f"; stopped: {r['stopped']}" if r.get("stopped") else ""))
    return out


def _gemm_table(runs: list[dict]) -> list[str]:
    lines = ["| run | GEMM (m×n×k) | TFLOPS, median (IQR) | compute type |", "|---|---|---|---|"]
    for r in runs:
        for key, g in ((r.get("gemm") or {}).get("rates") or {}).items():
            lines.append(f"| `{r['session']}` | {key} | {g['tflops']:.1f} ({g['tflops_q1']:.1f}-"
                         f"{g['tflops_q3']:.1f}) | {g.get('compute_type')} |")
    if r_skipped := [r for r in runs if (r.get("gemm") or {}).get("skipped")]:
        lines += [f"- GEMM not measured in `{r['session']}`: {r['gemm']['skipped']}" for r in r_skipped]
    return lines


def _group_table(rows: list[dict]) -> list[str]:
    lines = ["| shape (T, L, H, B) | best verified config | ms, median (IQR, n) | TFLOPS | % dense FP16 GEMM "
             "| ×FP32 | ×TF32 (its config) | ×PyTorch default (its ms) | max error |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        s, w = r["shape"], r["winner"]
        name = f"{s['cell']} {s['seq_length']}, {s['layers']}, {s['hidden']}, {s['batch']}"
        if not w:
            lines.append(f"| {name} | nothing verified | | | | | | | |")
            continue
        tf = f"{_f(r['speedup_tf32'])} ({r['tf32']['config']})" if r["tf32"] else "no TF32 verified"
        th = (f"{_f(r['speedup_torch'])} ({r['torch_ms']:.4f})" if r["torch_ms"]
              else f"({r['torch_skipped']})")
        lines.append(f"| {name} | {w['config']} | {_timing(w)} | {_f(w['tflops'], '.1f')} | "
                     f"{_pct(r['gemm_fraction'])} | {_f(r['speedup_fp32'])} | {tf} | {th} | "
                     f"{_f(w['max_error'], '.1e')} (tol {_tol(w)}) |")
    lines += ["", "×TF32 uses the issue's definition: the faster verified FLOAT-data configuration with "
              "DEFAULT math (TF32 permitted) or TENSOR_OP_ALLOW_CONVERSION (FP16 conversion "
              "permitted); its column names which. ×PyTorch: `torch.nn` module, float32, `eval()`, "
              "`no_grad`, no state passed, timed in the same worker process."]
    return lines


def _refusals(rows: list[dict]) -> list[str]:
    from collections import Counter
    count = Counter((f["config"], f["outcome"], f["call"] or "", (f["reason"] or "")[:120])
                    for r in rows for f in r["refused"])
    if not count:
        return ["Every candidate of every shape verified."]
    lines = ["| candidate | outcome | failing call | shapes | cuDNN's reason (first 120 characters) |",
             "|---|---|---|---|---|"]
    for (cfg, outcome, call, reason), n in sorted(count.items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"| {cfg} | {outcome} | {call} | {n} | {reason} |")
    return lines


def _overhead_lines(oh: dict) -> list[str]:
    n = oh.get("processes", 1)
    over = (f"the median over {n} fresh processes of each process's median over "
            f"{oh.get('rounds', 'its')} alternating rounds; range: between processes"
            if n > 1 else "median over alternating rounds in one process; range: between rounds")
    lines = ["Same cuDNN configuration as PyTorch, read from cuDNN's API log of PyTorch's own "
             "call, run through this project's ctypes flow and through `torch.nn`, alternating, "
             "one stream, one timing method; ratio = ours / PyTorch's (target ≤ "
             f"{oh['target']}), {over}.", "",
             f"| shape | fwd mode | config PyTorch used | ours ms | PyTorch ms | ratio (range over "
             f"{'processes' if n > 1 else 'rounds'}) "
             "| host µs per call, ours / PyTorch | idle-GPU latency ratio | host-ahead ratio |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in oh["rows"]:
        s = r["shape"]
        name = f"{s['cell']} {s['seq']}, {s['layers']}, {s['hidden']}, {s['batch']} {s['dtype']}"
        if "ratio" not in r:
            lines.append(f"| {name} | {'train' if r['training_mode'] else 'eval'} | | | | "
                         f"not measured: {r.get('skipped')} | | | |")
            continue
        c = r["config"]
        lines.append(f"| {name} | {r['fwd_mode']} | {config_label(c)}, {c['layout']} | "
                     f"{r['ours']['median_ms']:.4f} | "
                     f"{r['torch']['median_ms']:.4f} | {r['ratio']:.3f} ({r['ratio_min']:.3f}-"
                     f"{r['ratio_max']:.3f}) | {r['host_enqueue']['ours_us']:.0f} / "
                     f"{r['host_enqueue']['torch_us']:.0f} | {r['isolated_ratio']:.3f} | "
                     f"{_host_ahead(r)} |")
    bound = [r for r in oh["rows"] if "ratio" in r
             and r["host_enqueue"]["ours_us"] >= 0.8 * r["ours"]["median_ms"] * 1e3]
    if bound:
        lines += ["", "Launch-bound: where the host time to enqueue one call is ≥ 80% of its device "
                  "time (" + ", ".join(f"{r['shape']['cell']} {r['shape']['hidden']}/{r['shape']['batch']} "
                                       f"{r['fwd_mode'].lower()}" for r in bound)
                  + "), cuDNN's own launches, on either side, set the pace, so such times move with the "
                  "host CPU from one process to the next."]
    queued = [r for r in oh["rows"] if r.get("queued_ratio") is not None]
    if queued:
        lines += ["", "Host-ahead ratio: the same calls, 8 at a time, queued behind an 8192³ FP32 GEMM "
                  "so the GPU runs them back to back without waiting for the host: the GPU work "
                  "alone. Host-ahead ratios span " + _span([r["queued_ratio"] for r in queued],
                                                           lambda v: f"{v:.3f}")
                  + "; where the back-to-back ratio differs from it, the difference is in how "
                  "fast each side's host thread feeds cuDNN's launches (the launch-bound regime), "
                  "not in what runs on the GPU."]
    compared = [r for r in oh["rows"] if "arguments_differ" in r]
    if compared:
        differ = [r for r in compared if r["arguments_differ"]]
        lines += ["", "Arguments besides the descriptors (devSeqLengths; work-, weight- and "
                  "reserve-space sizes): " + ("the same as PyTorch's on every measured row."
                  if not differ else "differ from PyTorch's on " + ", ".join(
                      f"{r['shape']['cell']} {r['shape']['hidden']}/{r['shape']['batch']} "
                      f"{r['fwd_mode'].lower()} ({', '.join(r['arguments_differ'])})"
                      for r in differ) + ".")]
    p = oh.get("provenance") or {}
    lines += ["", f"Measured on {p.get('gpu')}, cuDNN {p.get('cudnn_version')} (`{p.get('library_path')}`),"
              f" commit `{p.get('commit')}`, `{p.get('command')}`, {p.get('date')}."]
    return lines


def _host_ahead(r: dict) -> str:
    """The host-ahead ratio, marked when the host did not stay ahead (then it is not GPU-only)."""
    v = r.get("queued_ratio")
    if v is None:
        return ""
    return f"{v:.3f}" + ("" if r["queued"]["host_ahead"] else " (host fell behind)")


def markdown(summary: dict) -> str:
    rows, runs, t = summary["shapes"], summary["runs"], summary["targets"]
    p = runs[0]["provenance"] if runs else {}
    out = [f"# Benchmark: {p.get('gpu')}, cuDNN {p.get('cudnn_version')}", "",
           "The fastest configuration of each shape whose forward outputs, training outputs and "
           "gradients all matched the float64 reference, timed on forward inference "
           "(`cudnnRNNForward`, `CUDNN_FWD_MODE_INFERENCE`). FLOPs by RNN_example's count "
           "(input + recurrent GEMMs; DeepBench counts the recurrent half only). Times: medians of "
           "CUDA-event timed calls, interquartile range, n = repeats. Ratios are of medians measured "
           "in the same run.", "", "## Provenance", ""] + _provenance_lines(runs)
    out += ["", "## Targets", ""]
    st = t["seed_vs_torch"]
    out.append(f"- Seed shape LSTM 20, 2, 512, 64: best verified configuration "
               f"**{_f(st['measured'])}×** PyTorch's default (`eval()`, `no_grad`, float32) — "
               f"target ≥ {st['target']}×: **{'met' if st['met'] else 'not met'}**.")
    ft = t["fp16_gemm_fraction"]
    out.append(f"- FP16 LSTM forward at hidden ≥ 2048, batch ≥ 128 ({ft['shapes']} shapes): "
               f"{_pct(ft['min'])}–{_pct(ft['max'])} of the dense FP16 GEMM rate — target ≥ "
               f"{_pct(ft['target'])}: **{'met' if ft['met'] else 'not met'}**" + (
                   "" if ft["met"] else "; why: see below") + ".")
    if t.get("overhead"):
        o = t["overhead"]
        out.append(f"- Overhead of the ctypes path: worst ratio ours / PyTorch **{_f(o['worst'], '.3f')}**, "
                   f"median {_f(o['median'], '.3f')}" + (
                       f" (each the median over {o['processes']} processes; the worst single "
                       f"process gave {_f(o['worst_single_process'], '.3f')})"
                       if o.get("processes", 1) > 1 else "") +
                   f" — target ≤ {o['target']}: **{'met' if o['met'] else 'not met'}**.")
    fp16_rows = [r for r in rows if fp16_target(r["shape"])]
    if fp16_rows:
        out += ["", "### FP16 at the large LSTM shapes, against the GEMMs it is made of", "",
                "An LSTM forward is one input GEMM over all time steps (4H × T·B × H) plus T "
                "recurrent GEMMs (4H × B × H), each needing the previous step's result. Both were "
                "timed alone with cuBLAS in this run; the *GEMM-only model* is the time of the input "
                "GEMM plus T step GEMMs, in sequence, with the same FLOPs.", "",
                "| shape | best FP16 config | FP16 TFLOPS | % dense FP16 GEMM | input GEMM TFLOPS "
                "| step GEMM TFLOPS (% dense) | GEMM-only model TFLOPS (recurrent share of its time) "
                "| cuDNN's speed ÷ model |", "|---|---|---|---|---|---|---|---|"]
        for r in fp16_rows:
            s, c, g = r["shape"], r["fp16"], r["gemm_model"] or {}
            dense = r["dense_fp16_tflops"]
            out.append(f"| LSTM {s['seq_length']}, {s['layers']}, {s['hidden']}, {s['batch']} | "
                       f"{c['config'] if c else 'none verified'} | {_f(c and c['tflops'], '.1f')} | "
                       f"{_pct(r['fp16_gemm_fraction'])} | {_f(g.get('input_gemm_tflops'), '.1f')} | "
                       f"{_f(g.get('step_gemm_tflops'), '.1f')}"
                       f"{_paren(_pct(g['step_gemm_tflops'] / dense if g and dense else None))} | "
                       f"{_f(g.get('model_tflops'), '.1f')}{_paren(_pct(g.get('recurrent_share')))} | "
                       f"{_f(g.get('fp16_over_model'))} |")
        if not ft["met"]:
            out += ["", _why_below(fp16_rows)]
    for group in dict.fromkeys(r["group"] for r in rows):
        out += ["", f"## {group}", ""] + _group_table(
            sorted((r for r in rows if r["group"] == group),
                   key=lambda r: (r["shape"]["cell"], r["shape"]["hidden"], r["shape"]["batch"],
                                  r["shape"]["seq_length"])))
    out += ["", "## Ceilings measured in each run", ""] + _gemm_table(runs)
    if summary.get("overhead"):
        out += ["", "## Overhead check: this project's ctypes path against torch.nn", ""] + \
            _overhead_lines(summary["overhead"])
    out += ["", "## Candidates that did not verify or were refused", ""] + _refusals(rows)
    if summary["not_run"]:
        out += ["", f"## Not run ({len(summary['not_run'])})", "",
                ", ".join(f"`{s}`" for s in summary["not_run"])]
    return "\n".join(out) + "\n"


def read(run_dir: str | Path) -> dict:
    """The summary of the benchmark recorded in ``run_dir`` (files checked; never writes)."""
    d = Path(run_dir)
    try:
        records, _ = read_records(d / "bench.jsonl", BENCH_RECORD, "benchmark record")
    except MalformedResults as exc:
        raise BadInput(str(exc)) from None
    return summarise(records, read_run_file(d / "bench.run.json")["runs"],
                     read_overhead(d / "overhead.json"))


def write(run_dir: str | Path, out_dir: str | Path) -> Path:
    """``bench.json`` and ``bench.md`` in ``out_dir`` from what is recorded in ``run_dir``."""
    summary = read(run_dir)
    out = Path(out_dir)
    write_json(out / "bench.json", summary)
    (out / "bench.md").write_text(markdown(summary))
    return out / "bench.md"


def main(argv=None) -> int:
    from ..cli import OneLineParser, run_main
    from ..runs import output_dir, report_dir

    def run(argv):
        p = OneLineParser(prog="cudnn_rnn.reporting.bench",
                          description="bench.md and bench.json from a benchmark's run folder")
        p.add_argument("directory", help="a folder holding bench.jsonl and bench.run.json")
        p.add_argument("--out", default=None,
                       help="output folder (default reports/<gpu>-<cudnn>-bench/)")
        args = p.parse_args(argv)
        d = Path(args.directory)
        if not d.is_dir():
            raise BadInput(f"{args.directory} is not a folder (give a benchmark's run folder)")
        if not (d / "bench.jsonl").is_file():
            raise BadInput(f"{args.directory}: no bench.jsonl here; run make bench first")
        if args.out is None:
            runs = read_run_file(d / "bench.run.json")["runs"]
            p0 = runs[0]["provenance"] if runs else {}
            out = output_dir(report_dir(folder_name(p0.get("gpu"), p0.get("cudnn_version"))
                                        + "-bench"))
        else:
            out = output_dir(args.out)
        print(write(d, out))
        return 0
    return run_main(run, argv, prog="cudnn_rnn.reporting.bench")


if __name__ == "__main__":
    sys.exit(main())
