"""``python -m cudnn_rnn.bench`` (``make bench``): the fastest verified configuration of each
DeepBench-style shape, against true FP32, TF32, PyTorch's default and the GPU's dense GEMM rate.

The shapes and the search space are data (``probes/bench.toml``). For each shape every
candidate lives the probe cell's life in one worker process (stages, float64 verification
of outputs and gradients, then timing of ``objective`` only: medians of CUDA-event timed
calls, fewer repeats for slow calls), and PyTorch's default module is timed in the same
process. The dense FP16 and FP32 GEMM rates (cupy matmul) are measured at the start of
each run. Shapes run cheapest first, each written as one line of ``bench.jsonl`` in this
machine's run folder (``runs/...``, see :mod:`.runs`) as it finishes (kill-safe;
running again continues a run of the same identity only);
``--deadline`` stops before a shape that would start too late. At the end
:mod:`.reporting.bench` writes ``bench.json`` and ``bench.md`` beside it.
"""
from __future__ import annotations

import itertools
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from bindings.enums import DataType, MathType, RNNAlgo, RNNMode

from . import provenance, runs
from .cell import TIMED as CELL_TIMED
from .cli import BadInput, OneLineParser, positive_float, positive_int, run_main
from .config import RNNConfig
from .results import write_json
from .runs import content_key
from .spec import Cell, baseline_first, read_toml, spec_name

TIMED = tuple(name for name, _call in CELL_TIMED)
MAX_SHAPES = 10_000


class BenchSpecError(BadInput):
    """A malformed benchmark specification (one line, exit code 2)."""


@dataclass(frozen=True)
class BenchShape:
    group: str
    config: RNNConfig  # FLOAT/FLOAT/FMA/STANDARD at the shape; candidates replace the four

    @property
    def id(self) -> str:
        c = self.config
        return f"{c.cell.name}/T{c.seq_length}L{c.num_layers}H{c.hidden_size}B{c.mini_batch}"


@dataclass(frozen=True)
class BenchSpec:
    name: str
    description: str
    objective: str
    candidates: tuple  # of (DataType, DataType, MathType, RNNAlgo)
    shapes: tuple  # of BenchShape
    sha256: str  # of the parsed TOML: the spec's content, part of a run's identity


def _enum(where: str, enum, name):
    if not isinstance(name, str):
        raise BenchSpecError(f"{where}: expected a {enum.C_NAME} name, got {name!r}")
    try:
        return enum.parse(name)
    except ValueError as exc:
        raise BenchSpecError(f"{where}: {exc}") from None


def load_spec(path: str | Path = "bench") -> BenchSpec:
    """Read and check a benchmark spec; a bare name is looked up in probes/."""
    data, p = read_toml(path, BenchSpecError, "benchmark spec", "probes/bench.toml")
    return spec_from_dict(data, str(p))


