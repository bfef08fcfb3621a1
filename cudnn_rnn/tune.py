"""``python -m cudnn_rnn.tune --cell LSTM --seq 20 --layers 2 --hidden 512 --batch 64``

The fastest *verified* cuDNN configuration for one RNN shape. Every algorithm x data
type x math precision x math type that the precision family allows is run through
the probe's cell life (stages, float64 verification, then timing) in a worker
process; the verified candidates are ranked by forward-inference time (``--training``:
forward training + backward data + backward weights). Speed-ups are over true FP32
(FLOAT/FLOAT/FMA/STANDARD) of the same shape, measured in the same run.

Families: ``fp32`` true FP32 (FMA math); ``tf32`` FLOAT data with DEFAULT, TENSOR_OP
or TENSOR_OP_ALLOW_CONVERSION math (TF32 or FP16 conversion allowed); ``fp16`` HALF
data with FLOAT or HALF precision; ``bf16`` BFLOAT16 data with FLOAT precision;
``int8`` and ``fp8`` cuDNN's 8-bit settings (which its RNN API refuses) and the GEMM
engine's 8-bit candidates; ``any`` all of them.

For inference, the GEMM engine's candidates of the family (:mod:`cudnn_rnn.lowbit.candidates`:
the same RNN built from cuBLASLt GEMMs in FP32, TF32, FP16, BF16, and INT8 or FP8 on the
input GEMM, the recurrent GEMMs or both) are verified and timed in the same worker process
and ranked with cuDNN's (``--no-lowbit`` leaves them out).
"""
from __future__ import annotations

import json
import statistics
import sys
import time

from tabulate import tabulate

from cudnn_rnn.bindings.enums import DirectionMode, RNNMode
from cudnn_rnn.cli import BadInput, OneLineParser, enum_arg, positive_float, positive_int, run_main
from cudnn_rnn.compare.pytorch import torch_job
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.engine.timing import tflops
from cudnn_rnn.lowbit.configs import FAMILIES as LOWBIT_FAMILIES
from cudnn_rnn.lowbit.candidates import run_in
from cudnn_rnn.matrix import baseline, families
from cudnn_rnn.matrix.families import FAMILIES
from cudnn_rnn.matrix.bench import vs_torch_best
from cudnn_rnn.matrix.cells import Cell
from cudnn_rnn.matrix.record import (config_label, max_error, objective_basis, objective_ms,
                                     objective_replay_ms, objective_speedup)
from cudnn_rnn.matrix.spec import baseline_first

TRAINING_KINDS = ("forward_training", "backward_data", "backward_weights")


def search_space(family: str) -> list[tuple]:
    """(data type, math precision, math type, algorithm) candidates of a family."""
    try:
        return families.search_space(family)
    except KeyError:
        raise BadInput(f"unknown precision family {family!r} "
                       f"(choose from {', '.join(FAMILIES)})") from None


def candidate_cells(shape: RNNConfig, family: str) -> list[Cell]:
    """The candidates as probe cells, the FP32 baseline first (added if the family lacks it)."""
    return baseline_first(shape, search_space(family), "tune")


def _kinds(training: bool) -> tuple:
    return TRAINING_KINDS if training else ("forward_inference",)


def cost_ms(rec: dict, training: bool, plain: bool = False) -> float | None:
    """The objective's time (:func:`~cudnn_rnn.matrix.record.objective_ms`)."""
    return objective_ms(rec, _kinds(training), plain)


def basis(rec: dict, training: bool) -> str:
    """How the objective was timed (:func:`~cudnn_rnn.matrix.record.objective_basis`)."""
    return objective_basis(rec, _kinds(training))


def replay_ms(rec: dict, training: bool) -> float | None:
    """The objective's time in CUDA-graph replays; None unless every call was captured."""
    return objective_replay_ms(rec, _kinds(training))


def rank(records: list, training: bool, include_baseline: bool = True) -> list[dict]:
    """Verified (OK) records, fastest first; ties broken by id for a stable order."""
    ok = [r for r in records if r["outcome"] == "OK" and cost_ms(r, training) is not None
          and (include_baseline or not r.get("implicit"))]
    return sorted(ok, key=lambda r: (cost_ms(r, training), r["id"]))


def _fastest_plain(rows: list) -> dict | None:
    """The row fastest by plain calls: what a user who does not capture graphs deploys,
    and what PyTorch's eager default is fairly compared with."""
    timed = [r for r in rows if r.get("plain_ms") is not None]
    return min(timed, key=lambda r: (r["plain_ms"], r["id"])) if timed else None


