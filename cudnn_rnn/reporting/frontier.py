"""The benchmark's frontier: per shape, the fastest verified configuration of every engine
(cuDNN's, the GEMM engine's, the persistent kernel's) against the best verified 16-bit cuDNN
configuration, PyTorch's best module, PyTorch's FP8 peer (:mod:`cudnn_rnn.compare.torch_fp8`)
and the shape's floor (:mod:`cudnn_rnn.matrix.floor`), so every figure is read against what
the chip allows. All times are CUDA-graph replays where the candidate was captured; a ratio
compares two medians of the same run (same process, same GPU).
"""
from __future__ import annotations

from cudnn_rnn.bindings.enums import RNNMode
from cudnn_rnn.engine.config import GATES
from cudnn_rnn.matrix import floor
from cudnn_rnn.matrix.bench import (candidates_ratio, median_ms, replay_ms, torch_best,
                                    verified)
from cudnn_rnn.reporting.bench_pieces import timed
from cudnn_rnn.reporting.markdown import figure

# The persistent kernel's rules (its issue's targets) at every benchmark shape of hidden size
# up to MAX_HIDDEN: the project's own fastest (the GEMM engine's or the persistent kernel's)
# no slower than cuDNN's best 16-bit; the fastest verified of all within FLOOR_LIMIT x its
# floor; where cuDNN's best is more than FAR x its 16-bit floor, ours at least GAIN x it; the
# fastest verified of all at least as fast as PyTorch's FP8 peer
MAX_HIDDEN, FLOOR_LIMIT, FAR, GAIN = 2048, 1.5, 2.0, 1.5


def _engine_ok(rec: dict) -> list[dict]:
    return [c for c in rec.get("engine") or [] if c["outcome"] == "OK" and c.get("timing")]


def _fastest(cands: list[dict]) -> dict | None:
    return min(cands, key=lambda c: (median_ms(c), c["config"])) if cands else None


def _operands(c: dict) -> str:
    """The floor a candidate is read against (:data:`floor.OPERANDS`): its 8-bit format's,
    else 16-bit."""
    return {"int8": "int8", "e4m3": "fp8"}.get(c.get("format") or "", "16-bit")


def _name(c: dict) -> str:
    return c.get("label") or c["config"]


def shape_row(rec: dict, run: dict | None) -> dict:
    """One shape's line (``run``: the run entry of the session that measured it)."""
    sh = rec["shape"]
    cudnn16 = _fastest([c for c in verified(rec)
                        if c["config"].split("/")[0] in ("HALF", "BFLOAT16")])
    everyone = verified(rec) + _engine_ok(rec)
    best = _fastest(everyone)
    persistent = _fastest([c for c in _engine_ok(rec) if c.get("engine") == "persistent"])
    ours = _fastest(_engine_ok(rec))
    rates = ((run or {}).get("engine_gemm") or {}).get("rates") or {}
    measured = (run or {}).get("engine_floor") or {}
    reads, spreads = measured.get("per_round_us") or {}, measured.get("per_round_spread_us")
    gates = GATES[RNNMode[sh["cell"]]]
    exchange = (run or {}).get("cluster_floor")
    floors = {f: floor.floor(sh, gates, f, rates, reads, spreads, exchange)
              for f in floor.OPERANDS}
    tb = torch_best(rec.get("torch"), graph=True)
    peer = rec.get("torch_fp8") or {}

    def over(c):
        f = floors.get(_operands(c)) if c else None
        return median_ms(c) / f["ms"] if c and f else None
    return {"id": rec["id"], "shape": sh, "best": best, "best_vs_floor": over(best),
            "persistent": persistent, "persistent_vs_floor": over(persistent),
            "best_16bit_cudnn": cudnn16, "floors": floors, "cudnn16_vs_floor": over(cudnn16),
            "ours": _name(ours) if ours else None,
            "ours_vs_cudnn16": candidates_ratio(cudnn16, ours),
            "speedup_vs_cudnn16": candidates_ratio(cudnn16, best),
            "persistent_vs_cudnn16": candidates_ratio(cudnn16, persistent),
            "torch_best": tb, "speedup_vs_torch_best":
                tb["ms"] / replay_ms(best) if tb and replay_ms(best) else None,
            "torch_fp8": peer, "speedup_vs_torch_fp8":
                peer["ms"] / replay_ms(best) if peer.get("ms") and replay_ms(best) else None}


