"""The benchmark report: ``bench.json``, ``bench.md`` and its chart (:mod:`.bench_chart`) from
``bench.jsonl`` + ``bench.run.json``
(and ``overhead.json`` when the overhead check has written one beside them).

Pure functions over recorded data: nothing here runs cuDNN, so the report can be rebuilt
and tested anywhere (``python -m cudnn_rnn.bench_report results/<gpu>/<cudnn>``).

Conventions, stated in the report too: FLOP counts are RNN_example's (input and recurrent
GEMMs: matrices × 2 × hidden² × seqLength × batch × layers; DeepBench counts only the
recurrent half, so its TFLOPS are half of these for the same time); times are medians of
CUDA-event timed calls with the interquartile range; every speed-up is a ratio of two
medians measured in the same run (same worker process, same GPU).
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path

from cudnn_rnn.bindings.enums import RNNMode
from cudnn_rnn.engine.config import GATES
from cudnn_rnn.engine.timing import seconds_at, tflops
from cudnn_rnn.matrix import baseline
from cudnn_rnn.matrix.bench import (BENCH_RECORD, GEMM_TARGET, TORCH_TARGET, best,
                                    candidates_ratio, fp16_target, median_ms, plain_ms,
                                    read_run_file, replay_ms, verified, vs_torch_best)
from cudnn_rnn.matrix.errors import UNREPORTABLE, BadInput, MalformedResults
from cudnn_rnn.matrix.overhead_file import read_overhead
from cudnn_rnn.matrix.record import read_records, write_json
from cudnn_rnn.reporting import bench_chart, eightbit, frontier
from cudnn_rnn.reporting.bench_markdown import markdown

SCHEMA = 1
FP32 = baseline.LABEL
TF32_MATH = ("DEFAULT", "TENSOR_OP_ALLOW_CONVERSION")


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
    t_in = seconds_at(2 * m * s["seq_length"] * s["batch"] * k, g_in["tflops"])
    t_step = seconds_at(2 * m * s["batch"] * k, g_step["tflops"])
    model_ms = (t_in + s["seq_length"] * t_step) * 1e3
    return {"input_gemm_tflops": g_in["tflops"], "step_gemm_tflops": g_step["tflops"],
            "model_ms": model_ms, "model_tflops": tflops(rec["flop"], model_ms),
            "recurrent_share": s["seq_length"] * t_step * 1e3 / model_ms,
            "fp16_over_model": (model_ms / median_ms(fp16)) if fp16 else None}


def shape_row(rec: dict, run: dict | None) -> dict:
    """One shape's line of the report: the winner and every ratio, all from this record."""
    win = best(rec)
    fp32 = next((c for c in verified(rec) if c["config"] == FP32), None)
    tf32 = best(rec, is_tf32)
    fp16 = best(rec, is_fp16)
    torch = rec.get("torch") or {}
    dense = gemm_of(run, "float16 8192x8192x8192")
    eager = min(verified(rec), key=lambda c: (plain_ms(c), c["config"]), default=None)
    vs_best = vs_torch_best(torch, replay_ms(win), plain_ms(win))

    def frac(c, rate):
        return c["tflops"] / rate["tflops"] if c and c.get("tflops") and rate else None
    return {
        "id": rec["id"], "group": rec["group"], "shape": rec["shape"], "session": rec.get("session"),
        "winner": win, "fp32": fp32, "tf32": tf32, "fp16": fp16,
        "torch_ms": torch.get("ms"), "torch_skipped": torch.get("skipped"),
        "torch_q": (torch.get("q1_ms"), torch.get("q3_ms")),
        "speedup_fp32": candidates_ratio(fp32, win), "speedup_tf32": candidates_ratio(tf32, win),
        # PyTorch's default is eager: against our fastest plain calls (eager against eager),
        # which need not be the winner's configuration (persistent kernels launch less)
        "plain_winner": eager,
        "speedup_torch": _ratio(torch.get("ms"), plain_ms(eager)),
        "torch_best": vs_best[1],  # the variant compared with: graph with graph, else eager
        "speedup_torch_best": vs_best[0],
        "launch_gap": launch_gap(win, torch),
        "behind_torch_best": behind_torch_best(rec, win, torch, vs_best),
        "gemm_fraction": frac(win, dense), "fp16_gemm_fraction": frac(fp16, dense),
        "dense_fp16_tflops": dense["tflops"] if dense else None,
        "gemm_model": gemm_model(rec, run, fp16),
        "refused": [{"config": c["config"], "outcome": c["outcome"], "status": c["status"],
                     "call": c["failed_call"], "reason": c["reason"]}
                    for c in rec["candidates"] if c["outcome"] != "OK"],
        "duration_s": rec.get("duration_s"),
    }


