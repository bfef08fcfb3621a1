"""matrix.md: the support matrix in words and tables (tabulate, GitHub flavour)."""
from __future__ import annotations

from tabulate import tabulate

from cudnn_rnn.reporting import axes, product
from cudnn_rnn.reporting import grid as C
from cudnn_rnn.matrix.record import config_label, max_error
from cudnn_rnn.reporting.analysis import shape_label, fwd_tflops

PROVENANCE_KEYS = (("gpu", "GPU"), ("compute_capability", "compute capability"),
                   ("driver_version", "NVIDIA driver"), ("cuda_driver_api", "CUDA driver API"),
                   ("cuda_runtime_cudnn", "CUDA runtime (cuDNN's)"),
                   ("cuda_runtime_cupy", "CUDA runtime (CuPy's)"), ("cudnn_version", "cuDNN"),
                   ("library_path", "libcudnn path"), ("library_source", "found via"),
                   ("cupy", "CuPy"), ("python", "Python"), ("numpy", "NumPy"),
                   ("commit", "commit"), ("command", "command"), ("date", "date"),
                   ("no_gpu_reason", "no GPU because"))


def _table(rows, headers, **kw):
    return tabulate(rows, headers=headers, tablefmt="github", **kw)


def _legacy_words(legacy: dict | None) -> str:
    if not legacy:
        return ""
    present = sorted(k for k, v in legacy.items() if v)
    return (f"{len(present)} of {len(legacy)} symbols exported"
            + (f": {', '.join(present)}" if present else " (removed in cuDNN 9)"))


def _sessions_words(sessions: list | None) -> str:
    """A run recorded over several sessions (``--resume``): when each began (and ended), at
    which commit, with how many cells left to run; nothing for a run of one session."""
    if not sessions or len(sessions) < 2:
        return ""
    return "; ".join(
        f"{s.get('started')}" + (f" to {s['finished']}" if s.get("finished") else "")
        + f" at `{(s.get('commit') or 'unknown')[:12]}`"
        + (f", {s['cells_to_run']} cells to run" if s.get("cells_to_run") is not None else "")
        for s in sessions)


def provenance_block(prov: dict, report: dict, legacy: dict | None = None,
                     runs: list | None = None, names: list | None = None) -> str:
    """The provenance table: of the run (``prov``), or, where ``runs`` ((records file, meta)
    of each run the report renders) holds more than one, a column of each (headed by
    ``names``: :meth:`~.load.ResultSet.run_names`); a run recorded over several sessions
    lists them."""
    metas = [m for _, m in runs] if runs else [{"provenance": prov, "legacy_symbols": legacy}]
    provs = [m.get("provenance") or {} for m in metas]
    show = lambda p, k: (f"`{p[k]}`" if k in ("library_path", "command", "commit")  # noqa: E731
                         else p[k]) if p.get(k) else ""
    rows = [(label, *(show(p, k) for p in provs))
            for k, label in PROVENANCE_KEYS if any(p.get(k) for p in provs)]
    if any(_sessions_words(m.get("sessions")) for m in metas):
        rows.append(("sessions (the date above: the last one's start)",
                     *(_sessions_words(m.get("sessions")) for m in metas)))
    if any(m.get("legacy_symbols") for m in metas):
        rows.append(("legacy v6/v7 RNN API (the old sample's)",
                     *(_legacy_words(m.get("legacy_symbols")) for m in metas)))
    blank = [""] * (len(metas) - 1)
    rows += [("report command", f"`{report['command']}`", *blank),
             ("report commit", f"`{report['commit']}`", *blank),
             ("report date", report["date"], *blank)]
    heads = [f"of `{n}`" for n in names] if len(metas) > 1 else ["value"]
    return _table(rows, ("of this run" if len(metas) == 1 else "of these runs", *heads))


def figure(x, spec=".2f", none=""):
    """A number as the reports print it (``none`` where there is no figure)."""
    return none if x is None else format(x, spec)


def outcomes_line(counts: dict) -> str:
    """The outcome counts of a run in words (a descriptor-only cell says what it passed)."""
    return ", ".join(f"{C.outcome_words(k)}" + (f" ({C.DESCRIPTOR_ONLY})" if k in C.OUTCOME_WORDS
                                                 else "") + f" {v}" for k, v in counts.items())


SEED_TUNE = "python -m cudnn_rnn.tune --cell {cell} --seq 20 --layers 2 --hidden 512 --batch 64 " \
    "--precision int8"