def summarise(records: list[dict], runs: list[dict]) -> dict:
    """The shapes that ran the 8-bit engines in a session that measured the floor; a run
    before the floor (and the persistent kernel) has none: its rows would read every
    engine against nothing and call a kernel that never ran 'none verified'."""
    by_session = {r["session"]: r for r in runs}
    measured = [(r, by_session.get(r.get("session"))) for r in records if "engine" in r]
    rows = [shape_row(r, run) for r, run in measured if (run or {}).get("engine_floor")]
    return {"shapes": rows, "without_floor": len(records) - len(rows), "rules": rules(rows)}


def rules(rows: list[dict]) -> list[dict]:
    """Each of the persistent kernel's rules (:data:`MAX_HIDDEN` and after) over the rows of
    hidden size up to MAX_HIDDEN: what it asks, the shapes it applies to and those that miss
    it, each with its figure (None, with the reason: nothing of ours verified there, or no
    ratio of its time and cuDNN's on one basis). The floor's rule applies where the fastest
    has a floor, the FP8 peer's where the peer ran and the fastest has a replay; the gain's
    where cuDNN's best is far from its floor."""
    rows = [r for r in rows if r["shape"]["hidden"] <= MAX_HIDDEN]

    def rule(what, applies, value, ok, odd=lambda v: False):
        on = [r for r in rows if applies(r)]

        def entry(r):
            return {"id": r["id"], "shape": r["shape"], "value": value(r),
                    "why": None if value(r) is not None else "none of ours verified"
                    if r["ours"] is None else "no ratio on one basis"}
        return {"rule": what, "shapes": len(on),
                "misses": [entry(r) for r in on if value(r) is None or not ok(value(r))],
                "odd": [entry(r) for r in on if value(r) is not None and odd(value(r))]}
    return [
        rule("our fastest (GEMM engine or persistent kernel) at least as fast as cuDNN's "
             "best 16-bit", lambda r: r["best_16bit_cudnn"], lambda r: r["ours_vs_cudnn16"],
             lambda v: v >= 1.0),
        rule(f"the fastest verified within {FLOOR_LIMIT:g}x its floor",
             lambda r: r["best_vs_floor"] is not None, lambda r: r["best_vs_floor"],
             lambda v: v <= FLOOR_LIMIT, odd=lambda v: v < 1.0),
        rule(f"where cuDNN's best is more than {FAR:g}x its 16-bit floor, ours at least "
             f"{GAIN:g}x as fast as it", lambda r: (r["cudnn16_vs_floor"] or 0) > FAR,
             lambda r: r["ours_vs_cudnn16"], lambda v: v >= GAIN),
        rule("the fastest verified at least as fast as PyTorch's FP8 peer",
             lambda r: r["speedup_vs_torch_fp8"] is not None,
             lambda r: r["speedup_vs_torch_fp8"], lambda v: v >= 1.0)]


def _rules_text(found: list[dict]) -> list[str]:
    """One line a rule: at how many of its shapes it holds, where not, by how much (three
    decimals: a miss within 0.0005 of its threshold still prints as the threshold, listed
    as a miss), and the floor's rule, where a time lies below its floor (the floor's model
    does not hold there)."""
    def listed(entries):
        return "; ".join(
            f"{m['shape']['cell']} {m['shape']['seq_length']}, {m['shape']['layers']}, "
            f"{m['shape']['hidden']}, {m['shape']['batch']} "
            f"({figure(m['value'], '.3f') + 'x' if m['value'] is not None else m['why']})"
            for m in entries)
    out = []
    for r in found:
        if not r["shapes"]:
            continue
        held = r["shapes"] - len(r["misses"])
        out.append(f"- {r['rule']}: at {held} of {r['shapes']}"
                   + (f"; not at {listed(r['misses'])}" if r["misses"] else "")
                   + (f"; below its floor at {listed(r['odd'])}" if r["odd"] else ""))
    return out