def label(rec: dict) -> str:
    """A candidate as tables show it: cuDNN's DATA/PREC/MATH/ALGO, or the engine's label."""
    return rec["label"] if rec.get("engine") else config_label(rec)


def summarise(records: list, training: bool, torch_result: dict | None = None) -> dict:
    base = next((r for r in records if not r.get("engine") and baseline.is_baseline(r)), None)
    base = base if base and base["outcome"] == "OK" else None
    ranked = rank(records, training, include_baseline=True)
    rows = []
    for r in ranked:
        ms = cost_ms(r, training)
        vs_best, best_variant = vs_torch_best(torch_result, replay_ms(r, training),
                                              cost_ms(r, training, True))
        flop = r["flop"] * (len(TRAINING_KINDS) if training else 1)
        rows.append({"id": r["id"], "config": label(r),
                     "ms": ms, "basis": basis(r, training), "plain_ms": cost_ms(r, training, True),
                     "graph_refused": r.get("graph_refused"), "tflops": tflops(flop, ms),
                     "max_error": max_error(r),
                     "speedup_fp32": objective_speedup(base, r, _kinds(training)),
                     "speedup_torch": (torch_result["ms"] / cost_ms(r, training, True))
                     if torch_result and torch_result.get("ms") else None,  # eager: plain calls
                     "speedup_torch_best": vs_best,
                     "torch_best_variant": (best_variant or {}).get("variant")})
    failed = [{"id": r["id"], "config": label(r), "outcome": r["outcome"],
               "call": r.get("failed_call"),
               "status": r.get("status"), "reason": r.get("reason")}
              for r in records if r["outcome"] != "OK"]
    return {"objective": "forward training + backward data + backward weights" if training
            else "forward inference", "ranked": rows, "winner": rows[0] if rows else None,
            "best_plain": _fastest_plain(rows),
            "not_verified_or_refused": failed, "torch": torch_result,
            "candidates": len(records)}


def _spread(values: list) -> dict:
    """Median and range of one figure over processes (None where a process lacks it)."""
    got = [v for v in values if v is not None]
    if len(got) < len(values):
        return {"median": None, "min": None, "max": None}
    return {"median": statistics.median(got), "min": min(got), "max": max(got)}


SPREAD_KEYS = ("ms", "plain_ms", "tflops", "speedup_fp32", "speedup_torch", "speedup_torch_best")


def merge(summaries: list[dict]) -> dict:
    """One summary from the summaries of several fresh processes (same shape, same
    candidates). A candidate is ranked only if it verified and was timed in every process;
    each figure is the median over processes, with its range in ``spread``. Speed-ups are
    medians of the ratios each process measured in itself, never ratios across processes.
    PyTorch's variants are merged the same way, and its best is the fastest median."""
    if len(summaries) == 1:
        return summaries[0]
    by_id = [{r["id"]: r for r in s["ranked"]} for s in summaries]
    everywhere = [i for i in by_id[0] if all(i in rows for rows in by_id[1:])]
    rows = []
    for i in everywhere:
        row = dict(by_id[0][i])
        row["basis"] = "/".join(sorted({rows[i]["basis"] for rows in by_id}))
        # the variant each process compared with (they may differ between processes)
        row["torch_best_variant"] = "/".join(sorted(
            {rows[i].get("torch_best_variant") for rows in by_id} - {None})) or None
        row["spread"] = {k: _spread([rows[i][k] for rows in by_id]) for k in SPREAD_KEYS}
        row.update({k: v["median"] for k, v in row["spread"].items()})
        rows.append(row)
    rows.sort(key=lambda r: (r["ms"], r["id"]))
    partly = sorted(set().union(*by_id) - set(everywhere))
    out = dict(summaries[-1], ranked=rows, winner=rows[0] if rows else None,
               best_plain=_fastest_plain(rows),
               processes=len(summaries), torch=_merge_torch([s["torch"] for s in summaries]),
               not_in_every_process=partly,
               not_verified_or_refused=[f for s in summaries for f in s["not_verified_or_refused"]])
    return out


