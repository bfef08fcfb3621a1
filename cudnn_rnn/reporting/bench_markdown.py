"""The benchmark report's text: ``bench.md`` from the summary :mod:`.bench` computes.

Only formatting: every figure comes from :func:`cudnn_rnn.reporting.bench.summarise`.
"""
from __future__ import annotations

from cudnn_rnn.reporting.markdown import figure
from cudnn_rnn.matrix.bench import GEMM_TARGET, fp16_target
from cudnn_rnn.matrix.record import config_label

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
        return figure(out, ".0e")
    return f"{figure(out, '.0e')} outputs, {figure(grad, '.0e')} gradients"


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
             "| ×FP32 | ×TF32 (its config) | ×PyTorch default (its ms) | ×PyTorch best (its variant) "
             "| launch gap: ours, torch fp16 | max error |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        s, w = r["shape"], r["winner"]
        name = f"{s['cell']} {s['seq_length']}, {s['layers']}, {s['hidden']}, {s['batch']}"
        if not w:
            lines.append(f"| {name} | nothing verified | | | | | | | | | |")
            continue
        tf = f"{figure(r['speedup_tf32'])} ({r['tf32']['config']})" if r["tf32"] else "no TF32 verified"
        pw = r.get("plain_winner")
        th = (f"{figure(r['speedup_torch'])} ({r['torch_ms']:.4f}"
              + (f"; ours plain: {pw['config']}" if pw and pw["config"] != w["config"] else "")
              + ")" if r["torch_ms"] else f"({r['torch_skipped']})")
        best = r.get("torch_best")
        tb = f"{figure(r['speedup_torch_best'])} ({best['variant']})" if best else ""
        gap = r.get("launch_gap") or {}
        lg = f"{figure(gap.get('ours'))}, {figure(gap.get('torch_float16'))}" if gap else ""
        timed = f"{_timing(w)}" + (" graph" if w.get("timed_as") == "graph" else "")
        lines.append(f"| {name} | {w['config']} | {timed} | {figure(w['tflops'], '.1f')} | "
                     f"{_pct(r['gemm_fraction'])} | {figure(r['speedup_fp32'])} | {tf} | {th} | {tb} | "
                     f"{lg} | {figure(w['max_error'], '.1e')} (tol {_tol(w)}) |")
    lines += ["", "×TF32 uses the issue's definition: the faster verified FLOAT-data configuration with "
              "DEFAULT math (TF32 permitted) or TENSOR_OP_ALLOW_CONVERSION (FP16 conversion "
              "permitted); its column names which. ×PyTorch: `torch.nn` module, float32, `eval()`, "
              "`no_grad`, no state passed, timed in the same worker process, against our fastest plain "
              "calls (eager against eager; where that is another configuration than the "
              "winner, the column names it). ×PyTorch best: its fastest "
              "of float32, float16 and bfloat16 modules, eager and CUDA-graph-captured. Times marked "
              "graph are replays of the call's CUDA graph (bit for bit the plain call's output). "
              "Launch gap: plain ÷ captured time, ours and PyTorch float16's (eager ÷ graph)."]
    return lines


def _overlap(a: tuple, b: tuple) -> bool | None:
    """Whether two interquartile ranges overlap (None where one is unknown)."""
    if None in a or None in b:
        return None
    return a[0] <= b[1] and b[0] <= a[1]


def _same_call(r: dict, b: dict, overhead: dict | None) -> dict | None:
    """The overhead check's row for this shape and PyTorch's data type: the same
    cudnnRNNForward run both ways, side by side (None when it did not measure it)."""
    s, dtype = r["shape"], b["variant"].split()[0]
    for row in (overhead or {}).get("rows", []):
        o = row["shape"]
        if (o["cell"], o["seq"], o["layers"], o["hidden"], o["batch"], o["dtype"]) == (
                s["cell"], s["seq_length"], s["layers"], s["hidden"], s["batch"], dtype) \
                and not row.get("training_mode") and "ratio" in row:
            return row
    return None


def _side_by_side(row: dict | None) -> str:
    """What the overhead check measured for that call, in words (empty without a row)."""
    if row is None:
        return ""
    cap = row.get("captured") or {}
    return (" The overhead check ran PyTorch's own call both ways, side by side: ours / "
            f"PyTorch's {row['ratio']:.3f} plain"
            + (f", {cap['ratio']:.3f} CUDA-graph-captured" if "ratio" in cap else "")
            + (f"; arguments that differ: {', '.join(row['arguments_differ'])}"
               if row.get("arguments_differ") else "; the same arguments") + ".")