def launch_gap(win: dict | None, torch: dict) -> dict:
    """Plain ÷ captured: how much of a call's time is the host's launching, for our winner
    (its plain calls over its graph replays) and for PyTorch's float16 and float32 modules
    (eager over graph-captured). Near 1: the GPU decides the time; well above: the host."""
    def ms(v):
        return (v or {}).get("ms")
    variants = torch.get("variants") or {}
    ours = None
    if replay_ms(win) and win.get("plain_timing"):
        ours = _ratio(plain_ms(win), replay_ms(win))
    return {"ours": ours, **{f"torch_{d}": _ratio(ms(variants.get(f"{d} eager")),
                                                  ms(variants.get(f"{d} graph")))
                             for d in ("float32", "float16")}}


def behind_torch_best(rec: dict, win: dict | None, torch: dict, vs_best: tuple) -> dict | None:
    """Where PyTorch's best variant beat our winner (``vs_best``: :func:`vs_torch_best`'s
    answer for this shape): the cuDNN configuration it ran (from cuDNN's API log) and what
    that same configuration took in our run, on the basis of the comparison (replays
    against its graph, plain calls against its eager module), so the report can say
    whether PyTorch chose another configuration or ran the same one faster. None where our
    winner was at least as fast (or nothing was compared)."""
    ratio, best_ = vs_best
    if ratio is None or ratio >= 1:
        return None
    graph = best_["variant"].endswith(" graph")
    dtype = best_["variant"].split()[0]
    config = (torch.get("cudnn") or {}).get(dtype)
    same = next((c for c in verified(rec) if c["config"] == config), None)
    # both sides on one basis: our replays if PyTorch's best was captured, else plain calls
    same_t = same and ((same["timing"] if same.get("timed_as") == "graph" else None)
                       if graph else (same.get("plain_timing") or same["timing"]))
    theirs = ((torch.get("variants") or {}).get(best_["variant"])) or {}
    return {"variant": best_["variant"], "torch_ms": best_["ms"], "torch_config": config,
            "torch_q": (theirs.get("q1_ms"), theirs.get("q3_ms")),
            "ours_ms": replay_ms(win) if graph else plain_ms(win),
            "ours_timed_as": "graph" if graph else "plain",
            "same_config_ms": same_t["median_ms"] if same_t else None,
            "same_config_q": (same_t["q1_ms"], same_t["q3_ms"]) if same_t else (None, None),
            "same_config_in_run": same is not None,
            "same_config_is_winner": bool(same and same["config"] == win["config"])}


def _vs_best(rows: list[dict]) -> dict:
    """Our verified winner against PyTorch's best variant, over the shapes where both ran:
    the target is at least as fast (ratio ≥ 1) at every one."""
    ratios = [r["speedup_torch_best"] for r in rows if r["speedup_torch_best"] is not None]
    return {"target": 1.0, "shapes": len(ratios), "at_least_as_fast": sum(v >= 1 for v in ratios),
            "min": min(ratios) if ratios else None, "max": max(ratios) if ratios else None,
            "met": bool(ratios) and min(ratios) >= 1.0}


def pytorch_versions(records: list[dict]) -> dict:
    """Per session, the PyTorch its records were compared with, as each names it
    (``2.11.0+cu130 (CUDA 13.0, cuDNN 91900)``); a session that ran no PyTorch is absent."""
    found: dict = {}
    for rec in records:
        t = rec.get("torch") or {}
        if t.get("torch"):
            found.setdefault(rec.get("session"), set()).add(
                f"{t['torch']} (CUDA {t.get('torch_cuda')}, cuDNN {t.get('torch_cudnn')})")
    return {session: sorted(v) for session, v in found.items()}