def spec_from_dict(data: dict, where: str = "<bench spec>") -> BenchSpec:
    unknown = set(data) - {"name", "description", "objective", "candidates", "group"}
    if unknown:
        raise BenchSpecError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    objective = data.get("objective", "forward_inference")
    if not isinstance(objective, str) or objective not in TIMED:
        raise BenchSpecError(f"{where}: objective must be one of {', '.join(TIMED)}")
    cands = data.get("candidates")
    if not isinstance(cands, list) or not cands:
        raise BenchSpecError(f"{where}: 'candidates' must be a non-empty list of "
                             "[data type, math precision, math type, algorithm]")
    parsed = []
    for i, c in enumerate(cands):
        if not isinstance(c, list) or len(c) != 4 or not all(isinstance(v, str) for v in c):
            raise BenchSpecError(f"{where}: candidate {i + 1} must be four names, got {c!r}")
        parsed.append((_enum(where, DataType, c[0]), _enum(where, DataType, c[1]),
                       _enum(where, MathType, c[2]), _enum(where, RNNAlgo, c[3])))
    shapes = []
    groups = data.get("group")
    if not isinstance(groups, list) or not groups:
        raise BenchSpecError(f"{where}: needs at least one [[group]] of shapes")
    for g in groups:
        gw = f"{where}: group {g.get('name', '?')!r}" if isinstance(g, dict) else where
        if not isinstance(g, dict) or not isinstance(g.get("name"), str):
            raise BenchSpecError(f"{where}: every [[group]] needs a name")
        extra = set(g) - {"name", "cell", "layers", "hidden", "batch", "seq_length"}
        if extra:
            raise BenchSpecError(f"{gw}: unknown key(s) {', '.join(sorted(extra))}")
        axes = {}
        for key in ("cell", "layers", "hidden", "batch", "seq_length"):
            values = g.get(key)
            if not isinstance(values, list) or not values:
                raise BenchSpecError(f"{gw}: {key!r} must be a non-empty list")
            if key == "cell":
                values = [_enum(gw, RNNMode, v) for v in values]
            elif not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
                raise BenchSpecError(f"{gw}: {key!r} must list positive integers")
            axes[key] = values
        product = 1
        for values in axes.values():
            product *= len(values)
        if len(shapes) + product > MAX_SHAPES:
            raise BenchSpecError(f"{where}: more than {MAX_SHAPES} shapes; split the spec")
        for cell, layers, hidden, batch, seq in itertools.product(
                axes["cell"], axes["layers"], axes["hidden"], axes["batch"], axes["seq_length"]):
            try:
                config = RNNConfig(
                    seq_length=seq, num_layers=layers, hidden_size=hidden, mini_batch=batch,
                    cell=cell, data_type=DataType.FLOAT, math_prec=DataType.FLOAT,
                    math_type=MathType.FMA_MATH, algo=RNNAlgo.STANDARD)
            except ValueError as exc:
                raise BenchSpecError(f"{gw}: {exc}") from None
            shapes.append(BenchShape(g["name"], config))
    ids = [s.id for s in shapes]
    if len(set(ids)) != len(ids):
        raise BenchSpecError(f"{where}: a shape is listed twice")
    name = spec_name(data, where, BenchSpecError)
    description = data.get("description", "")
    if not isinstance(description, str):
        raise BenchSpecError(f"{where}: description must be a string")
    return BenchSpec(name, description, objective, tuple(parsed), tuple(shapes),
                     content_key(data))


def candidate_cells(shape: BenchShape, spec: BenchSpec) -> list[Cell]:
    """The shape's candidates, the FP32 baseline first (added when the space lacks it)."""
    return baseline_first(shape.config, spec.candidates, "bench")


def compact(rec: dict, objective: str) -> dict:
    """What the benchmark keeps of a cell record."""
    from .reporting.analysis import config_label, max_error
    t = (rec.get("timings") or {}).get(objective)
    return {"config": config_label(rec),
            "outcome": rec["outcome"], "status": rec.get("status"),
            "failed_stage": rec.get("failed_stage"), "failed_call": rec.get("failed_call"),
            "reason": rec.get("reason"), "timing": t,
            "tflops": t.get("tflops") if t else None, "max_error": max_error(rec),
            "tolerance": (rec.get("verification") or {}).get("tolerance"),
            "gradient_tolerance": (rec.get("verification") or {}).get("gradient_tolerance"),
            "implicit": bool(rec.get("implicit")), "duration_s": rec.get("duration_s"),
            "cell_id": rec["id"]}


def bench_shape(worker, shape: BenchShape, spec: BenchSpec, session: str, reps: int,
                timeout: float) -> dict:
    """Run one shape's candidates and PyTorch's default; one results line."""
    from .worker import torch_params
    started = time.perf_counter()
    cands = [compact(worker.run(c, timeout), spec.objective) for c in candidate_cells(shape, spec)]
    torch = worker.job("torch", torch_params(shape.config, False, reps) | {"budget_s": 0.3})
    verified = [c for c in cands if c["outcome"] == "OK" and c["timing"]]
    c = shape.config
    return {"id": shape.id, "outcome": "OK" if verified else "NONE_VERIFIED", "group": shape.group,
            "session": session, "objective": spec.objective,
            "shape": {"cell": c.cell.name, "seq_length": c.seq_length, "layers": c.num_layers,
                      "hidden": c.hidden_size, "batch": c.mini_batch, "input": c.input},
            "flop": c.flop_count(), "candidates": cands, "torch": torch,
            "duration_s": round(time.perf_counter() - started, 3)}