def _at_parity(row: dict | None, target: float) -> bool:
    """Whether the overhead check found the same call, captured, within its target of
    PyTorch's (ours / PyTorch's at most ``target``)."""
    cap = (row or {}).get("captured") or {}
    return "ratio" in cap and cap["ratio"] <= target and not row.get("arguments_differ")


def _verdict(overlap: bool | None, row: dict | None, target: float | None) -> str:
    """Why the same cuDNN configuration took longer here than in PyTorch, as far as the
    bench's spreads and the overhead check's side-by-side ``row`` (target ``target``) say."""
    if overlap:
        return ("the same configuration at the same speed: the interquartile ranges of the "
                "timed calls overlap, so the order between the two is noise")
    if overlap is None:
        return ("the same cuDNN configuration; the spread of PyTorch's calls was not "
                "recorded, so this run cannot tell noise from a difference")
    if row is not None and _at_parity(row, target):
        return ("the same cuDNN configuration, slower on our side in this run, whose two "
                "sides were timed one after the other; side by side (below) the overhead "
                f"check found our call within {target:g}× of PyTorch's, so the gap lies "
                "between measurements taken at different moments, not in the call")
    return ("the same cuDNN configuration, slower on our side beyond the spread of the timed "
            "calls; this run does not say why (the overhead check times the same call side "
            "by side)")


