"""The benchmark report's text: ``bench.md`` from the summary :mod:`.bench` computes.

Only formatting: every figure comes from :func:`cudnn_rnn.reporting.bench.summarise`. The
report is a list of sections (:func:`markdown`), each a function of the summary that
returns its lines (two have modules of their own: :mod:`.bench_pytorch`,
:mod:`.bench_overhead`); a shape table is a list of columns (:data:`SHAPE_COLUMNS`), each a
header and a function of one shape's row that returns its cell.
"""
from __future__ import annotations

from collections import Counter

from cudnn_rnn.matrix.bench import GEMM_TARGET, fp16_target
from cudnn_rnn.reporting import bench_overhead, bench_pytorch
from cudnn_rnn.reporting.bench_pieces import (header, met, paren, pct, row, shape_name, span,
                                              timed, two_decimals)
from cudnn_rnn.reporting.markdown import figure


# ---------------------------------------------------------------------------- small pieces
def _hidden_batch_seq(s: dict) -> str:
    return f"{s['hidden']}/{s['batch']}/{s['seq_length']}"


def _tol(c: dict) -> str:
    out, grad = c.get("tolerance"), c.get("gradient_tolerance")
    if grad is None or grad == out:
        return figure(out, ".0e")
    return f"{figure(out, '.0e')} outputs, {figure(grad, '.0e')} gradients"


# ---------------------------------------------------------------------------- the opening
INTRO = ("The fastest configuration of each shape whose forward outputs, training outputs and "
         "gradients all matched the float64 reference, timed on forward inference "
         "(`cudnnRNNForward`, `CUDNN_FWD_MODE_INFERENCE`). FLOPs by RNN_example's count "
         "(input + recurrent GEMMs; DeepBench counts the recurrent half only). Times: medians "
         "of CUDA-event timed calls, interquartile range, n = repeats. Ratios are of medians "
         "measured in the same run.")


def _title(summary: dict) -> list[str]:
    runs = summary["runs"]
    p = runs[0]["provenance"] if runs else {}
    return [f"# Benchmark: {p.get('gpu')}, cuDNN {p.get('cudnn_version')}", "", INTRO]


def _provenance_line(r: dict, pytorch: dict) -> str:
    p = r["provenance"]
    stopped = f"; stopped: {r['stopped']}" if r.get("stopped") else ""
    torch = "; ".join(pytorch.get(r["session"]) or [])
    return (f"- run `{r['session']}`: {p['gpu']} (compute capability "
            f"{p['compute_capability']}), driver {p['driver_version']}, CUDA runtime "
            f"{p['cuda_runtime_cudnn']} (cuDNN's) / {p['cuda_runtime_cupy']} (CuPy "
            f"{p['cupy']}), cuDNN {p['cudnn_version']} from `{p['library_path']}` "
            f"({p['library_source']}), "
            f"{f'PyTorch {torch}, ' if torch else ''}commit `{p['commit']}`, `{p['command']}`, "
            f"{p['date']}, wall {r.get('wall_s', '?')} s{stopped}")


def _provenance(summary: dict) -> list[str]:
    pytorch = summary.get("pytorch") or {}
    return ["## Provenance", ""] + [_provenance_line(r, pytorch) for r in summary["runs"]]


# ---------------------------------------------------------------------------- targets
def _seed_target(t: dict) -> str:
    st = t["seed_vs_torch"]
    return (f"- Seed shape LSTM 20, 2, 512, 64: our fastest verified plain calls "
            f"**{figure(st['measured'])}×** PyTorch's default (`eval()`, `no_grad`, float32, "
            f"eager) — target ≥ {st['target']}×: **{met(st['met'])}**.")


def _fp16_target(t: dict) -> str:
    ft = t["fp16_gemm_fraction"]
    why = "" if ft["met"] else "; why: see below"
    return (f"- FP16 LSTM forward at hidden ≥ 2048, batch ≥ 128 ({ft['shapes']} shapes): "
            f"{pct(ft['min'])}–{pct(ft['max'])} of the dense FP16 GEMM rate — target ≥ "
            f"{pct(ft['target'])}: **{met(ft['met'])}**{why}.")