def gemm_sizes(shapes) -> list[dict]:
    """The dense 8192³ GEMMs, plus the two FP16 GEMMs an RNN forward is made of for every
    shape the FP16 target covers: the input GEMM over all steps (gates·hidden × seq·batch ×
    hidden) and one recurrent step's (gates·hidden × batch × hidden)."""
    from .gemm import DENSE
    from .reporting.bench import fp16_target
    parts = set()
    for s in shapes:
        c = s.config
        if fp16_target({"cell": c.cell.name, "hidden": c.hidden_size, "batch": c.mini_batch}):
            m, k = c.gates * c.hidden_size, c.hidden_size
            parts |= {(m, c.mini_batch, k), (m, c.seq_length * c.mini_batch, k)}
    return list(DENSE) + [{"dtype": "float16", "m": m, "n": n, "k": k} for m, n, k in sorted(parts)]


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
    from .gpu import NoGPU
    from .reporting import bench as bench_report
    from .worker import start_worker
    args = build_parser().parse_args(argv)
    if args.resume and args.overwrite:
        raise BadInput("--resume and --overwrite exclude each other")
    spec = load_spec(args.spec)
    shapes = [s for s in spec.shapes if not args.group or s.group in args.group]
    if not shapes:
        raise BadInput(f"no group named {', '.join(args.group)} in {spec.name} "
                       f"(groups: {', '.join(dict.fromkeys(s.group for s in spec.shapes))})")
    shapes.sort(key=lambda s: s.config.flop_count())  # cheapest first: a deadline cuts the costliest
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
        out_dir = out or runs.output_dir(runs.run_dir(identity), "the run folder")
        path, runs_path = out_dir / "bench.jsonl", out_dir / "bench.run.json"
        resume, recorded = runs.open_run(path, runs_path, identity, args.overwrite,
                                         _run_file_or_none)
        results = runs.open_records(path, resume, schema=bench_report.BENCH_RECORD,
                                    what="benchmark record")
        done = {r["id"] for r in results.existing}
        session = uuid.uuid4().hex[:12]
        prov = provenance.collect(info["library"], info["device"])
        earlier = recorded["runs"] if resume and recorded else []
        earlier.append({"session": session, "provenance": prov, "gemm": None, "spec": spec.name,
                        "deadline_s": args.deadline, "budget_s": args.budget, "reps": args.reps,
                        "spec_shapes": [s.id for s in shapes]})
        # the identity is on disk before the first record or measurement
        runs.write_meta(runs_path, {"kind": "bench", "identity": identity, "runs": earlier},
                        results)
        earlier[-1]["gemm"] = worker.job("gemm", {"sizes": gemm_sizes(shapes)})
        write_json(runs_path, {"kind": "bench", "identity": identity, "runs": earlier})
        todo = [s for s in shapes if s.id not in done]
        stopped = None
        with results:
            for i, shape in enumerate(todo):
                if args.deadline is not None and time.monotonic() - started > args.deadline:
                    stopped = f"deadline of {args.deadline:g} s reached; {len(todo) - i} shapes not run"
                    break
                rec = bench_shape(worker, shape, spec, session, args.reps, args.timeout)
                results.write(rec)
                best = bench_report.best(rec)
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


def identity_of(spec: BenchSpec, machine: dict, reps: int, budget: float) -> dict:
    """The identity of a benchmark run (see :mod:`.runs`): this machine, the spec's content
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
    from .reporting import bench as bench_report
    try:
        return bench_report.read_run_file(path) if path.exists() else None
    except BadInput:
        return None


def cli(argv=None) -> int:
    return run_main(main, argv, prog="cudnn_rnn.bench")


if __name__ == "__main__":
    sys.exit(cli())
