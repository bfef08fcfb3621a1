"""``python -m cudnn_rnn.bench`` (``make bench``): the fastest verified configuration of each
DeepBench-style shape, against true FP32, TF32, PyTorch's default and the GPU's dense GEMM rate.

The shapes and the search space are data (``probes/bench.toml``). For each shape every
candidate lives the probe cell's life in one worker process (stages, float64 verification
of outputs and gradients, then timing of ``objective`` only: medians of CUDA-event timed
calls, fewer repeats for slow calls), and PyTorch's default module is timed in the same
process. The dense FP16 and FP32 GEMM rates (cupy matmul) are measured at the start of
each run. Shapes run cheapest first, each written as one line of ``bench.jsonl`` in this
machine's run folder (``runs/...``, see :mod:`cudnn_rnn.matrix.runs`) as it finishes (kill-safe;
running again continues a run of the same identity only);
``--deadline`` stops before a shape that would start too late. At the end
:mod:`cudnn_rnn.reporting.bench` writes ``bench.json`` and ``bench.md`` beside it.
"""
from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

from cudnn_rnn.cli import BadInput, OneLineParser, positive_float, positive_int, run_main
from cudnn_rnn.compare.gemm import DENSE, gemm_rates
from cudnn_rnn.compare.pytorch import observed_configs, torch_job
from cudnn_rnn.compare.torch_fp8 import fp8_job
from cudnn_rnn.matrix import floor, provenance, runs
from cudnn_rnn.matrix.bench import (BENCH_RECORD, BenchSpec, bench_shape, candidate_cells,
                                    fp16_target, load_spec, read_run_file)
from cudnn_rnn.matrix.bench import best as shape_best
from cudnn_rnn.matrix.jobs import name_of
from cudnn_rnn.matrix.record import write_json
from cudnn_rnn.lowbit.candidates import run_in
from cudnn_rnn.lowbit.configs import parse
from cudnn_rnn.lowbit.gemm import rnn_shapes
from cudnn_rnn.lowbit.barrier import barrier_read
from cudnn_rnn.lowbit.exchange import cluster_exchange
from cudnn_rnn.lowbit.rates import gemm_rates as engine_rates


def gemm_sizes(shapes) -> list[dict]:
    """The dense 8192³ GEMMs, plus the two FP16 GEMMs an RNN forward is made of for every
    shape the FP16 target covers: the input GEMM over all steps (gates·hidden × seq·batch ×
    hidden) and one recurrent step's (gates·hidden × batch × hidden)."""
    parts = {(g.N, g.M, g.K) for s in shapes if _fp16_target(s.config)  # cupy: (m x k)(k x n)
             for g in rnn_shapes(s.config)}
    return list(DENSE) + [{"dtype": "float16", "m": m, "n": n, "k": k} for m, n, k in sorted(parts)]


def _fp16_target(c) -> bool:
    return fp16_target({"cell": c.mode.name, "hidden": c.hidden_size, "batch": c.mini_batch})


def engine_gemm_sizes(shapes) -> list:
    """(M, N, K) of the GEMM engine's two GEMMs at each shape whose FP16 target applies
    (input: T·B x gates·H x H; one step: B x gates·H x H), plus the seed shape's step, and
    the dense 8192^3 the floors are computed from."""
    return sorted({(g.M, g.N, g.K) for s in shapes if _fp16_target(s.config) or s.group == "seed"
                   for g in rnn_shapes(s.config)} | {floor.DENSE})


def build_parser() -> OneLineParser:
    p = OneLineParser(prog="cudnn_rnn.bench", description=__doc__.splitlines()[0])
    p.add_argument("--spec", default="bench", help="probes/NAME.toml or a path (default: bench)")
    p.add_argument("--group", action="append", default=None, help="only this group (repeatable)")
    runs.add_options(p, "bench.jsonl")
    p.add_argument("--deadline", type=positive_float, default=None,
                   help="seconds after which no new shape is started")
    p.add_argument("--reps", type=positive_int, default=20, help="most timed calls per measurement")
    p.add_argument("--budget", type=positive_float, default=0.3,
                   help="about this many seconds of device time per measurement (default 0.3)")
    p.add_argument("--list", action="store_true", help="show the shapes and run nothing")
    p.add_argument("--cudnn", default=None, help="path of the libcudnn to use")
    p.add_argument("--timeout", type=positive_float, default=300.0,
                   help="seconds per cell before TIMEOUT")
    return p