def _torch_best_target(t: dict) -> list[str]:
    vb = t.get("winner_vs_torch_best") or {}
    if not vb.get("shapes"):
        return []
    where = "" if vb["met"] else "; where not, see *Where PyTorch's best is faster*"
    return [f"- Our verified winner against PyTorch's best (fastest of its float32, float16 "
            f"and bfloat16 modules, eager or CUDA-graph-captured): at least as fast at "
            f"{vb['at_least_as_fast']} of {vb['shapes']} shapes, ratios "
            f"{figure(vb['min'])}–{figure(vb['max'])}× — target ≥ 1× everywhere: "
            f"**{met(vb['met'])}**{where}."]


def _overhead_target(t: dict) -> list[str]:
    if not t.get("overhead"):
        return []
    o = t["overhead"]
    processes = ""
    if o.get("processes", 1) > 1:
        processes = (f" (each the median over {o['processes']} processes; the worst single "
                     f"process gave {figure(o['worst_single_process'], '.3f')})")
    return [f"- Overhead of the ctypes path: worst ratio ours / PyTorch "
            f"**{figure(o['worst'], '.3f')}**, median {figure(o['median'], '.3f')}"
            f"{processes} — target ≤ {o['target']}: **{met(o['met'])}**."]


def _targets(summary: dict) -> list[str]:
    t = summary["targets"]
    return (["## Targets", "", _seed_target(t), _fp16_target(t)] + _torch_best_target(t)
            + _overhead_target(t))


# ------------------------------------------------------------------------ FP16 and its GEMMs
FP16_INTRO = ("An LSTM forward is one input GEMM over all time steps (4H × T·B × H) plus T "
              "recurrent GEMMs (4H × B × H), each needing the previous step's result. Both "
              "were timed alone with cuBLAS in this run; the *GEMM-only model* is the time of "
              "the input GEMM plus T step GEMMs, in sequence, with the same FLOPs.")
FP16_COLUMNS = ["shape", "best FP16 config", "FP16 TFLOPS", "% dense FP16 GEMM",
                "input GEMM TFLOPS", "step GEMM TFLOPS (% dense)",
                "GEMM-only model TFLOPS (recurrent share of its time)",
                "cuDNN's speed ÷ model"]


def _step_share(r: dict) -> str:
    """The step GEMM's rate as a share of the dense rate, in parentheses."""
    g, dense = r["gemm_model"], r["dense_fp16_tflops"]
    return paren(pct(g["step_gemm_tflops"] / dense if g and dense else None))


def _fp16_row(r: dict) -> str:
    s, c, g = r["shape"], r["fp16"], r["gemm_model"] or {}
    return row([f"LSTM {s['seq_length']}, {s['layers']}, {s['hidden']}, {s['batch']}",
                c["config"] if c else "none verified", figure(c and c["tflops"], ".1f"),
                pct(r["fp16_gemm_fraction"]), figure(g.get("input_gemm_tflops"), ".1f"),
                figure(g.get("step_gemm_tflops"), ".1f") + _step_share(r),
                figure(g.get("model_tflops"), ".1f") + paren(pct(g.get("recurrent_share"))),
                figure(g.get("fp16_over_model"))])


def _cudnn_against_gemms(over: list[float]) -> str:
    """What cuDNN's speed over the GEMM-only model (``over``, one ratio per shape) says."""
    measured = span(over, two_decimals)
    if not over or min(over) < 0.9:
        return (f"cuDNN reaches only {measured}× the GEMM-only model, so part of the "
                "shortfall is cuDNN's own (element-wise work, synchronisation between steps)")
    how = "better than" if min(over) >= 1.0 else "about as well as"
    return (f"cuDNN runs {measured}× the speed of issuing the same GEMMs through cuBLAS, so "
            f"it already spends these FLOPs {how} the GEMM library would: the shortfall "
            "belongs to the shape")


def _below_target(r: dict) -> bool:
    fraction = r["fp16_gemm_fraction"]
    return fraction is not None and fraction < GEMM_TARGET