def _behind(rows: list[dict], overhead: dict | None = None) -> list[str]:
    """Where PyTorch's best beat our winner (like with like: graph with graph, else eager
    with plain), and what the same cuDNN configuration took here on the same basis."""
    out = []
    for r in rows:
        b = r.get("behind_torch_best")
        if not b:
            continue
        s = r["shape"]
        name = f"{s['cell']} {s['seq_length']}, {s['layers']}, {s['hidden']}, {s['batch']}"
        head = (f"- {name}: PyTorch {b['variant']} {b['torch_ms']:.4f} ms against our "
                f"{r['winner']['config']} {b['ours_ms']:.4f} ms ({b['ours_timed_as']}). ")
        cfg = b.get("torch_config")
        if not cfg or cfg.startswith("not observed"):
            out.append(head + f"PyTorch's cuDNN configuration was {cfg or 'not observed'}.")
        elif not b.get("same_config_in_run", b["same_config_ms"] is not None):
            out.append(head + f"PyTorch runs {cfg}, which is not among this benchmark's "
                       "verified candidates: another configuration.")
        elif b["same_config_ms"] is None:
            out.append(head + f"PyTorch runs {cfg}; that configuration was not captured here, "
                       "so there is no time of it on PyTorch's basis.")
        else:
            same = "our winner" if b["same_config_is_winner"] else "not our winner"
            ratio = b["same_config_ms"] / b["torch_ms"]
            q = b.get("same_config_q") or (None, None)
            tq = tuple(b.get("torch_q") or (None, None))
            overlap = _overlap(tuple(q), tq)
            spread = ("" if overlap is None else
                      f" (interquartile ranges: ours {q[0]:.4f}-{q[1]:.4f}, PyTorch's "
                      f"{tq[0]:.4f}-{tq[1]:.4f})")
            row = _same_call(r, b, overhead)
            verdict = _verdict(overlap, row, overhead["target"] if row else None)
            out.append(head + f"PyTorch runs {cfg} ({same}); here that configuration took "
                       f"{b['same_config_ms']:.4f} ms, {ratio:.2f}× PyTorch's time{spread}: "
                       f"{verdict}." + _side_by_side(row))
    return out or ["Nowhere: at every shape our verified winner was at least as fast as PyTorch's "
                   "best variant."]


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
    graphs = [r for r in oh["rows"] if (r.get("captured") or {}).get("ratio") is not None]
    refused = [r for r in oh["rows"] if (r.get("captured") or {}).get("skipped")]
    if graphs or refused:
        lines += ["", "Both sides CUDA-graph-captured (ours checked bit for bit against its plain "
                  "call), replays timed on the same stream: ratios " + (", ".join(
                      f"{r['shape']['cell']} {r['shape']['hidden']}/{r['shape']['batch']} "
                      f"{r['shape']['dtype']} {r['fwd_mode'].lower()} "
                      f"{r['captured']['ratio']:.3f}" + (
                          f" ({r['captured']['ratio_min']:.3f}-{r['captured']['ratio_max']:.3f} "
                          "over processes)" if "ratio_min" in r["captured"] else "")
                      for r in graphs) or "none")
                  + (("; not captured: " + "; ".join(
                      f"{r['shape']['cell']} {r['shape']['hidden']}/{r['shape']['batch']}: "
                      f"{r['captured']['skipped']}" for r in refused)) if refused else "") + "."]
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
    out.append(f"- Seed shape LSTM 20, 2, 512, 64: our fastest verified plain calls "
               f"**{figure(st['measured'])}×** PyTorch's default (`eval()`, `no_grad`, float32, "
               f"eager) — "
               f"target ≥ {st['target']}×: **{'met' if st['met'] else 'not met'}**.")
    ft = t["fp16_gemm_fraction"]
    out.append(f"- FP16 LSTM forward at hidden ≥ 2048, batch ≥ 128 ({ft['shapes']} shapes): "
               f"{_pct(ft['min'])}–{_pct(ft['max'])} of the dense FP16 GEMM rate — target ≥ "
               f"{_pct(ft['target'])}: **{'met' if ft['met'] else 'not met'}**" + (
                   "" if ft["met"] else "; why: see below") + ".")
    vb = t.get("winner_vs_torch_best") or {}
    if vb.get("shapes"):
        out.append(f"- Our verified winner against PyTorch's best (fastest of its float32, float16 "
                   f"and bfloat16 modules, eager or CUDA-graph-captured): at least as fast at "
                   f"{vb['at_least_as_fast']} of {vb['shapes']} shapes, ratios "
                   f"{figure(vb['min'])}–{figure(vb['max'])}× — target ≥ 1× everywhere: "
                   f"**{'met' if vb['met'] else 'not met'}**"
                   + ("" if vb["met"] else "; where not, see *Where PyTorch's best is faster*") + ".")
    if t.get("overhead"):
        o = t["overhead"]
        out.append(f"- Overhead of the ctypes path: worst ratio ours / PyTorch **{figure(o['worst'], '.3f')}**, "
                   f"median {figure(o['median'], '.3f')}" + (
                       f" (each the median over {o['processes']} processes; the worst single "
                       f"process gave {figure(o['worst_single_process'], '.3f')})"
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
                       f"{c['config'] if c else 'none verified'} | {figure(c and c['tflops'], '.1f')} | "
                       f"{_pct(r['fp16_gemm_fraction'])} | {figure(g.get('input_gemm_tflops'), '.1f')} | "
                       f"{figure(g.get('step_gemm_tflops'), '.1f')}"
                       f"{_paren(_pct(g['step_gemm_tflops'] / dense if g and dense else None))} | "
                       f"{figure(g.get('model_tflops'), '.1f')}{_paren(_pct(g.get('recurrent_share')))} | "
                       f"{figure(g.get('fp16_over_model'))} |")
        if not ft["met"]:
            out += ["", _why_below(fp16_rows)]
    for group in dict.fromkeys(r["group"] for r in rows):
        out += ["", f"## {group}", ""] + _group_table(
            sorted((r for r in rows if r["group"] == group),
                   key=lambda r: (r["shape"]["cell"], r["shape"]["hidden"], r["shape"]["batch"],
                                  r["shape"]["seq_length"])))
    if any(r.get("speedup_torch_best") is not None for r in rows):
        out += ["", "## Where PyTorch's best is faster", ""] + _behind(rows, summary.get("overhead"))
    out += ["", "## Ceilings measured in each run", ""] + _gemm_table(runs)
    if summary.get("overhead"):
        out += ["", "## Overhead check: this project's ctypes path against torch.nn", ""] + \
            _overhead_lines(summary["overhead"])
    out += ["", "## Candidates that did not verify or were refused", ""] + _refusals(rows)
    if summary["not_run"]:
        out += ["", f"## Not run ({len(summary['not_run'])})", "",
                ", ".join(f"`{s}`" for s in summary["not_run"])]
    return "\n".join(out) + "\n"
