"""The benchmark's chart (``bench.png`` beside ``bench.md``): per shape, the forward-inference
time of cuDNN's best verified configuration, PyTorch's best module, the GEMM engine's best
8-bit configuration and the persistent kernel's best, with the shape's floor (16-bit and
INT8) where the run measured it; each series only where the run has it.

Every figure is one of the summary's (:func:`cudnn_rnn.reporting.bench.summarise`): times
are medians of CUDA-graph replays where the candidate was captured (a plain-call time says
"plain" at its bar), PyTorch's the variant the report compares with. The README's chart is
this chart of ``results/nvidia-h200/9.19.0/persistent``.
"""
from __future__ import annotations

from cudnn_rnn.matrix.bench import median_ms
from cudnn_rnn.reporting import charts

CHART = "bench.png"
CUDNN, TORCH = "cuDNN's best verified configuration", "PyTorch's best module"
EIGHT, PERSISTENT = "best 8-bit configuration (cuBLASLt GEMMs)", "persistent kernel's best"
SERIES = (CUDNN, TORCH, EIGHT, PERSISTENT)
FLOORS = (("floor, 16-bit", "solid", "16-bit"), ("floor, 8-bit (INT8)", "dashed", "int8"))


def shape_label(shape: dict) -> str:
    return (f"{shape['cell']} {shape['seq_length']}, {shape['layers']}, {shape['hidden']}, "
            f"{shape['batch']}")


def _bar(c: dict | None, name: str = "") -> tuple[float | None, str]:
    """A candidate's time and the note at its bar: the time, its basis if plain, its name."""
    ms = median_ms(c)
    if ms is None:
        return None, ""
    plain = " plain" if c.get("timed_as") == "plain" else ""
    return ms, f"{ms:.3f} ms{plain}" + (f", {name}" if name else "")


def series(summary: dict) -> tuple[list, dict, dict, list]:
    """(groups, values, notes, marks) of the chart, from the summary's rows."""
    eight = {r["id"]: r for r in summary["eight_bit"]["shapes"]}
    front = {r["id"]: r for r in summary["frontier"]["shapes"]}
    groups, values, notes = [], {}, {}
    floors = {key: {} for _label, _style, key in FLOORS}
    for row in summary["shapes"]:
        g = shape_label(row["shape"])
        groups.append(g)
        win = row["winner"]
        e, f = eight.get(row["id"]) or {}, front.get(row["id"]) or {}
        tb = row["torch_best"]
        bars = {CUDNN: _bar(win, win["config"] if win else ""),
                TORCH: (tb["ms"], f"{tb['ms']:.3f} ms, {tb['variant']}") if tb else (None, ""),
                EIGHT: _bar(e.get("best_8bit_gemm"), (e.get("best_8bit_gemm") or {}).get("config", "")),
                PERSISTENT: _bar(f.get("persistent"),
                                 (f.get("persistent") or {}).get("config", "").split(":")[-1])}
        for s, (v, note) in bars.items():
            values[(g, s)], notes[(g, s)] = v, note
        for _label, _style, key in FLOORS:
            floors[key][g] = ((f.get("floors") or {}).get(key) or {}).get("ms")
    marks = [(label, style, floors[key]) for label, style, key in FLOORS
             if any(v is not None for v in floors[key].values())]
    return groups, values, notes, marks


def draw(summary: dict) -> charts.Chart | None:
    """The chart; None for a benchmark without a shape, or without matplotlib."""
    if not summary["shapes"]:
        return None
    groups, values, notes, marks = series(summary)
    runs = summary["runs"]
    p = runs[0]["provenance"] if runs else {}
    where = f"{p.get('gpu')}, cuDNN {p.get('cudnn_version')}"
    return charts.bars(
        groups, list(SERIES), values, notes=notes, marks=tuple(marks), log=True,
        colours={CUDNN: "#1f77b4", TORCH: "#ff7f0e", EIGHT: "#2ca02c", PERSISTENT: "#9467bd"},
        title=f"Forward inference per shape (cell T, L, H, B), {where}: CUDA-graph replays, "
              "ms (log scale)",
        xlabel="ms per forward (log scale)",
        alt=f"Forward-inference time per benchmark shape on {where}: " + "; ".join(
            [s for s in SERIES if any(values.get((g, s)) for g in groups)]
            + [label for label, _style, _where in marks]))


def line(summary: dict, chart: charts.Chart | None) -> str:
    """bench.md's line for the chart: its image, or the one line saying it was left out."""
    if not summary["shapes"]:
        return ""
    return chart.markdown(CHART) if chart else charts.LEFT_OUT