def project_8bit_lines(p: dict | None) -> list[str]:
    """The project's own 8-bit paths at the seed's shape (a benchmark run's rows), or
    nothing where the report was not given one."""
    if not p or not p.get("rows"):
        return []
    rows = [(r["cell"], r["engine"], f"`{r['config']}`",
             f"{r['ms']:.4f}" + (" (graph)" if r.get("timed_as") == "graph" else ""),
             figure(r["vs_cudnn16"]), f"`{r['cudnn16']}`" if r.get("cudnn16") else "none",
             figure(r["max_error"], ".1e")) for r in p["rows"]]
    return ["", "**This project's own 8-bit paths** run the seed's shape where cuDNN refuses it: "
                "the GEMM engine (cuBLASLt INT8/FP8 GEMMs and a fused gate kernel per step) and "
                "the persistent kernel (the whole sequence in one launch, weights on chip), each "
                "verified against the float64 reference and its quantized twin before it was "
                f"timed. Measured by the benchmark run in `{p['source']}` ({p.get('gpu')}, commit "
                f"`{(p.get('commit') or 'unknown')[:12]}`, {p.get('date')}), forward inference:",
            "", _table(rows, ("cell", "engine", "fastest verified 8-bit", "ms",
                              "x best 16-bit cuDNN", "that configuration", "max error")),
            "", "Run them on your GPU: `" + SEED_TUNE.format(cell="LSTM") + "` (any cell mode; "
                "`--precision fp8` for E4M3, `--precision any` ranks them with cuDNN's)."]


def int8_section(a: dict, version: str) -> list[str]:
    """Can the seed's RNN run in INT8; nothing for a result set without INT8 cells."""
    if a["cells"] == 0:
        return []
    out = ["## Can this RNN run in INT8?", ""]
    seed = a["seed_cell"]
    if a["ran"] == 0:
        stop = a["where_int8_stops"][0] if a["where_int8_stops"] else None
        ours = bool((a.get("project_8bit") or {}).get("rows"))
        verdict = ("**Not in cuDNN" + ("; yes with this project's own 8-bit paths (below)"
                                       if ours else "") + ".** "
                   + f"On cuDNN {version}, every one of the {a['cells']} INT8 cells is refused"
                   + (f" by `{stop['call']}` with `CUDNN_STATUS_{stop['status']}`" if stop else "")
                   + ".")
        out.append(verdict)
        if seed:
            reason = seed.get("reason")
            out += ["", f"The seed's own configuration (RNN_RELU, 20 2 512 64, INT8 data and INT8 "
                        f"math precision) stops at stage `{seed['failed_stage']}`: "
                        f"`{seed['failed_call']}` returns `CUDNN_STATUS_{seed['status']}` "
                        f"({seed['status_code']}); "
                        + (f"cuDNN's reason: `{reason}`." if reason else
                           "cuDNN logs no reason for it (its logging callback stays silent; the "
                           "refusal comes before any of the checks that explain themselves).")]
        if len(a["where_int8_stops"]) > 1:
            out += ["", _table([(s["call"], s["status"], s["reason"] or "", s["cells"])
                                for s in a["where_int8_stops"]],
                               ("call", "status", "cuDNN's reason", "INT8 cells"))]
    else:
        out.append(f"{a['ran']} of {a['cells']} INT8 cells ran; see the INT8 table below.")
    alt = a["alternative"]
    if alt:
        out += ["", f"**The fastest verified alternative** for the seed's RNN_RELU at 20 2 512 64 is "
                    f"`{alt['config']}`: forward training {alt['forward_training_ms']:.3f} ms, "
                    f"{alt['tflops']:.2f} TFLOPS, **{figure(alt['speedup'])}x** true FP32"
                    + (f" (inference {figure(alt['speedup_inference'])}x)"
                       if alt["speedup_inference"] is not None else "")
                    + f", largest relative error against float64 {alt['max_error']:.1e}."]
        rows = [(cell, v["config"], f"{v['forward_training_ms']:.3f}", figure(v["speedup"]),
                 f"{v['max_error']:.1e}") for cell, v in a["alternative_per_cell"].items() if v]
        if rows:
            out += ["", "Fastest verified FP16/BF16 configuration per cell at 20 2 512 64:", "",
                    _table(rows, ("cell", "configuration", "fwd train ms", "x FP32", "max error"))]
    out += project_8bit_lines(a.get("project_8bit"))
    out += ["", "### The seed's cascade of errors, explained", "",
            "The seed ran NVIDIA's legacy RNN_example (cuDNN 7, v6 API) with `CUDNN_DATA_INT8`. "
            "Its 18 error lines are one refusal and its consequences. By the sample's call order "
            "(the lines 373/402 repeat numLayers x linear layers = 2 x 2 times for RNN_RELU):", "",
            _table([(c["line"], f"`{c['call']}`", c["status"], c["meaning"]) for c in a["cascade"]],
                   ("seed line", "call", "status", "what it means"))]
    replay = a.get("seed_replay")
    if replay:
        out += ["", f"Replayed on cuDNN {version} (the v6 calls are gone from cuDNN 9, so their "
                    "v8 counterparts):", "",
                _table([(f"`{s['call']}`", s.get("args", ""), s["status"],
                         _replay_note(s)) for s in replay], ("call", "arguments", "status", "note"))]
        size = next((s for s in replay if s["call"] == "cudnnGetRNNWeightSpaceSize"), None)
        filt = next((s for s in replay if s["call"] == "cudnnSetFilterNdDescriptor"
                     and "INT8" in s.get("args", "")), None)
        words = []
        if size is not None and size["status"] == "SUCCESS":
            words.append(f"On this cuDNN the size query on the refused descriptor does not fail: "
                         f"it answers {size['output_after']} bytes (the failed "
                         f"`cudnnSetRNNDescriptor_v8` evidently leaves the descriptor unset). "
                         "A program that ignores the first error therefore sizes its buffers from "
                         "a zero, not from garbage: the refusal must be checked at the call that "
                         "makes it.")
        elif size is not None:
            words.append("The size query on the refused descriptor fails too and leaves its output "
                         "unwritten (the sentinel survives): allocating from it is what produced "
                         "the seed's out-of-memory.")
        if filt is not None and filt["status"] == "SUCCESS":
            words.append("`cudnnSetFilterNdDescriptor` with INT8, NCHW, 3 dimensions and a correct "
                         "size succeeds: the seed's BAD_PARAM at line 309 came from the garbage size, "
                         "not from the format (the seed's question).")
        elif filt is not None:
            words.append(f"`cudnnSetFilterNdDescriptor` with INT8 and a correct size returns "
                         f"{filt['status']} here.")
        out += [""] + words
    return out + [""]


