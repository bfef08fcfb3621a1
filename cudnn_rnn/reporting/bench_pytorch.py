"""The benchmark report's section *Where PyTorch's best is faster*: per shape where PyTorch's
fastest variant beat our verified winner (like with like: graph with graph, else eager with
plain), which cuDNN configuration PyTorch ran, what that configuration took here on the
same basis and, where the overhead check ran the same call side by side, what it found."""
from __future__ import annotations

from cudnn_rnn.reporting.bench_pieces import shape_name


def _overlap(a: tuple, b: tuple) -> bool | None:
    """Whether two interquartile ranges overlap (None where one is unknown)."""
    if None in a or None in b:
        return None
    return a[0] <= b[1] and b[0] <= a[1]


def same_call(r: dict, b: dict, overhead: dict | None) -> dict | None:
    """The overhead check's row for this shape and PyTorch's data type: the same
    cudnnRNNForward run both ways, side by side (None when it did not measure it)."""
    s, dtype = r["shape"], b["variant"].split()[0]
    wanted = (s["cell"], s["seq_length"], s["layers"], s["hidden"], s["batch"], dtype)
    for row in (overhead or {}).get("rows", []):
        o = row["shape"]
        measured = (o["cell"], o["seq"], o["layers"], o["hidden"], o["batch"], o["dtype"])
        if measured == wanted and not row.get("training_mode") and "ratio" in row:
            return row
    return None


def _side_by_side(row: dict | None) -> str:
    """What the overhead check measured for that call, in words (empty without a row)."""
    if row is None:
        return ""
    cap = row.get("captured") or {}
    captured = f", {cap['ratio']:.3f} CUDA-graph-captured" if "ratio" in cap else ""
    differ = row.get("arguments_differ")
    arguments = (f"; arguments that differ: {', '.join(differ)}" if differ
                 else "; the same arguments")
    return (" The overhead check ran PyTorch's own call both ways, side by side: ours / "
            f"PyTorch's {row['ratio']:.3f} plain{captured}{arguments}.")


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


def _same_config_timed(r: dict, b: dict, overhead: dict | None) -> str:
    """What PyTorch's configuration took here, against PyTorch's time, and why the two
    differ (where that configuration is among ours and was timed on PyTorch's basis)."""
    same = "our winner" if b["same_config_is_winner"] else "not our winner"
    ratio = b["same_config_ms"] / b["torch_ms"]
    q = b.get("same_config_q") or (None, None)
    tq = tuple(b.get("torch_q") or (None, None))
    overlap = _overlap(tuple(q), tq)
    spread = ""
    if overlap is not None:
        spread = (f" (interquartile ranges: ours {q[0]:.4f}-{q[1]:.4f}, PyTorch's "
                  f"{tq[0]:.4f}-{tq[1]:.4f})")
    row = same_call(r, b, overhead)
    verdict = _verdict(overlap, row, overhead["target"] if row else None)
    return (f"PyTorch runs {b['torch_config']} ({same}); here that configuration took "
            f"{b['same_config_ms']:.4f} ms, {ratio:.2f}× PyTorch's time{spread}: {verdict}."
            + _side_by_side(row))


def _torch_config(b: dict, r: dict, overhead: dict | None) -> str:
    """What this run says of the cuDNN configuration PyTorch ran."""
    cfg = b.get("torch_config")
    if not cfg or cfg.startswith("not observed"):
        return f"PyTorch's cuDNN configuration was {cfg or 'not observed'}."
    if not b.get("same_config_in_run", b["same_config_ms"] is not None):
        return (f"PyTorch runs {cfg}, which is not among this benchmark's verified "
                "candidates: another configuration.")
    if b["same_config_ms"] is None:
        return (f"PyTorch runs {cfg}; that configuration was not captured here, so there is "
                "no time of it on PyTorch's basis.")
    return _same_config_timed(r, b, overhead)


def _behind_line(r: dict, overhead: dict | None) -> str:
    """One shape where PyTorch's best was faster: both times, then what that says."""
    b = r["behind_torch_best"]
    head = (f"- {shape_name(r['shape'])}: PyTorch {b['variant']} {b['torch_ms']:.4f} ms "
            f"against our {r['winner']['config']} {b['ours_ms']:.4f} ms "
            f"({b['ours_timed_as']}). ")
    return head + _torch_config(b, r, overhead)


def behind(rows: list[dict], overhead: dict | None = None) -> list[str]:
    """Where PyTorch's best beat our winner (like with like: graph with graph, else eager
    with plain), and what the same cuDNN configuration took here on the same basis."""
    out = [_behind_line(r, overhead) for r in rows if r.get("behind_torch_best")]
    return out or ["Nowhere: at every shape our verified winner was at least as fast as "
                   "PyTorch's best variant."]


def section(summary: dict) -> list[str]:
    """The section, where PyTorch's best variant was timed at some shape."""
    rows = summary["shapes"]
    if all(r.get("speedup_torch_best") is None for r in rows):
        return []
    return ["## Where PyTorch's best is faster", ""] + behind(rows, summary.get("overhead"))
