"""Two result sets side by side: cells whose status, reason or speed changed beyond noise."""
from __future__ import annotations

from tabulate import tabulate

from cudnn_rnn.matrix.record import TIMED_KINDS as KINDS
from cudnn_rnn.reporting.grid import outcome_words

MIN_CHANGE = 0.10  # a speed change below 10 % is never reported


def _spread(t: dict) -> float:
    return (t["q3_ms"] - t["q1_ms"]) / t["median_ms"] if t["median_ms"] else 0.0


def speed_change(a: dict, b: dict, kind: str) -> dict | None:
    """B's time over A's for one kind, if it moved beyond max(10 %, 3 x the larger IQR/median)."""
    ta, tb = (a.get("timings") or {}).get(kind), (b.get("timings") or {}).get(kind)
    if not ta or not tb:
        return None
    ratio = tb["median_ms"] / ta["median_ms"]
    noise = max(MIN_CHANGE, 3 * max(_spread(ta), _spread(tb)))
    if abs(ratio - 1) <= noise:
        return None
    return {"kind": kind, "a_ms": ta["median_ms"], "b_ms": tb["median_ms"], "ratio": round(ratio, 4),
            "noise": round(noise, 4)}


def compare(a, b) -> dict:
    ia, ib = a.by_id(), b.by_id()
    only_a = sorted(set(ia) - set(ib))
    only_b = sorted(set(ib) - set(ia))
    status, speed = [], []
    for cid in sorted(set(ia) & set(ib)):
        ra, rb = ia[cid], ib[cid]
        key = lambda r: (r["outcome"], r.get("failed_call"), r.get("status"), r.get("reason"))  # noqa: E731
        if key(ra) != key(rb):
            status.append({"id": cid, "a": _state(ra), "b": _state(rb)})
        for kind in KINDS:
            ch = speed_change(ra, rb, kind)
            if ch:
                speed.append({"id": cid, **ch})
    return {"a": a.label, "b": b.label, "a_paths": a.paths, "b_paths": b.paths,
            "a_runs": _runs(a), "b_runs": _runs(b),
            "common": len(set(ia) & set(ib)), "only_a": only_a, "only_b": only_b,
            "status_changes": status, "speed_changes": speed}


PROVENANCE = (("gpu", "GPU"), ("driver_version", "driver"), ("cudnn_version", "cuDNN"),
              ("library_path", "libcudnn"), ("commit", "commit"), ("date", "date"))


def _runs(result) -> list[dict]:
    """Each run a side reads: its records file and provenance (what each side's cells come
    from: GPU, driver, library, commit, date)."""
    return [{"file": f, "provenance": m.get("provenance") or {}} for f, m in result.runs]


def _provenance_rows(d: dict) -> list[tuple]:
    return [(side, f"`{run['file']}`",
             *(run["provenance"].get(k) or ("no GPU" if k == "gpu" else "") for k, _ in PROVENANCE))
            for side in ("A", "B") for run in d.get(f"{side.lower()}_runs") or []]


def _state(r: dict) -> str:
    s = outcome_words(r["outcome"])
    if r.get("failed_call"):
        s += f" at {r['failed_call']}"
    if r.get("reason"):
        s += f" ({r['reason'][:80]})"
    return s


def render(d: dict, report: dict) -> str:
    out = [f"# Result sets compared: A = {d['a']}, B = {d['b']}", "",
           f"A: `{', '.join(d['a_paths'])}`  ", f"B: `{', '.join(d['b_paths'])}`", "",
           f"Report: `{report['command']}` at `{report['commit']}`, {report['date']}.", "",
           "Runs read (each side's records, with their provenance):", "",
           tabulate(_provenance_rows(d), headers=("side", "records", *(w for _, w in PROVENANCE)),
                    tablefmt="github"), "",
           f"{d['common']} cells in both; {len(d['only_a'])} only in A, {len(d['only_b'])} only in B. "
           f"{len(d['status_changes'])} changed status or reason; {len(d['speed_changes'])} timings "
           f"moved beyond noise (more than max(10 %, 3 x the larger relative IQR)). The IQR measures "
           "the spread within each run; drift between two runs (clocks, other tenants of the "
           "machine) is not in it, so compare speeds within one run where it matters.", ""]
    if d["status_changes"]:
        groups: dict = {}
        for c in d["status_changes"]:
            groups.setdefault((c["a"], c["b"]), []).append(c["id"])
        rows = [(a, b, len(ids), f"`{ids[0]}`") for (a, b), ids in
                sorted(groups.items(), key=lambda kv: -len(kv[1]))]
        out += ["## Status or reason changed", "",
                tabulate(rows, headers=("A", "B", "cells", "example"), tablefmt="github"), ""]
    if d["speed_changes"]:
        ratios = sorted(c["ratio"] for c in d["speed_changes"])
        out += [f"Of the timings that moved, the median B/A is {ratios[len(ratios) // 2]:.2f} "
                f"(range {ratios[0]:.2f}-{ratios[-1]:.2f}); the {min(40, len(ratios))} largest moves "
                "are listed, all of them are in the JSON beside this file.", ""]
        rows = [(f"`{c['id']}`", c["kind"], f"{c['a_ms']:.4g}", f"{c['b_ms']:.4g}", f"{c['ratio']:.2f}",
                 f"{c['noise']:.2f}") for c in sorted(d["speed_changes"],
                                                      key=lambda c: -abs(c["ratio"] - 1))[:40]]
        out += ["## Speed changed beyond noise (B time / A time)", "",
                tabulate(rows, headers=("cell", "call", "A ms", "B ms", "B/A", "noise"),
                         tablefmt="github"), ""]
    if not d["status_changes"] and not d["speed_changes"]:
        out += ["No cell changed beyond noise.", ""]
    return "\n".join(out) + "\n"