def _replay_note(s: dict) -> str:
    if "output_written" in s:
        return (f"output written: {s['output_after']}" if s["output_written"]
                else f"output left unwritten ({s['output_before']:#x} sentinel kept)")
    return s.get("reason") or ""


def tensor_op_section(sweep: dict, perf: list, chart: str = "") -> list[str]:
    """The shape sweep's speed-ups; nothing for a result set without a timed sweep.
    ``chart``: the line of its chart (:func:`cudnn_rnn.reporting.html.chart_line`), if any."""
    if not sweep["rows"]:
        return []
    out = ["## Why no tensor-op speed-up?", ""] + ([chart, ""] if chart else [])
    configs = sweep["configs"]
    rows = []
    for r in sweep["rows"]:
        rows.append([r["cell"], r["hidden"], r["batch"], "yes" if r["multiple_of_8"] else "no"]
                    + [figure((r["configs"].get(c) or {}).get("speedup")) for c in configs])
    out += ["Forward-training speed-up over true FP32 (FLOAT/FLOAT/FMA/STANDARD, same cell and "
            "shape, measured in the same run); seqLength 20, one layer. FLOAT/DEFAULT is TF32 "
            "where the GPU has it:", "",
            _table(rows, ["cell", "hidden", "batch", "multiples of 8"] + configs), ""]
    out += [f"- {f}" for f in sweep["findings"]]
    if perf:
        out += ["", "The documented rule (cuDNN 7.5 Developer Guide 2.8.3.3: FP16 tensor-core math "
                    "for STANDARD needs hidden, input and batch sizes that are multiples of 8), "
                    "checked on each shape and its just-not-a-multiple twin:", "",
                _table([(p["cell"], p["multiple"], figure(p["speedup_multiple"]), p["not_multiple"],
                         figure(p["speedup_not_multiple"]),
                         p["verdict"]) for p in perf],
                       ("cell", "multiple of 8", "x FP32", "not a multiple", "x FP32", "rule"))]
    return out + [""]