def _cudnn_text(r: dict) -> str:
    """cuDNN's best 16-bit time and its ratio to the 16-bit floor (which rule 3 reads)."""
    c = r["best_16bit_cudnn"]
    if not c or not c.get("timing"):
        return ""
    ratio = r["cudnn16_vs_floor"]
    return f"{median_ms(c):.4f}" + (f" ({ratio:.2f})" if ratio is not None else "")


def _floor_text(f: dict | None) -> str:
    """The floor, its range where the run measured quartiles, and what sets it."""
    if not f:
        return ""
    r = f.get("ms_range")
    return f"{f['ms']:.4f} ({f'{r[0]:.4f}-{r[1]:.4f}, ' if r else ''}{f['bound']})"


def markdown(s: dict) -> str:
    """The section of bench.md; where no shape has a floor, one paragraph saying so (none
    for a run without records)."""
    if not s["shapes"]:
        n = s.get("without_floor") or 0
        return "" if not n else (
            "## Against the floor\n\nNo run of this benchmark measured the floor (the "
            "barrier-and-read microbenchmark and the 8-bit engines' GEMM rates it is computed "
            f"from): its {n} shape{'s stand' if n != 1 else ' stands'} without one here. A benchmark "
            "that runs the engines measures it (`python -m cudnn_rnn.bench`, `make bench`).\n")
    out = ["## Every engine against the floor", "",
           "Per shape, the fastest verified configuration of all (cuDNN's, the GEMM engine's, "
           "the persistent kernel's) and the persistent kernel's best, each against the "
           "shape's floor in its precision: layer 0's input GEMM at the measured dense rate "
           "plus, per round (T + L - 1 for a unidirectional stack), the larger of the round's "
           "products at the dense rate and the measured barrier with every CTA reading the "
           "round's state (16-bit or 8-bit); '(state read)' or '(products)' says which sets "
           "it. Where a run measured the cluster exchange and one layer's recurrent weights "
           "fit a cluster of multiprocessors a direction, the floor is the lower of that and "
           "the cluster floor: the round's products at the cluster's share of the dense rate "
           "or the measured cluster barrier with every CTA's share of the state stored into "
           "each mate, whichever is larger ('(cluster products)' or '(cluster exchange)'). "
           "PyTorch's FP8 peer is torch._scaled_mm E4M3 GEMMs with torch.compile'd gate "
           "math in a CUDA graph, verified against float64 like every candidate. Times are "
           "graph replays: median ms (interquartile range, n = repeats).", "",
           "| shape | fastest verified | ms | x floor | persistent kernel | ms | x floor | "
           "x best 16-bit cuDNN | cuDNN's best 16-bit ms (x its floor) | floor 16-bit | "
           "floor 8-bit (INT8) | PyTorch's best | x it | PyTorch FP8 peer | x it |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in s["shapes"]:
        sh, b, p, tb, peer = (r["shape"], r["best"], r["persistent"], r["torch_best"],
                              r["torch_fp8"])
        out.append(
            f"| {sh['cell']} {sh['seq_length']}, {sh['layers']}, {sh['hidden']}, "
            f"{sh['batch']} | {_name(b) if b else 'none verified'} | "
            f"{timed(b)} | {figure(r['best_vs_floor'])} | "
            f"{_name(p) if p else 'none verified'} | {timed(p)} | "
            f"{figure(r['persistent_vs_floor'])} | {figure(r['persistent_vs_cudnn16'])} | "
            f"{_cudnn_text(r)} | "
            f"{_floor_text(r['floors']['16-bit'])} | {_floor_text(r['floors']['int8'])} | "
            f"{(tb['variant'] + ' ' + figure(tb['ms'], '.4f')) if tb else ''} | "
            f"{figure(r['speedup_vs_torch_best'])} | "
            f"{figure(peer.get('ms'), '.4f') if peer.get('ms') else peer.get('skipped', '')} | "
            f"{figure(r['speedup_vs_torch_fp8'])} |")
    lines = _rules_text(s["rules"])
    if lines:
        out += ["", f"The persistent kernel's targets (its issue's rules) at the shapes of "
                    f"hidden size up to {MAX_HIDDEN}, from this run's medians; 'ours' is the "
                    f"fastest of the GEMM engine's and the persistent kernel's; a figure is a "
                    f"time over the floor (lower is better) or a speed-up (higher is "
                    f"better):", ""] + lines
    return "\n".join(out) + "\n"