def summarise(records: list[dict], runs: list[dict], overhead: dict | None = None) -> dict:
    by_session = {r["session"]: r for r in runs}
    rows = [shape_row(r, by_session.get(r.get("session"))) for r in records]
    seed = next((r for r in rows if r["group"] == "seed" and r["shape"]["cell"] == "LSTM"), None)
    fp16_rows = [r for r in rows if fp16_target(r["shape"])]
    fracs = [r["fp16_gemm_fraction"] for r in fp16_rows if r["fp16_gemm_fraction"] is not None]
    done = {r["id"] for r in rows}
    return {
        "schema": SCHEMA, "runs": runs, "shapes": rows,
        "pytorch": pytorch_versions(records),
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
            "winner_vs_torch_best": _vs_best(rows),
            "overhead": None if not overhead else {
                "target": overhead.get("target"), "worst": overhead.get("worst_ratio"),
                "median": overhead.get("median_ratio"), "processes": overhead.get("processes", 1),
                "worst_single_process": overhead.get("worst_single_process"),
                "met": overhead.get("worst_ratio") is not None
                and overhead["worst_ratio"] <= overhead["target"]},
        },
        "overhead": overhead,
        "eight_bit": eightbit.summarise(records, runs),
        "frontier": frontier.summarise(records, runs),
    }


# ------------------------------------------------------------------------------ markdown
def read(run_dir: str | Path, empty_ok: bool = True) -> dict:
    """The summary of the benchmark recorded in ``run_dir`` (files checked; never writes);
    :class:`BadInput` for values this version cannot read, and (``empty_ok`` False) for a
    run without records (a benchmark stopped before its first shape reports none)."""
    d = Path(run_dir)
    try:
        records, _ = read_records(d / "bench.jsonl", BENCH_RECORD, "benchmark record",
                                  reading=True)
    except MalformedResults as exc:
        raise BadInput(str(exc)) from None
    if not records and not empty_ok:
        raise BadInput(f"{d / 'bench.jsonl'} holds no records: give a benchmark run folder "
                       "python -m cudnn_rnn.bench wrote into")
    runs, overhead = read_run_file(d / "bench.run.json")["runs"], read_overhead(d / "overhead.json")
    with _reportable(d):
        return summarise(records, runs, overhead)


def rendered(run_dir: str | Path, empty_ok: bool = True) -> dict:
    """The report's files, made in memory before any is written: bench.json and bench.md
    (text), the chart (bytes; None without one)."""
    summary = read(run_dir, empty_ok)
    with _reportable(Path(run_dir)):
        chart = bench_chart.draw(summary)
        sections = [markdown(summary, bench_chart.line(summary, chart))] + [
            s for s in (eightbit.markdown(summary["eight_bit"]),
                        frontier.markdown(summary["frontier"])) if s]
        return {"bench.json": summary, "bench.md": "\n".join(sections),
                bench_chart.CHART: chart.png() if chart else None}


def write(run_dir: str | Path, out_dir: str | Path, empty_ok: bool = True) -> Path:
    """``bench.json``, ``bench.md`` and its chart ``bench.png`` (with matplotlib) in
    ``out_dir`` from what is recorded in ``run_dir``."""
    files = rendered(run_dir, empty_ok)
    out = Path(out_dir)
    try:
        write_json(out / "bench.json", files["bench.json"])
        (out / "bench.md").write_text(files["bench.md"])
        png = out / bench_chart.CHART
        if files[bench_chart.CHART] is not None:
            png.write_bytes(files[bench_chart.CHART])
        else:  # a chart from an earlier rendering would be one bench.md no longer links
            png.unlink(missing_ok=True)
    except OSError as exc:
        (out / "bench.json.tmp").unlink(missing_ok=True)
        raise BadInput(f"cannot write the report into {out} ({exc}); choose another --out") \
            from None
    return out / "bench.md"


@contextmanager
def _reportable(d: Path):
    try:
        yield
    except UNREPORTABLE as exc:
        raise BadInput(f"{d}: a recorded value this version cannot report "
                       f"({type(exc).__name__}: {str(exc)[:120]}); report a run "
                       "python -m cudnn_rnn.bench wrote") from None


if __name__ == "__main__":  # the command moved; say where rather than do nothing
    print("cudnn_rnn.reporting.bench: error: this report's command is now "
          "python -m cudnn_rnn.bench_report DIR (or cudnn-rnn bench-report DIR)", file=sys.stderr)
    sys.exit(2)
