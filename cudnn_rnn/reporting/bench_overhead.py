"""The benchmark report's section *Overhead check*: the same cuDNN call run through this
project's ctypes flow and through ``torch.nn``, side by side (:mod:`cudnn_rnn.compare.
overhead` measures it): a table of the ratios, then what the rows say about launch-bound
calls, the GPU work alone, CUDA graphs and the call's arguments."""
from __future__ import annotations

from cudnn_rnn.matrix.record import config_label
from cudnn_rnn.reporting.bench_pieces import header, row, span


def _intro(oh: dict) -> str:
    n = oh.get("processes", 1)
    if n > 1:
        over = (f"the median over {n} fresh processes of each process's median over "
                f"{oh.get('rounds', 'its')} alternating rounds; range: between processes")
    else:
        over = "median over alternating rounds in one process; range: between rounds"
    return ("Same cuDNN configuration as PyTorch, read from cuDNN's API log of PyTorch's own "
            "call, run through this project's ctypes flow and through `torch.nn`, "
            "alternating, one stream, one timing method; ratio = ours / PyTorch's (target ≤ "
            f"{oh['target']}), {over}.")


def _columns(oh: dict) -> list[str]:
    ranges = "processes" if oh.get("processes", 1) > 1 else "rounds"
    return ["shape", "fwd mode", "config PyTorch used", "ours ms", "PyTorch ms",
            f"ratio (range over {ranges})", "host µs per call, ours / PyTorch",
            "idle-GPU latency ratio", "host-ahead ratio"]


def _shape(r: dict) -> str:
    """A row's shape as the table names it: ``LSTM 20, 2, 512, 64 float16``."""
    s = r["shape"]
    return f"{s['cell']} {s['seq']}, {s['layers']}, {s['hidden']}, {s['batch']} {s['dtype']}"


def host_ahead(r: dict) -> str:
    """The host-ahead ratio, marked when the host did not stay ahead (then it is not
    GPU-only)."""
    v = r.get("queued_ratio")
    if v is None:
        return ""
    return f"{v:.3f}" + ("" if r["queued"]["host_ahead"] else " (host fell behind)")


def _table_row(r: dict) -> str:
    """One measured pair, or why it was not measured."""
    if "ratio" not in r:
        mode = "train" if r["training_mode"] else "eval"
        return (f"| {_shape(r)} | {mode} | | | | not measured: {r.get('skipped')} "
                "| | | |")
    c, host = r["config"], r["host_enqueue"]
    return row([_shape(r), r["fwd_mode"], f"{config_label(c)}, {c['layout']}",
                f"{r['ours']['median_ms']:.4f}", f"{r['torch']['median_ms']:.4f}",
                f"{r['ratio']:.3f} ({r['ratio_min']:.3f}-{r['ratio_max']:.3f})",
                f"{host['ours_us']:.0f} / {host['torch_us']:.0f}",
                f"{r['isolated_ratio']:.3f}", host_ahead(r)])


def _call_name(r: dict, dtype: bool = False) -> str:
    """An overhead row as the notes name it: ``LSTM 512/64 inference``."""
    s = r["shape"]
    name = f"{s['cell']} {s['hidden']}/{s['batch']}" + (f" {s['dtype']}" if dtype else "")
    return f"{name} {r['fwd_mode'].lower()}"


def _launch_bound(rows: list[dict]) -> list[str]:
    """Which calls the host's launches set the pace of."""
    bound = [r for r in rows if "ratio" in r
             and r["host_enqueue"]["ours_us"] >= 0.8 * r["ours"]["median_ms"] * 1e3]
    if not bound:
        return []
    names = ", ".join(_call_name(r) for r in bound)
    return ["", "Launch-bound: where the host time to enqueue one call is ≥ 80% of its "
            f"device time ({names}), cuDNN's own launches, on either side, set the pace, so "
            "such times move with the host CPU from one process to the next."]


def _host_ahead_note(rows: list[dict]) -> list[str]:
    """The GPU work alone: the same calls queued behind a long GEMM."""
    queued = [r["queued_ratio"] for r in rows if r.get("queued_ratio") is not None]
    if not queued:
        return []
    return ["", "Host-ahead ratio: the same calls, 8 at a time, queued behind an 8192³ FP32 "
            "GEMM so the GPU runs them back to back without waiting for the host: the GPU "
            f"work alone. Host-ahead ratios span {span(queued, lambda v: f'{v:.3f}')}; "
            "where the back-to-back ratio differs from it, the difference is in how fast each "
            "side's host thread feeds cuDNN's launches (the launch-bound regime), not in what "
            "runs on the GPU."]


def _captured_ratio(r: dict) -> str:
    cap = r["captured"]
    spread = ""
    if "ratio_min" in cap:
        spread = f" ({cap['ratio_min']:.3f}-{cap['ratio_max']:.3f} over processes)"
    return f"{_call_name(r, dtype=True)} {cap['ratio']:.3f}{spread}"


def _not_captured(r: dict) -> str:
    s = r["shape"]
    return f"{s['cell']} {s['hidden']}/{s['batch']}: {r['captured']['skipped']}"


def _graphs_note(rows: list[dict]) -> list[str]:
    """Both sides captured in CUDA graphs: the ratios of the replays, and what was not."""
    graphs = [r for r in rows if (r.get("captured") or {}).get("ratio") is not None]
    refused = [r for r in rows if (r.get("captured") or {}).get("skipped")]
    if not graphs and not refused:
        return []
    ratios = ", ".join(_captured_ratio(r) for r in graphs) or "none"
    refusals = "; ".join(_not_captured(r) for r in refused)
    not_captured = f"; not captured: {refusals}" if refused else ""
    return ["", "Both sides CUDA-graph-captured (ours checked bit for bit against its plain "
            f"call), replays timed on the same stream: ratios {ratios}{not_captured}."]


def _differing_arguments(r: dict) -> str:
    return f"{_call_name(r)} ({', '.join(r['arguments_differ'])})"


def _arguments_note(rows: list[dict]) -> list[str]:
    """Whether the arguments besides the descriptors were PyTorch's."""
    compared = [r for r in rows if "arguments_differ" in r]
    if not compared:
        return []
    differ = [r for r in compared if r["arguments_differ"]]
    if differ:
        found = ("differ from PyTorch's on "
                 + ", ".join(_differing_arguments(r) for r in differ) + ".")
    else:
        found = "the same as PyTorch's on every measured row."
    return ["", "Arguments besides the descriptors (devSeqLengths; work-, weight- and "
            f"reserve-space sizes): {found}"]


def _measured_on(oh: dict) -> list[str]:
    p = oh.get("provenance") or {}
    return ["", f"Measured on {p.get('gpu')}, cuDNN {p.get('cudnn_version')} "
            f"(`{p.get('library_path')}`), commit `{p.get('commit')}`, `{p.get('command')}`, "
            f"{p.get('date')}."]


def overhead_lines(oh: dict) -> list[str]:
    """The section's text for the overhead check's summary ``oh`` (overhead.json)."""
    rows = oh["rows"]
    return ([_intro(oh), ""] + header(_columns(oh))
            + [_table_row(r) for r in rows] + _launch_bound(rows) + _host_ahead_note(rows)
            + _graphs_note(rows) + _arguments_note(rows) + _measured_on(oh))


def section(summary: dict) -> list[str]:
    """The section, where the benchmark has an overhead check beside it."""
    if not summary.get("overhead"):
        return []
    return (["## Overhead check: this project's ctypes path against torch.nn", ""]
            + overhead_lines(summary["overhead"]))