def _why_below(fp16_rows: list[dict]) -> str:
    """The measured reason the FP16 target is missed, from this run's numbers only."""
    short = [r for r in fp16_rows if _below_target(r)]
    if not short:
        return ("No FP16 configuration verified at these shapes, so there is no rate to "
                "compare.")
    names = ", ".join(_hidden_batch_seq(r["shape"]) for r in short)
    modelled = [r for r in short if r["gemm_model"]]
    if not modelled:
        return (f"Below {pct(GEMM_TARGET)} at {names} (hidden/batch/seq); the GEMMs it is "
                "made of were not measured in that run, so this report cannot say more.")
    models = [r["gemm_model"] for r in modelled]
    step = span([r["gemm_model"]["step_gemm_tflops"] / r["dense_fp16_tflops"]
                 for r in modelled if r["dense_fp16_tflops"]], pct)
    share = span([m["recurrent_share"] for m in models], pct)
    over = [m["fp16_over_model"] for m in models if m["fp16_over_model"]]
    return (f"Why {names} (hidden/batch/seq) stay below {pct(GEMM_TARGET)}: the recurrence "
            f"is a chain of skinny GEMMs whose N is the batch. Timed alone, one step's GEMM "
            f"reaches {step} of the dense rate, and the steps are {share} of the GEMM-only "
            f"model's time. {_cudnn_against_gemms(over)}. A larger batch (more columns per "
            "step) is what moves it: compare the batch-256 rows.")


def _fp16_section(summary: dict) -> list[str]:
    fp16_rows = [r for r in summary["shapes"] if fp16_target(r["shape"])]
    if not fp16_rows:
        return []
    out = ["### FP16 at the large LSTM shapes, against the GEMMs it is made of", "",
           FP16_INTRO, ""] + header(FP16_COLUMNS) + [_fp16_row(r) for r in fp16_rows]
    if not summary["targets"]["fp16_gemm_fraction"]["met"]:
        out += ["", _why_below(fp16_rows)]
    return out


# ---------------------------------------------------------------------------- a group's shapes
def _winner_time(r: dict) -> str:
    w = r["winner"]
    return timed(w) + (" graph" if w.get("timed_as") == "graph" else "")


def _vs_tf32(r: dict) -> str:
    if not r["tf32"]:
        return "no TF32 verified"
    return f"{figure(r['speedup_tf32'])} ({r['tf32']['config']})"


def _vs_torch_default(r: dict) -> str:
    """The speed-up over PyTorch's default and its time, naming our fastest plain calls
    where they are another configuration than the winner; else why PyTorch was not timed."""
    if not r["torch_ms"]:
        return f"({r['torch_skipped']})"
    plain = r.get("plain_winner")
    other = plain and plain["config"] != r["winner"]["config"]
    ours = f"; ours plain: {plain['config']}" if other else ""
    return f"{figure(r['speedup_torch'])} ({r['torch_ms']:.4f}{ours})"


def _vs_torch_best(r: dict) -> str:
    best = r.get("torch_best")
    return f"{figure(r['speedup_torch_best'])} ({best['variant']})" if best else ""


def _launch_gap(r: dict) -> str:
    gap = r.get("launch_gap") or {}
    return f"{figure(gap.get('ours'))}, {figure(gap.get('torch_float16'))}" if gap else ""


def _max_error(r: dict) -> str:
    w = r["winner"]
    return f"{figure(w['max_error'], '.1e')} (tol {_tol(w)})"


SHAPE_COLUMNS = (
    ("shape (T, L, H, B)", lambda r: shape_name(r["shape"])),
    ("best verified config", lambda r: r["winner"]["config"]),
    ("ms, median (IQR, n)", _winner_time),
    ("TFLOPS", lambda r: figure(r["winner"]["tflops"], ".1f")),
    ("% dense FP16 GEMM", lambda r: pct(r["gemm_fraction"])),
    ("×FP32", lambda r: figure(r["speedup_fp32"])),
    ("×TF32 (its config)", _vs_tf32),
    ("×PyTorch default (its ms)", _vs_torch_default),
    ("×PyTorch best (its variant)", _vs_torch_best),
    ("launch gap: ours, torch fp16", _launch_gap),
    ("max error", _max_error),
)
SHAPES_NOTE = (
    "×TF32 uses the issue's definition: the faster verified FLOAT-data configuration with "
    "DEFAULT math (TF32 permitted) or TENSOR_OP_ALLOW_CONVERSION (FP16 conversion permitted); "
    "its column names which. ×PyTorch: `torch.nn` module, float32, `eval()`, `no_grad`, no "
    "state passed, timed in the same worker process, against our fastest plain calls (eager "
    "against eager; where that is another configuration than the winner, the column names "
    "it). ×PyTorch best: its fastest of float32, float16 and bfloat16 modules, eager and "
    "CUDA-graph-captured. Times marked graph are replays of the call's CUDA graph (bit for "
    "bit the plain call's output). Launch gap: plain ÷ captured time, ours and PyTorch "
    "float16's (eager ÷ graph).")


