"""``python -m cudnn_rnn.probe``: the support matrix of this GPU and this cuDNN.

Every cell of a probe spec (``probes/default.toml`` unless ``--spec``) walks the
RNN_example stages in a worker process. Failing cells record the call, status
and cuDNN's reason; passing cells are checked against the float64 reference and
only then timed (medians of ``--reps`` CUDA-event timed calls; TFLOPS by the
sample's formula: matrices-per-cell × 2 × directions × hidden² × seqLength ×
miniBatch × layers per pass; speed-ups against the FP32 baseline FLOAT/FLOAT/FMA/STANDARD
of the same cell mode and shape, measured in the same run). Records go to
``runs/<gpu>-cudnn<version>-<key>/<spec>-<key>/<spec>.jsonl`` (see
:mod:`cudnn_rnn.matrix.runs`) as each cell finishes, with the run's identity and provenance beside it in ``<spec>.run.json``;
running again continues a run of the same identity only. Without a GPU only the
descriptor stages run; the rest are recorded as skipped.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time
from collections import Counter
from pathlib import Path

from tabulate import tabulate

from cudnn_rnn.bindings.enums import RNNAlgo
from cudnn_rnn.cli import BadInput, Once, OneLineParser, positive_float, positive_int, run_main
from cudnn_rnn.matrix import (baseline, cells, provenance, runs, spec as specs, variants,
                              warmup, writer_lock)
from cudnn_rnn.matrix.ahead import OWN_WORKER_DEPTH, Order, Schedule
from cudnn_rnn.matrix.beside import Alone, Beside
from cudnn_rnn.matrix.progress import Progress
from cudnn_rnn.matrix.record import (OUTCOME_SHORT, RUN_SCHEMA, TIMED_KINDS, Record,
                                     add_speedup, max_error, ranked_timing, write_json)
from cudnn_rnn.matrix.loadable import library_survives
from cudnn_rnn.matrix.worker import Worker, WorkerStartFailed, same_setup, start_worker
from cudnn_rnn.reporting.grid import DESCRIPTOR_ONLY, OUTCOME_WORDS, outcome_words
from cudnn_rnn.reporting.load import load as load_results

FILTER_FLAGS = {"dtype": "data_type", "math_prec": "math_prec", "math_type": "math_type",
                "algo": "algo", "cell": "cell", "direction": "direction",
                "input_mode": "input_mode", "bias_mode": "bias_mode", "proj_size": "proj_size",
                "layout": "layout", "seq_length": "seq_length", "layers": "layers",
                "hidden": "hidden", "batch": "batch", "lengths": "lengths"}


def build_parser() -> OneLineParser:
    p = OneLineParser(prog="cudnn_rnn.probe", description=__doc__.splitlines()[0])
    p.add_argument("--spec", default="default", help="probes/NAME.toml or a path (default: default)")
    for flag in FILTER_FLAGS:
        p.add_argument("--" + flag.replace("_", "-"), default=None, metavar="A,B", action=Once,
                       help="keep only these values (comma-separated)" if flag != "lengths" else
                       "keep only these lengths forms (comma-separated; a form's numbers are "
                       "colon-separated: equal, descending:MIN, random:MIN:SEED, list:L1:L2:...)")
    p.add_argument("--list", action="store_true", help="show the cells and run nothing")
    p.add_argument("--cudnn", default=None, help="path of the libcudnn to probe")
    runs.add_options(p, "the results file")
    p.add_argument("--reps", type=positive_int, default=20,
                   help="timed calls per measurement (median)")
    p.add_argument("--variant-reps", type=positive_int, default=5,
                   help="timed calls per measurement of a variant (a cell that changes one "
                        "axis of another; default 5): its speed is read against its base's")
    p.add_argument("--variant-kinds", type=timed_kinds, default=("forward_training",),
                   metavar="K,K", help="the calls a variant times (default forward_training, "
                   "the report's; 'all' for the four); every call is verified either way")
    p.add_argument("--no-time", action="store_true", help="statuses and verification, no timing")
    p.add_argument("--no-graphs", action="store_true",
                   help="time plain calls only (no CUDA-graph capture of the timed calls)")
    p.add_argument("--timeout", type=positive_float, default=300.0,
                   help="seconds per cell before TIMEOUT")
    p.add_argument("--no-device", action="store_true",
                   help="descriptor stages only, even with a GPU")
    p.add_argument("--report", action="store_true",
                   help="write the run's report (matrix.md, matrix.html, summary.json) beside "
                        "it (under reports/ where its folder holds another run's report)")
    return p


def timed_kinds(text: str) -> tuple:
    """``all`` or a comma-separated subset of the four timed calls, in their order."""
    if text.strip() == "all":
        return TIMED_KINDS
    names = {n.strip() for n in text.split(",") if n.strip()}
    unknown = sorted(names - set(TIMED_KINDS))
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"expected 'all' or some of {', '.join(TIMED_KINDS)}"
                         + (f", got {unknown[0]!r}" if unknown else ""))
    return tuple(k for k in TIMED_KINDS if k in names)


def plan(args) -> tuple:
    spec = specs.load(args.spec)
    options = {axis: "--" + flag.replace("_", "-") for flag, axis in FILTER_FLAGS.items()}
    filters = cells.parse_filters({axis: getattr(args, flag) for flag, axis in FILTER_FLAGS.items()},
                                  options)
    chosen = cells.select(spec.cells, filters)
    if not chosen:
        miss = cells.unmatched(spec.cells, filters)
        raise BadInput(f"no cell of spec {spec.name!r} passes the filters" + (
            f": its cells' {options[miss[0]]} values are {', '.join(miss[1])}" if miss else
            " together (each alone keeps some cells): widen one"))
    return spec, specs.with_baselines(chosen)


PHASE_WORDS = {"verify": "reference and compare",
               "builds_wait": "waiting for builds ahead under way before verifying"}


def summary(records: list, out=sys.stdout) -> None:
    counts = Counter(r["outcome"] for r in records)
    print(tabulate([(outcome_words(k) + (f" ({DESCRIPTOR_ONLY})" if k in OUTCOME_WORDS else ""),
                     v) for k, v in sorted(counts.items(), key=lambda kv: -kv[1])],
                   headers=("outcome", "cells")), file=out)
    failures = Counter((r.get("failed_call") or "-", r.get("status") or "-",
                        (r.get("reason") or "")[:70]) for r in records
                       if r["outcome"] not in ("OK", "SKIPPED"))
    if failures:
        print("\nwhere the failing cells stop (call, status, cuDNN's reason):", file=out)
        print(tabulate([(*k, v) for k, v in failures.most_common(12)],
                       headers=("call", "status", "reason", "cells")), file=out)
    stage_time, phase_time = Counter(), Counter()
    for r in records:
        stage_time.update(r.get("stage_s") or {})
        phase_time.update(r.get("phase_s") or {})
    if stage_time:
        spent = sorted({**{f"stage {k}": v for k, v in stage_time.items()},
                        **{f"{k} ({PHASE_WORDS.get(k, 'timed calls')})": v
                           for k, v in phase_time.items()}}.items(), key=lambda kv: -kv[1])
        print("\nwhere the time went (seconds, all cells): " +
              ", ".join(f"{k} {v:.1f}" for k, v in spent[:8]), file=out)
    timed = [r for r in records if r["outcome"] == "OK" and r.get("timings")]
    if timed:
        timed.sort(key=lambda r: -(r.get("speedup") or {}).get("forward_training", 0))
        rows = []
        for r in timed[:15]:
            t, sp = r["timings"], r.get("speedup") or {}
            s = r["shape"]
            rows.append((r["data_type"], r["math_prec"], r["math_type"], r["algo"], r["cell"],
                         f"{s['seq_length']}x{s['layers']}x{s['hidden']}x{s['batch']}",
                         *_ranked(r, "forward_training"), t["forward_training"]["median_ms"],
                         sp.get("forward_training"), sp.get("forward_inference"),
                         max_error(r)))
        print(f"\nfastest verified cells (forward training; speed-up over {baseline.LABEL}):",
              file=out)
        print(tabulate(rows, headers=("data", "prec", "math", "algo", "cell", "TxLxHxB", "fwd ms",
                                      "as", "TFLOPS", "plain ms", "x fwd", "x inf", "max err"),
                       floatfmt=".4g"), file=out)


def _ranked(rec: dict, kind: str) -> tuple:
    """(median ms, graph|plain, TFLOPS) of the timing a record is ranked by."""
    t, how = ranked_timing(rec, kind)
    return t["median_ms"], how, t["tflops"]


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    runs.check_options(args)
    if args.list and (args.report or args.resume or args.overwrite):
        given = next(o for o, on in (("--report", args.report), ("--resume", args.resume),
                                     ("--overwrite", args.overwrite)) if on)
        raise BadInput(f"--list runs nothing, so there is no run to {given}: drop one of them")
    spec, cells = plan(args)
    if args.list:
        rows = [(i + 1, c.block, "baseline" if c.implicit else "variant" if c.base else "", c.id)
                for i, c in enumerate(cells)]
        print(tabulate(rows, headers=("#", "block", "", "cell")))
        planned = sum(c.base is None for c in cells)
        print(f"{len(cells)} cells in spec {spec.name!r} ({spec.path})"
              + (f": {planned} cells and {len(cells) - planned} variants (each run only if the "
                 "cell it varies gets past cudnnSetRNNDescriptor_v8)" if planned < len(cells)
                 else ""))
        return 0
    library_survives(args.cudnn)  # before the output folder is made
    # cells that differ only in math, precision or algorithm draw the same values and share
    # one float64 reference (matrix/references.py): keep the last few sets of values (a data
    # type's four cells, twice over) and every reference the device budget holds (a layout
    # variant comes long after the cells whose reference it shares)
    options = {"reps": args.reps, "variant_reps": min(args.variant_reps, args.reps),
               "variant_kinds": args.variant_kinds,
               "time": not args.no_time, "no_device": args.no_device,
               "graphs": not args.no_graphs, "reuse_values": True, "values_cache_size": 8,
               "reference_cache_size": 512, "reference_device_bytes": "auto",
               "beside": Beside(mp.get_context("spawn"))}  # a PERSIST_DYNAMIC worker's
    worker, info = start_worker(args.cudnn, options)
    workers = [worker]  # and the PERSIST_DYNAMIC cells' own, where _run starts one
    try:  # the output folder made once the library loaded: a refused library leaves none
        out = runs.output_dir(args.out) if args.out is not None else None
        return _run(args, argv, spec, cells, out, workers, info)
    finally:
        for w in workers:
            w.close()
        writer_lock.release_all()  # the run folder's, taken by runs.open_run


def _builds_worker(worker: Worker, workers: list) -> Worker:
    """The worker the PERSIST_DYNAMIC cells go to: one of their own, whose builders compile
    beside every other cell (:mod:`cudnn_rnn.matrix.beside`; in ``workers``, which the caller
    closes); the one worker where a second does not start (said in a line) or finds another
    setup."""
    second = Worker(worker.cudnn_path, dict(worker.options,
                                            beside=worker.options["beside"].at(1)))
    workers.append(second)
    try:
        why = None if same_setup(second.start(), worker.info) else "it found another setup"
    except WorkerStartFailed as exc:
        why = f"it did not start: {exc}"
    if why is None:
        return second
    second.close(wait_s=0)
    print(f"PERSIST_DYNAMIC cells run in the one worker: a second was refused ({why})",
          file=sys.stderr)
    return worker


def _run(args, argv, spec, cells, out, workers, info) -> int:
    worker = workers[0]
    lib_info, dev_info = info["library"], info["device"]
    identity = runs.run_identity(
        runs.machine_identity(lib_info, dev_info, info["device_stages"]), spec.name, spec.sha256,
        {"reps": args.reps, "variant_reps": min(args.variant_reps, args.reps),
         "variant_kinds": list(args.variant_kinds),
         "time": not args.no_time, "graphs": not args.no_graphs})
    out_dir = out or runs.run_folder(runs.run_dir(identity))
    path = out_dir / f"{spec.name}.jsonl"
    meta_path = path.with_suffix(".run.json")
    resume, recorded = runs.open_run(path, meta_path, identity, args.overwrite,
                                     runs.read_json_dict, force=args.force)
    results = runs.open_records(path, resume)
    done = {r["id"]: Record.from_json(r) for r in results.existing}
    # a variant whose base is recorded without passing the RNN descriptor never runs
    todo = [c for c in cells if c.id not in done and not variants.gated_out(c, done)]
    device_line = (f"GPU {dev_info['gpu']} (compute capability {dev_info['compute_capability']}, "
                   f"driver {dev_info.get('driver_version')})" if info["device_stages"]
                   else f"no device stages: {dev_info.get('reason') or '--no-device'}; "
                        "descriptor stages only (a cell that passes them is recorded as "
                        "SKIPPED and shown as passed the descriptor stages, "
                        f"{OUTCOME_SHORT['SKIPPED']!r})")
    print(f"cuDNN {lib_info['cudnn_version']} from {lib_info['library_path']} "
          f"({lib_info['library_source']}); {device_line}")
    if out is None:
        others = runs.recorded_elsewhere(spec.name, identity, out_dir)
        if others:
            print(f"not resumed, left as they are: {'; '.join(others)}; this machine's run is "
                  f"{'continued' if done else 'new'}: {out_dir}")
    recorded_n = sum(c.id in done for c in cells)
    not_to_run = len(cells) - recorded_n - len(todo)
    planned = sum(c.base is None for c in cells)
    # variants wait for the cell each varies: they run only if it passes the RNN descriptor
    waiting = variants.by_base(todo)
    to_run = {c.id for c in todo}  # a variant of one of these waits for it to run
    undecided = sum(len(v) for b, v in waiting.items() if b in to_run)
    print(f"spec {spec.name!r}: {planned} cells"
          + (f" and {len(cells) - planned} variants (each run only if the cell it varies gets "
             "past cudnnSetRNNDescriptor_v8)" if len(cells) > planned else "")
          + f", {recorded_n} already recorded, "
          + (f"{not_to_run} variants not to run (their base was refused), " if not_to_run else "")
          + (f"up to {len(todo)} to run ({undecided} of them variants whose cell has not run "
             f"yet) -> {path}" if undecided else f"{len(todo)} to run -> {path}"))
    command_line = provenance.command("cudnn_rnn.probe", argv)
    run_info = provenance.collect(lib_info, dev_info, command_line)
    meta = recorded if resume and recorded else {}
    sessions = meta.get("sessions") if isinstance(meta.get("sessions"), list) else []
    sessions.append({"started": run_info["date"], "command": run_info["command"],
                     "commit": run_info["commit"], "cells_to_run": len(todo)})
    meta = {"schema": RUN_SCHEMA, "kind": "probe", "spec": spec.name, "spec_path": spec.path,
            "identity": identity, "provenance": run_info,
            "legacy_symbols": info["symbols"]["legacy"], "seed_replay": info.get("seed_replay"),
            "sessions": sessions, "complete": False}
    runs.write_meta(meta_path, meta, results)
    schedule = Schedule(todo) if info["device_stages"] else None  # PERSIST_DYNAMIC builds
    builds = worker  # the worker the PERSIST_DYNAMIC cells go to
    if schedule is not None and schedule.starting(0):
        builds = _builds_worker(worker, workers)
        if builds is not worker:  # builds no timed call waits for may run further ahead
            schedule.depth = OWN_WORKER_DEPTH
    running = [worker] if builds is worker else [worker, builds]  # the run's, not the refused
    if schedule is not None:  # the builders begin while CuPy's kernels compile
        builds.ahead(schedule.starting(0))
    if info["device_stages"] and todo:  # before the first timed call: compile side by side
        said = warmup.warm(f"probe-{spec.name}", dev_info,
                           warmup.cell_tasks(todo, args.cudnn, not args.no_graphs))
        if said:
            print(said)
    # the bar counts what will run: a variant leaves it when its base is refused
    progress = Progress(len(cells) - not_to_run, done=recorded_n, undecided=undecided)
    started = time.monotonic()
    interrupted = False
    suspects = set()  # named ahead to a worker that crashed or hung: built in their own cells
    ahead, moved = [], True  # the PERSIST_DYNAMIC cells named ahead; whether to work them out
    lost = None  # how the PERSIST_DYNAMIC cells' own worker ended between cells, for their notes
    # with a worker of their own, a PERSIST_DYNAMIC cell waiting for builds lets the others
    # go first (their builders, held, begin no new ones); in one worker nothing can go first
    held = builds.options["beside"] if builds is not worker else Alone()
    order = Order(todo, lambda c: builds.alive and held.builds_under_way() > 0,
                  lambda c: held.hold(c.id if c is not None else None),
                  lambda c: variants.gated_out(c, done))
    try:
        for _i, cell in order:
            if variants.gated_out(cell, done):  # its base did not pass the RNN descriptor
                continue
            dynamic = cell.config.algo == RNNAlgo.PERSIST_DYNAMIC
            ended = builds.revive() if builds is not worker else None
            if ended is not None:  # its builders may have ended it: none of theirs is trusted
                gone = [cid for cid, _cfg in ahead if cid not in done]
                suspects.update(gone)
                lost = (f"the PERSIST_DYNAMIC cells' worker ended between cells ({ended}); the "
                        "cells its builders had been named build in their own cells: "
                        + ", ".join(gone))
            if schedule is not None and (moved or dynamic or ended):  # else as before
                ahead, moved = schedule.starting(
                    order.dynamic_head(),
                    lambda c: c.id in suspects or variants.gated_out(c, done)), False
            builds.ahead(ahead)
            runner = builds if dynamic else worker
            rec = runner.run(cell, args.timeout)
            if lost and dynamic:
                rec.notes.append(lost)
                lost = None
            named = [cid for cid, _cfg in ahead if cid != cell.id and cid not in done]
            if rec.outcome in ("CRASH", "TIMEOUT") and named and runner is builds:
                suspects.update(named)
                moved = True  # and the fresh worker is named what is left
                rec.notes.append("the worker's builders had been named these cells ahead (each "
                                 "now builds in its own cell): " + ", ".join(named))
            add_speedup(rec, done)
            done[rec.id] = rec
            results.write(rec.as_json())
            progress.update(rec.outcome)
            if waiting.get(rec.id):
                if variants.gated_out(waiting[rec.id][0], done):
                    progress.leave_out(len(waiting[rec.id]))
                    moved = moved or any(v.config.algo == RNNAlgo.PERSIST_DYNAMIC
                                         for v in waiting[rec.id])  # named ones leave
                else:
                    progress.decide(len(waiting[rec.id]))
    except KeyboardInterrupt:
        interrupted = True
        for w in running:  # the cell it was on is lost either way: do not wait for it
            w.close(wait_s=0)
    finally:
        results.close()
        progress.finish()
    wall = time.monotonic() - started
    records = [done[c.id].as_json() for c in cells if c.id in done]
    gated = [c for c in cells if c.id not in done and variants.gated_out(c, done)]
    sessions[-1].update(finished=provenance.now(), wall_s=round(wall, 2),
                        workers_started=sum(w.started for w in running),
                        workers_lost=sum(w.lost for w in running),
                        worker_restarts=sum(w.restarts for w in running), interrupted=interrupted,
                        ran_ahead_of_builds=order.let_first,
                        persist_dynamic_worker=builds is not worker)
    meta.update(complete=len(records) + len(gated) == len(cells), cells=len(cells),
                not_run_base_refused=len(gated),
                counts=dict(Counter(r["outcome"] for r in records)))
    write_json(meta_path, meta)
    print()
    summary(records)
    if gated:
        print(f"\n{len(gated)} variants not run: the cell each varies did not get past "
              "cudnnSetRNNDescriptor_v8")
    print(f"\n{len(records)}/{len(cells) - len(gated)} cells recorded (variants that ran included) "
          f"in {path} ({wall:.1f} s this session; workers: "
          f"{sessions[-1]['workers_started']} started, {sessions[-1]['workers_lost']} lost to "
          "a crash, timeout or error" + ("; PERSIST_DYNAMIC cells in a worker of their own"
                                         if builds is not worker else "")
          + (f"; {order.let_first} cells ran ahead of PERSIST_DYNAMIC cells whose builds were "
             "under way" if order.let_first else "") + ")")
    if interrupted:
        print("interrupted: finished cells are kept; the same command continues the run",
              file=sys.stderr)
        return 130
    if args.report:
        from cudnn_rnn.reporting.matrix import foreign, run_name, write_report
        result = load_results(path)
        where, other = out_dir, foreign(out_dir, [path])
        if other:  # another run's report or records there: this one goes into reports/ there
            where = runs.output_dir(Path(out_dir) / "reports" / run_name(result), "--out")
            print(f"{out_dir} holds {other}; this run's report is written apart, in {where}",
                  file=sys.stderr)
        written = write_report(result, where, command_line)
        print(f"report of this run: {', '.join(str(w) for w in written)}")
    errors = [r for r in records if r["outcome"] == "ERROR"]
    if errors:
        print(f"{len(errors)} cells ended in an error of this tool (outcome ERROR, e.g. "
              f"{errors[0]['reason']}); please report it", file=sys.stderr)
        return 1
    return 0


def cli(argv=None) -> int:
    return run_main(main, argv, prog="cudnn_rnn.probe")


if __name__ == "__main__":
    sys.exit(cli())