def data_type_tables(records: list) -> list[str]:
    sample = C.planned(records)
    if not sample:
        return []
    out = ["## The support matrix at the sample's shape (20 2 512 64)", "",
           "One table per data type: rows math precision x math type, columns algorithm x cell.",
           "", "Legend:", ""]
    out += [f"- {k}: {v}" for k, v, _cls in C.legend(sample)] + [""]
    for dt in C.data_types(sample):
        refused = C.one_refusal(sample, dt)
        if refused:  # one line, not a grid repeating it in every cell
            out += [f"### {dt}", "", refused["text"], ""]
            continue
        rows, cols, index = C.grid(sample, dt)
        table = [[f"{p} / {m}"] + [C.short(index.get((p, m, a, c))) for a, c in cols]
                 for p, m in rows]
        out += [f"### {dt}", "", _table(table, ["prec / math"] + [f"{a} {c}" for a, c in cols]), ""]
    return out


def contradictions_section(groups: list, constraints) -> list[str]:
    out = ["## Measured vs documented", "",
           "cuDNN's documented RNN constraints are shipped as data "
           "(`cudnn_rnn/data/documented_constraints.toml`, each rule with its source). Every "
           "measured cell is checked against them; these disagree:", ""]
    if not groups:
        return out + ["No contradiction found.", ""]
    rows = []
    for g in groups:
        example = g["cells"][0]
        rows.append((g["documented"], ", ".join(g["measured"]), g["count"],
                     g["detail"][:110], f"`{example}`"))
    out += [_table(rows, ("documented", "measured", "cells", "rule or failure", "example cell")), ""]
    out += ["Sources:", ""] + [f"- {k}: {v}" for k, v in constraints.sources.items()]
    return out + [""]


def render(result, analysis: dict, report: dict, constraints, chart: str = "") -> str:
    """matrix.md; ``chart``: the sweep chart's line (its image, or that it was left out)."""
    prov = result.provenance
    version = prov.get("cudnn_version") or result.records[0].get("cudnn_version")
    counts = analysis["counts"]
    out = [f"# cuDNN RNN support matrix: {result.label}", "",
           f"{len(result.records)} cells from `{', '.join(report['sources'])}`. Outcomes: "
           + outcomes_line(counts) + ".", ""]
    if result.incomplete:
        out += ["**An unfinished run** (cut before its end, or still being written): "
                + "; ".join(f"`{i}`" for i in result.incomplete) + " recorded. Sections of "
                "the cells not yet run are missing or partial; the run's own command "
                "continues it.", ""]
    out += ["FLOP count (NVIDIA RNN_example's): matrices-per-cell (2 RELU/TANH, 8 LSTM, 6 GRU) x "
            "2 x directions x hidden^2 x seqLength x miniBatch x layers per pass."
            + (" Times are medians of CUDA-event timed calls after warm-up; a cell is timed only "
               "after its outputs and gradients matched the float64 reference within the "
               "tolerance of its precision." if any(r.get("timings") for r in result.records)
               else " No cell was timed in this run."), "",
            "## Provenance", "", provenance_block(prov, report, result.meta.get("legacy_symbols"),
                                                   result.runs, result.run_names()),
            ""]
    out += int8_section(analysis["int8"], version)
    out += tensor_op_section(analysis["sweep"], analysis["performance_rule"], chart)
    out += data_type_tables(result.records)
    out += axes.markdown(analysis["axes"])
    out += product.markdown(analysis["product"], analysis["wrong"])
    out += contradictions_section(analysis["contradiction_groups"], constraints)
    best = [r for r in result.records if r["outcome"] == "OK" and r.get("timings")]
    if best:
        best.sort(key=lambda r: (-((r.get("speedup") or {}).get("forward_training") or 0), r["id"]))
        rows = [(config_label(r), r["cell"], shape_label(r), C.fmt_ms(r),
                 fwd_tflops(r),
                 figure((r.get("speedup") or {}).get("forward_training")),
                 figure((r.get("speedup") or {}).get("forward_inference")),
                 f"{max_error(r):.1e}") for r in best[:20]]
        out += ["## Fastest verified cells", "",
                _table(rows, ("configuration", "cell", "TxLxHxB", "fwd train ms", "TFLOPS",
                              "x FP32 train", "x FP32 infer", "max error")), ""]
    return "\n".join(out) + "\n"