def _shape_row(r: dict) -> str:
    if not r["winner"]:
        nothing = [shape_name(r["shape"]), "nothing verified"]
        return row(nothing) + " |" * (len(SHAPE_COLUMNS) - len(nothing))
    return row([cell(r) for _heading, cell in SHAPE_COLUMNS])


def _group_table(rows: list[dict]) -> list[str]:
    headings = [heading for heading, _cell in SHAPE_COLUMNS]
    return header(headings) + [_shape_row(r) for r in rows] + ["", SHAPES_NOTE]


def _table_order(r: dict) -> tuple:
    s = r["shape"]
    return s["cell"], s["hidden"], s["batch"], s["seq_length"]


def _group(name: str, rows: list[dict]) -> list[str]:
    members = sorted((r for r in rows if r["group"] == name), key=_table_order)
    return [f"## {name}", ""] + _group_table(members)


def _groups(summary: dict) -> list[str]:
    """A table per group of shapes (DeepBench's, the seed's, ...), a blank line between."""
    rows = summary["shapes"]
    tables = [_group(name, rows) for name in dict.fromkeys(r["group"] for r in rows)]
    lines = [line for table in tables for line in ["", *table]]
    return lines[1:]  # the first table's blank line is the section's


# ---------------------------------------------------------------------------- ceilings
def _gemm_rates(run: dict) -> dict:
    return (run.get("gemm") or {}).get("rates") or {}


def _gemm_row(run: dict, key: str, g: dict) -> str:
    rate = f"{g['tflops']:.1f} ({g['tflops_q1']:.1f}-{g['tflops_q3']:.1f})"
    return row([f"`{run['session']}`", key, rate, g.get("compute_type")])


def _gemm_table(runs: list[dict]) -> list[str]:
    lines = header(["run", "GEMM (m×n×k)", "TFLOPS, median (IQR)", "compute type"])
    lines += [_gemm_row(r, key, g) for r in runs for key, g in _gemm_rates(r).items()]
    skipped = [r for r in runs if (r.get("gemm") or {}).get("skipped")]
    return lines + [f"- GEMM not measured in `{r['session']}`: {r['gemm']['skipped']}"
                    for r in skipped]


def _ceilings(summary: dict) -> list[str]:
    return ["## Ceilings measured in each run", ""] + _gemm_table(summary["runs"])


# ---------------------------------------------------------------------------- what did not run
def _refusals(rows: list[dict]) -> list[str]:
    count = Counter((f["config"], f["outcome"], f["call"] or "", (f["reason"] or "")[:120])
                    for r in rows for f in r["refused"])
    if not count:
        return ["Every candidate of every shape verified."]
    lines = header(["candidate", "outcome", "failing call", "shapes",
                    "cuDNN's reason (first 120 characters)"])
    by_count = sorted(count.items(), key=lambda kv: (-kv[1], kv[0]))
    return lines + [row([cfg, outcome, call, n, reason])
                    for (cfg, outcome, call, reason), n in by_count]


def _refused_section(summary: dict) -> list[str]:
    title = "## Candidates that did not verify or were refused"
    return [title, ""] + _refusals(summary["shapes"])


def _not_run_section(summary: dict) -> list[str]:
    not_run = summary["not_run"]
    if not not_run:
        return []
    return [f"## Not run ({len(not_run)})", "", ", ".join(f"`{s}`" for s in not_run)]


# ---------------------------------------------------------------------------- the report
def _blank_before(section: list[str]) -> list[str]:
    return ["", *section] if section else []


# the report's sections in order, each a function of the summary returning its lines
# (none where it has nothing to say); a new section is one function and one entry here
SECTIONS = (_provenance, _targets, _fp16_section, _groups, bench_pytorch.section, _ceilings,
            bench_overhead.section, _refused_section, _not_run_section)


def markdown(summary: dict, chart: str = "") -> str:
    """``bench.md``: the title and the opening paragraph, the ``chart``'s line if given
    (:func:`cudnn_rnn.reporting.bench_chart.line`), then :data:`SECTIONS`, each after a
    blank line."""
    out = _title(summary) + (["", chart] if chart else [])
    for section in SECTIONS:
        out += _blank_before(section(summary))
    return "\n".join(out) + "\n"