def _merge_torch(results: list) -> dict | None:
    if not results or any(not r or "ms" not in r for r in results):
        return next((r for r in results if r and "ms" not in r), None)
    out = dict(results[0], spread={"ms": _spread([r["ms"] for r in results])})
    out["ms"] = out["spread"]["ms"]["median"]
    if all(r.get("variants") for r in results):
        variants = {}
        for name in results[0]["variants"]:
            ms = [r["variants"].get(name, {}).get("ms") for r in results]
            variants[name] = ({"ms": statistics.median(ms), "spread": {"ms": _spread(ms)}}
                              if None not in ms else
                              {"skipped": next(r["variants"][name].get("skipped", "not timed")
                                               for r in results if "ms" not in r["variants"][name])})
        timed = {k: v["ms"] for k, v in variants.items() if "ms" in v}
        out["variants"] = variants
        out["best"] = ({"variant": min(timed, key=timed.get), "ms": min(timed.values())}
                       if timed else None)
    return out


def _ms(r: dict, key: str, digits: int = 4) -> str:
    """A figure, with its range over processes where there were several."""
    if r.get(key) is None:
        return ""
    s = (r.get("spread") or {}).get(key)
    if s and s["min"] != s["max"]:
        return f"{r[key]:.{digits}f} ({s['min']:.{digits}f}-{s['max']:.{digits}f})"
    return f"{r[key]:.{digits}f}"


def torch_table(torch_result: dict | None) -> str:
    """PyTorch's variants (data type, eager or graph-captured) with their times."""
    variants = (torch_result or {}).get("variants")
    if not variants:
        return f"PyTorch: {(torch_result or {}).get('skipped', 'not compared')}"
    best = (torch_result.get("best") or {}).get("variant")
    rows = [(name + (" (best)" if name == best else "") + (" (default)" if name == "float32 eager"
                                                          else ""),
             _ms(v, "ms") or v.get("skipped", "")) for name, v in variants.items()]
    return tabulate(rows, headers=("PyTorch module", "ms"))


def table(summary: dict) -> str:
    rows = [(i + 1, r["config"], _ms(r, "ms"), r.get("basis") or "plain",
             _ms(r, "plain_ms"), f"{r['tflops']:.2f}",
             "" if r["max_error"] is None else f"{r['max_error']:.1e}",
             _ms(r, "speedup_fp32", 2), _ms(r, "speedup_torch", 2),
             _ms(r, "speedup_torch_best", 2))
            for i, r in enumerate(summary["ranked"])]
    return tabulate(rows, headers=("#", "data/prec/math/algo", "ms", "timed as", "plain ms",
                                   "TFLOPS", "max err", "x FP32", "x torch", "x torch best"))


def not_ranked(summary: dict) -> str:
    """The candidates that were refused or did not verify, one line per distinct answer
    (the call, status and reason), with the configurations that got it."""
    groups: dict = {}
    for f in summary["not_verified_or_refused"]:
        key = (f["outcome"], f.get("call"), f.get("status"), f.get("reason"))
        groups.setdefault(key, []).append(f.get("config") or f["id"])
    lines = [f"\nnot ranked ({len(summary['not_verified_or_refused'])}):"] if groups else []
    for (outcome, call, status, reason), configs in groups.items():
        shown = ", ".join(configs[:4]) + (f" and {len(configs) - 4} more" if len(configs) > 4 else "")
        lines.append(f"  {outcome}: {call or '?'} -> {status or '?'}"
                     + (f" ({reason})" if reason else "") + f": {shown}")
    return "\n".join(lines)


def build_parser() -> OneLineParser:
    p = OneLineParser(prog="cudnn_rnn.tune", description=__doc__.splitlines()[0])
    p.add_argument("--cell", required=True, type=enum_arg(RNNMode))
    p.add_argument("--seq", type=positive_int, default=20)
    p.add_argument("--layers", type=positive_int, default=1)
    p.add_argument("--hidden", type=positive_int, required=True)
    p.add_argument("--batch", type=positive_int, required=True)
    p.add_argument("--input-size", type=positive_int, default=None)
    p.add_argument("--bidirectional", action="store_true")
    p.add_argument("--precision", default="any", choices=list(FAMILIES))
    p.add_argument("--no-lowbit", action="store_true",
                   help="leave out the GEMM engine's candidates (cuDNN's only)")
    p.add_argument("--training", action="store_true", help="rank by a training step")
    p.add_argument("--reps", type=positive_int, default=20, help="most timed calls per measurement")
    p.add_argument("--budget", type=positive_float, default=0.3,
                   help="about this many seconds of device time per measurement")
    p.add_argument("--processes", type=positive_int, default=1,
                   help="tune in this many fresh processes; figures are medians over them, "
                        "with their range")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--no-graphs", action="store_true",
                   help="rank by plain calls only (no CUDA-graph capture)")
    p.add_argument("--lengths", default="equal",
                   help="the batch's sequence lengths: equal, descending:MIN, random:MIN:SEED "
                        "or list:L1:L2:... (one per sequence)")
    p.add_argument("--cudnn", default=None)
    p.add_argument("--timeout", type=positive_float, default=300.0,
                   help="seconds per candidate before TIMEOUT")
    return p