def main(argv=None) -> int:
    from cudnn_rnn.engine.gpu import NoGPU
    from cudnn_rnn.reporting import bench as bench_report
    from cudnn_rnn.matrix.worker import start_worker
    args = build_parser().parse_args(argv)
    runs.check_options(args)
    spec = load_spec(args.spec)
    shapes = [s for s in spec.shapes if not args.group or s.group in args.group]
    if not shapes:
        raise BadInput(f"no group named {', '.join(args.group)} in {spec.name} "
                       f"(groups: {', '.join(dict.fromkeys(s.group for s in spec.shapes))})")
    shapes.sort(key=lambda s: s.config.flop_count())  # cheapest first: a deadline cuts the costliest
    try:  # the GEMM engine is inference only
        engine_names = [parse(n).name for n in spec.lowbit] \
            if spec.objective == "forward_inference" else []
    except ValueError as exc:
        raise BadInput(f"{spec.name}: lowbit: {exc}") from None
    if args.list:
        for s in shapes:
            print(f"{s.group:20s} {s.id}  ({len(candidate_cells(s, spec))} candidates)")
        return 0
    out = runs.output_dir(args.out) if args.out is not None else None
    started = time.monotonic()
    worker, info = start_worker(args.cudnn, {"reps": args.reps, "time": True,
                                             "kinds": (spec.objective,), "budget_s": args.budget,
                                             "reuse_values": True,
                                             "reference_device_bytes": 16 << 30})
    try:
        if not info["device_stages"]:
            raise NoGPU(f"the benchmark needs a CUDA GPU: {info['device'].get('reason')}")
        identity = identity_of(spec, runs.machine_identity(info["library"], info["device"], True),
                               args.reps, args.budget)
        out_dir = out or runs.run_folder(runs.run_dir(identity))
        path, runs_path = out_dir / "bench.jsonl", out_dir / "bench.run.json"
        resume, recorded = runs.open_run(path, runs_path, identity, args.overwrite,
                                         _run_file_or_none, force=args.force)
        results = runs.open_records(path, resume, check=BENCH_RECORD,
                                    what="benchmark record")
        done = {r["id"] for r in results.existing}
        session = uuid.uuid4().hex[:12]
        prov = provenance.collect(info["library"], info["device"],
                                  provenance.command("cudnn_rnn.bench", argv))
        earlier = recorded["runs"] if resume and recorded else []
        earlier.append({"session": session, "provenance": prov, "gemm": None, "spec": spec.name,
                        "deadline_s": args.deadline, "budget_s": args.budget, "reps": args.reps,
                        "spec_shapes": [s.id for s in shapes]})
        # the identity is on disk before the first record or measurement
        runs.write_meta(runs_path, {"kind": "bench", "identity": identity, "runs": earlier},
                        results)
        earlier[-1]["gemm"] = worker.job(name_of(gemm_rates), {"sizes": gemm_sizes(shapes)})
        if engine_names:  # cuBLASLt's dense rates per precision, the 8-bit ones included,
            earlier[-1]["engine_gemm"] = worker.job(name_of(engine_rates),
                                                    {"sizes": engine_gemm_sizes(shapes)})
            # and the barrier with each state read the floors need, and the cluster
            # exchange of each state the cluster floors need
            dicts = [_shape_dict(s.config) for s in shapes]
            earlier[-1]["engine_floor"] = worker.job(name_of(barrier_read),
                                                     {"sizes": floor.sizes(dicts)})
            earlier[-1]["cluster_floor"] = worker.job(name_of(cluster_exchange),
                                                      {"sizes": floor.cluster_sizes(dicts)})
        write_json(runs_path, {"kind": "bench", "identity": identity, "runs": earlier})
        todo = [s for s in shapes if s.id not in done]
        # what PyTorch asks cuDNN for at each shape, per data type: one logged child process
        torch_cudnn = dict(zip((s.id for s in todo), observed_configs([s.config for s in todo])))
        stopped = None
        with results:
            for i, shape in enumerate(todo):
                if args.deadline is not None and time.monotonic() - started > args.deadline:
                    stopped = f"deadline of {args.deadline:g} s reached; {len(todo) - i} shapes not run"
                    break
                name, params = torch_job(shape.config, False, args.reps)
                rec = bench_shape(worker, shape, spec, session, args.timeout,
                                  (name, params | {"budget_s": 0.3}), torch_cudnn[shape.id],
                                  (lambda w, c=shape.config: run_in(
                                      w, c, engine_names, args.reps, args.budget, True,
                                      args.timeout)) if engine_names else None,
                                  fp8_job(shape.config, args.reps) if engine_names else None)
                results.write(rec)
                best = shape_best(rec)
                print(f"[{i + 1}/{len(todo)}] {shape.id:24s} {rec['duration_s']:6.1f} s  "
                      + (f"best {best['config']} {best['timing']['median_ms']:.4f} ms"
                         if best else "nothing verified"), flush=True)
        earlier[-1]["stopped"] = stopped
        earlier[-1]["wall_s"] = round(time.monotonic() - started, 1)
        write_json(runs_path, {"kind": "bench", "identity": identity, "runs": earlier})
    finally:
        worker.close()
    md = bench_report.write(out_dir, out_dir)
    print(f"wrote {md}" + (f" ({stopped})" if stopped else ""))
    return 0


def _shape_dict(c) -> dict:
    """A configuration's shape as the records write it (what :mod:`.matrix.floor` reads)."""
    return {"cell": c.mode.name, "seq_length": c.seq_length, "layers": c.num_layers,
            "hidden": c.hidden_size, "batch": c.mini_batch, "input": c.input_size}


def identity_of(spec: BenchSpec, machine: dict, reps: int, budget: float) -> dict:
    """The identity of a benchmark run (see :mod:`cudnn_rnn.matrix.runs`): this machine, the
    spec's content
    and the settings that change what is measured."""
    return runs.run_identity(machine, spec.name, spec.sha256,
                             {"reps": reps, "budget_s": budget, "objective": spec.objective})


def default_run_dir(machine: dict) -> Path:
    """This machine's folder of ``make bench`` (probes/bench.toml, default settings), where
    ``python -m cudnn_rnn.overhead --save`` puts its overhead.json."""
    defaults = build_parser()
    return runs.run_dir(identity_of(load_spec("bench"), machine, defaults.get_default("reps"),
                                    defaults.get_default("budget")))


def _run_file_or_none(path: Path) -> dict | None:
    try:
        return read_run_file(path) if path.exists() else None
    except BadInput:
        return None


def cli(argv=None) -> int:
    return run_main(main, argv, prog="cudnn_rnn.bench")


if __name__ == "__main__":
    sys.exit(cli())