def _one_process(args, shape: RNNConfig, cells: list) -> tuple[dict, dict]:
    """Every candidate and PyTorch, in one fresh worker process: (summary, worker info)."""
    from cudnn_rnn.matrix.worker import start_worker
    worker, info = start_worker(args.cudnn, {
        "reps": args.reps, "time": True, "reuse_values": True, "budget_s": args.budget,
        "kinds": _kinds(args.training),
        "graphs": not args.no_graphs})
    if not info["device_stages"]:
        worker.close()
        from cudnn_rnn.engine.gpu import NoGPU
        raise NoGPU(f"the tuner needs a CUDA GPU: {info['device'].get('reason')}")
    try:
        records = [worker.run(c, args.timeout).as_json() for c in cells]
        torch_result = worker.job(*torch_job(shape, args.training, args.reps))
        if not (args.training or args.no_lowbit):
            records += run_in(worker, shape, [c.name for c in LOWBIT_FAMILIES[args.precision]],
                              args.reps, args.budget, not args.no_graphs, args.timeout)
    finally:
        worker.close()
    return summarise(records, args.training, torch_result), info


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        shape = RNNConfig(seq_length=args.seq, num_layers=args.layers, hidden_size=args.hidden,
                          mini_batch=args.batch, input_size=args.input_size, mode=args.cell,
                          lengths=args.lengths.strip(),
                          direction=DirectionMode.BIDIRECTIONAL if args.bidirectional
                          else DirectionMode.UNIDIRECTIONAL)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    cells = candidate_cells(shape, args.precision)
    started = time.monotonic()
    runs = [_one_process(args, shape, cells) for _ in range(args.processes)]
    summary = merge([s for s, _ in runs])
    info = runs[0][1]
    summary["processes"] = args.processes
    summary["shape"] = shape.as_record()["shape"] | {"cell": shape.mode.name,
                                                     "direction": shape.direction.name}
    summary["wall_s"] = round(time.monotonic() - started, 2)
    summary["library"] = info["library"]
    summary["device"] = info["device"]
    if args.json:
        print(json.dumps(summary, indent=1, default=str))
        return 0 if summary["winner"] else 1
    print(table(summary))
    print()
    print(torch_table(summary["torch"]))
    print(not_ranked(summary))
    w = summary["winner"]
    if w is None:
        print("no candidate verified against the float64 reference")
        return 1
    torch_result = summary["torch"]
    over = f" (medians over {args.processes} processes)" if args.processes > 1 else ""
    print(f"\nwinner ({summary['objective']}){over}: {w['config']}  {w['ms']:.4f} ms "
          f"({w['basis']}; plain calls {w['plain_ms']:.4f} ms), {w['tflops']:.2f} TFLOPS, "
          f"max error {w['max_error']:.1e}, {_x(w['speedup_fp32'])} true FP32"
          + (f", {_x(w['speedup_torch'])} PyTorch's default" if torch_result
             and "ms" in torch_result else
             f"; PyTorch: {(torch_result or {}).get('skipped', 'not compared')}")
          + (f", {_x(w['speedup_torch_best'])} PyTorch's best {w['torch_best_variant']}"
             if w.get("torch_best_variant") else "")
          + f"  [{summary['candidates']} candidates in {summary['wall_s']:.1f} s]")
    e = summary["best_plain"]
    if e and e["id"] != w["id"]:
        print(f"without graphs (plain calls): {e['config']}  {e['plain_ms']:.4f} ms, "
              f"{_x(e['speedup_torch'])} PyTorch's default")
    return 0


def _x(ratio: float | None) -> str:
    """A speed-up as printed; n/a where it could not be measured (e.g. the FP32 baseline
    did not verify in some process)."""
    return "x n/a" if ratio is None else f"x{ratio:.2f}"


def cli(argv=None) -> int:
    return run_main(main, argv, prog="cudnn_rnn.tune")


if __name__ == "__main__":
    sys.exit(cli())
