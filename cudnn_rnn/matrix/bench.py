"""The benchmark's data: its spec (``probes/bench.toml``), one shape's run, and the files a
run leaves (``bench.jsonl`` records, ``bench.run.json``, ``overhead.json``) with their checks.

A benchmark shape is one cell mode and size at FLOAT/FLOAT/FMA/STANDARD (the FP32
baseline); its candidates replace those four axes. Every candidate lives the probe cell's
life in the worker (:func:`cudnn_rnn.matrix.execute.run_cell`); a shape's record keeps of each
what :func:`compact` says, beside PyTorch's time. The command is :mod:`cudnn_rnn.bench`, the
report :mod:`cudnn_rnn.reporting.bench`.
"""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from pathlib import Path

from cudnn_rnn.bindings.enums import DataType, MathType, RNNAlgo, RNNMode
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.matrix import baseline
from cudnn_rnn.matrix.errors import BadInput
from cudnn_rnn.matrix.jsontypes import (ANY, BOOL, INT, NAME, NUM, POS_INT, POS_NUM, QUARTILES,
                                        SCALAR, STR, Dict, Either, List, Obj, Opt, Pred, problem)
from cudnn_rnn.matrix.record import (TIMED_KINDS, config_label, max_error, ranked_timing,
                                     same_basis_ratio)
from cudnn_rnn.matrix.runs import content_key, read_json_dict
from cudnn_rnn.matrix.cells import Cell
from cudnn_rnn.matrix.spec import BENCH_KEYS, baseline_first, other_kind, read_toml, spec_name

MAX_SHAPES = 10_000
GEMM_TARGET = 0.5  # of the FP16 target shapes: at least this fraction of the dense FP16 GEMM rate
TORCH_TARGET = 3.0  # at the seed's shape: at least this many times PyTorch's default module


PROVENANCE_KEYS = ("gpu", "compute_capability", "driver_version", "cuda_runtime_cudnn",
                   "cuda_runtime_cupy", "cupy", "cudnn_version", "library_path",
                   "library_source", "commit", "command", "date")


class BenchSpecError(BadInput):
    """A malformed benchmark specification (one line, exit code 2)."""


@dataclass(frozen=True)
class BenchShape:
    group: str
    config: RNNConfig  # the FP32 baseline at the shape; candidates replace its four axes

    @property
    def id(self) -> str:
        c = self.config
        return f"{c.mode.name}/T{c.seq_length}L{c.num_layers}H{c.hidden_size}B{c.mini_batch}"


@dataclass(frozen=True)
class BenchSpec:
    name: str
    description: str
    objective: str
    candidates: tuple  # of (DataType, DataType, MathType, RNNAlgo)
    shapes: tuple  # of BenchShape
    sha256: str  # of the parsed TOML: the spec's content, part of a run's identity
    lowbit: tuple = ()  # the GEMM engine's configurations (names; the command checks them)


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
    unknown = set(data) - BENCH_KEYS
    if unknown:
        raise BenchSpecError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}"
                             + other_kind(data, where, "benchmark"))
    objective = data.get("objective", "forward_inference")
    if not isinstance(objective, str) or objective not in TIMED_KINDS:
        raise BenchSpecError(f"{where}: objective must be one of {', '.join(TIMED_KINDS)}")
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
                config = baseline.of(RNNConfig(seq_length=seq, num_layers=layers,
                                               hidden_size=hidden, mini_batch=batch, mode=cell))
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
    lowbit = data.get("lowbit", [])
    if not isinstance(lowbit, list) or not all(isinstance(v, str) for v in lowbit):
        raise BenchSpecError(f"{where}: 'lowbit' must be a list of GEMM-engine configuration "
                             "names such as \"int8/both\"")
    return BenchSpec(name, description, objective, tuple(parsed), tuple(shapes),
                     content_key(data), tuple(lowbit))


def candidate_cells(shape: BenchShape, spec: BenchSpec) -> list[Cell]:
    """The shape's candidates, the FP32 baseline first (added when the space lacks it)."""
    return baseline_first(shape.config, spec.candidates, "bench")


def compact(rec: dict, objective: str) -> dict:
    """What the benchmark keeps of a cell record."""
    t, timed_as = ranked_timing(rec, objective)
    return {"config": config_label(rec), "timed_as": timed_as,
            "plain_timing": (rec.get("timings") or {}).get(objective),
            "graph_refused": (rec.get("graph_refused") or {}).get(objective),
            "outcome": rec["outcome"], "status": rec.get("status"),
            "failed_stage": rec.get("failed_stage"), "failed_call": rec.get("failed_call"),
            "reason": rec.get("reason"), "timing": t,
            "tflops": t.get("tflops") if t else None, "max_error": max_error(rec),
            "tolerance": (rec.get("verification") or {}).get("tolerance"),
            "gradient_tolerance": (rec.get("verification") or {}).get("gradient_tolerance"),
            "implicit": bool(rec.get("implicit")), "duration_s": rec.get("duration_s"),
            "cell_id": rec["id"]}


def compact_engine(rec: dict) -> dict:
    """What the benchmark keeps of an 8-bit engine's candidate (its forward inference)."""
    k = "forward_inference"
    t, timed_as = ranked_timing(rec, k)
    seen = [v for v in (rec.get("errors_seen") or {}).values() if v is not None]
    return {"config": rec["config"], "label": rec.get("label"),
            "format": rec.get("format"), "parts": rec.get("parts"), "outcome": rec["outcome"],
            "timing": t, "timed_as": timed_as, "plain_timing": (rec.get("timings") or {}).get(k),
            "graph_refused": (rec.get("graph_refused") or {}).get(k),
            "tflops": t.get("tflops") if t else None, "max_error": max_error(rec),
            "max_error_seen": max(seen) if seen else None, "bound": rec.get("bound"),
            "engine": rec.get("engine"), "settings": rec.get("settings"),
            "failed_call": rec.get("failed_call"), "status": rec.get("status"),
            "reason": rec.get("reason")}


def bench_shape(worker, shape: BenchShape, spec: BenchSpec, session: str, timeout: float,
                torch_job: tuple[str, dict], torch_cudnn: dict | None = None,
                run_lowbit=None, fp8_job: tuple[str, dict] | None = None) -> dict:
    """Run one shape's candidates, then ``torch_job`` (the job that times PyTorch's
    modules, as the command names it), ``run_lowbit(worker)`` (the records of the 8-bit
    engines' candidates, as the command runs them) and ``fp8_job`` (PyTorch's FP8 peer);
    one results line. ``torch_cudnn``: the cuDNN configuration PyTorch uses per data type
    at this shape (as cuDNN's API log showed it), kept beside PyTorch's times."""
    started = time.perf_counter()
    cands = [compact(worker.run(c, timeout).as_json(), spec.objective)
             for c in candidate_cells(shape, spec)]
    torch = worker.job(*torch_job)
    lowbit = None if run_lowbit is None else [compact_engine(r) for r in run_lowbit(worker)]
    if torch_cudnn is not None:
        torch["cudnn"] = torch_cudnn
    peer = None if fp8_job is None else worker.job(*fp8_job)
    verified = [c for c in cands if c["outcome"] == "OK" and c["timing"]]
    c = shape.config
    return {"id": shape.id, "outcome": "OK" if verified else "NONE_VERIFIED", "group": shape.group,
            "session": session, "objective": spec.objective,
            "shape": {"cell": c.mode.name, "seq_length": c.seq_length, "layers": c.num_layers,
                      "hidden": c.hidden_size, "batch": c.mini_batch, "input": c.input_size},
            "flop": c.flop_count(), "candidates": cands, "torch": torch,
            **({"engine": lowbit} if lowbit is not None else {}),
            **({"torch_fp8": peer} if peer is not None else {}),
            "duration_s": round(time.perf_counter() - started, 3)}


def torch_best(torch: dict | None, graph: bool) -> dict | None:
    """PyTorch's fastest variant of one kind, graph-captured or eager: ``{variant, ms}``."""
    timed = {k: v["ms"] for k, v in ((torch or {}).get("variants") or {}).items()
             if "ms" in v and k.endswith(" graph" if graph else " eager")}
    name = min(timed, key=timed.get) if timed else None
    return {"variant": name, "ms": timed[name]} if name else None


def vs_torch_best(torch: dict | None, replay_ms: float | None, plain_ms: float | None
                  ) -> tuple[float | None, dict | None]:
    """PyTorch's best over ours, like with like: its fastest graph-captured variant over our
    replays (``replay_ms``, given only where every call compared was captured), else its
    fastest eager variant over our plain calls. Returns (ratio, the variant compared)."""
    for ours, theirs in ((replay_ms, torch_best(torch, True)), (plain_ms, torch_best(torch, False))):
        if ours and theirs:
            return theirs["ms"] / ours, theirs
    return None, None


def fp16_target(shape: dict) -> bool:
    """The shapes of the FP16 target: LSTM with hidden ≥ 2048 and batch ≥ 128."""
    return shape["cell"] == "LSTM" and shape["hidden"] >= 2048 and shape["batch"] >= 128


def _config_name(v) -> bool:
    return isinstance(v, str) and len(v.split("/")) == 4


FULL_TIMING = Obj({"median_ms": POS_NUM, "q1_ms": NUM, "q3_ms": NUM, "reps": POS_INT,
                   "min_ms": NUM, "max_ms": NUM}, required={"median_ms", "q1_ms", "q3_ms", "reps"})
CANDIDATE = Obj({"config": Pred(_config_name, "DATA/PREC/MATH/ALGO"), "outcome": NAME,
                 "status": Opt(STR), "failed_stage": Opt(STR), "failed_call": Opt(STR),
                 "reason": Opt(STR), "timing": Opt(FULL_TIMING), "tflops": Opt(NUM),
                 "max_error": Opt(NUM), "tolerance": Opt(NUM), "gradient_tolerance": Opt(NUM),
                 "implicit": Opt(BOOL), "duration_s": Opt(NUM), "cell_id": Opt(STR),
                 "timed_as": Opt(NAME), "plain_timing": Opt(FULL_TIMING),
                 "graph_refused": Opt(STR)},
                required={"config", "outcome", "status", "failed_call", "reason", "timing",
                          "tflops", "max_error"})
ENGINE_CANDIDATE = Obj({"config": STR, "label": Opt(STR), "format": Opt(STR), "parts": Opt(STR),
                        "outcome": NAME, "timing": Opt(FULL_TIMING), "timed_as": Opt(NAME),
                        "plain_timing": Opt(FULL_TIMING), "graph_refused": Opt(STR),
                        "tflops": Opt(NUM), "max_error": Opt(NUM), "max_error_seen": Opt(NUM),
                        "bound": Opt(NUM), "failed_call": Opt(STR), "status": Opt(STR),
                        "reason": Opt(STR), "engine": Opt(STR), "settings": Opt(STR)},
                       required={"config", "outcome", "timing", "tflops", "max_error"})
SKIPPED = Obj({"skipped": STR}, required={"skipped"})  # a job that could not be done, and why
BENCH_RECORD = Obj({
    "id": STR, "outcome": NAME, "group": STR, "session": Opt(STR), "objective": Opt(STR),
    "shape": Obj({"cell": Pred(lambda v: v in RNNMode.__members__, "an RNN mode such as LSTM"),
                  "seq_length": POS_INT, "layers": POS_INT, "hidden": POS_INT, "batch": POS_INT,
                  "input": POS_INT},
                 required={"cell", "seq_length", "layers", "hidden", "batch"}),
    "flop": POS_INT, "candidates": List(CANDIDATE), "engine": Opt(List(ENGINE_CANDIDATE)),
    "torch_fp8": Opt(Dict(ANY)),
    "torch": Opt(Obj({"ms": Opt(POS_NUM), "q1_ms": Opt(NUM), "q3_ms": Opt(NUM),
                      "skipped": Opt(STR), "cudnn": Opt(Dict(STR)),
                      # each module variant's timing, or why PyTorch refused it
                      "variants": Opt(Dict(Either(
                          SKIPPED,
                          Obj({"ms": POS_NUM, "median_ms": POS_NUM, "q1_ms": NUM, "q3_ms": NUM,
                               "min_ms": NUM, "max_ms": NUM, "reps": POS_INT,
                               "errors": Opt(Dict(NUM))},  # against float64, verified
                              required={"ms"}))))})),
    "duration_s": Opt(NUM)}, required={"id", "outcome", "group", "shape", "flop", "candidates"})
PROVENANCE = Obj({k: SCALAR for k in PROVENANCE_KEYS}, required=PROVENANCE_KEYS)


def _per_round(fields: dict, required=()):
    """A floor's microbenchmark in a run (µs a round per state size), or why it was skipped."""
    return Opt(Either(SKIPPED, Obj({"per_round_us": Dict(POS_NUM),
                                    "per_round_spread_us": Opt(Dict(QUARTILES)), **fields},
                                   required={"per_round_us", *required})))


RUN = Obj({"session": STR, "provenance": PROVENANCE,
           "gemm": Opt(Obj({"rates": Dict(Obj({"tflops": POS_NUM, "tflops_q1": NUM,
                                               "tflops_q3": NUM, "compute_type": SCALAR},
                                              required={"tflops", "tflops_q1", "tflops_q3"})),
                            "skipped": Opt(STR)})),
           # the 8-bit engine's GEMM rates (a precision cuBLASLt refuses says why) and the
           # floor's barrier-and-read microbenchmark, or why the job was skipped
           "engine_gemm": Opt(Either(SKIPPED, Obj({
               "library": Opt(Dict(ANY)),
               "rates": Dict(Either(Obj({"refused": STR}, required={"refused"}),
                                    Obj({"tflops": NUM, "tflops_q1": NUM, "tflops_q3": NUM,
                                         "algorithm_workspace_bytes": Opt(INT),
                                         "timing": Opt(Dict(ANY))},
                                        required={"tflops", "tflops_q1", "tflops_q3"})))},
               required={"rates"}))),
           "engine_floor": _per_round({"ctas": POS_INT, "threads": POS_INT, "rounds": POS_INT,
                                       "repeats": POS_INT, "written": Opt(INT)}),
           # the cluster floor's exchange microbenchmark (lowbit/exchange.py)
           "cluster_floor": _per_round({"cluster": POS_INT, "sms": POS_INT, "met": Opt(BOOL),
                                        "on_chip_bytes_per_sm": POS_INT},
                                       ("cluster", "sms", "on_chip_bytes_per_sm")),
           "spec": Opt(STR), "deadline_s": Opt(NUM), "budget_s": Opt(NUM), "reps": Opt(INT),
           "spec_shapes": Opt(List(STR)), "stopped": Opt(STR), "wall_s": Opt(NUM)},
          required={"session", "provenance"})
RUN_FILE = Obj({"kind": STR, "identity": Opt(Dict(ANY)), "runs": List(RUN)}, required={"runs"})


def read_run_file(path: str | Path) -> dict:
    """``bench.run.json``, checked: ``{"identity": ..., "runs": [...]}`` (no runs when absent)."""
    p = Path(path)
    if not p.exists():
        return {"runs": []}
    data = read_json_dict(p)
    wrong = "not a JSON object" if data is None else problem(data, RUN_FILE, "the file")
    if wrong:
        raise BadInput(f"{p} is not a benchmark's bench.run.json ({wrong})")
    return data


def verified(rec: dict) -> list[dict]:
    return [c for c in rec["candidates"] if c["outcome"] == "OK" and c.get("timing")]


def median_ms(c: dict | None) -> float | None:
    return c["timing"]["median_ms"] if c and c.get("timing") else None


def plain_ms(c: dict | None) -> float | None:
    """A candidate's plain-call median (its ``timing`` in records from before the graphs)."""
    if not c:
        return None
    return c["plain_timing"]["median_ms"] if c.get("plain_timing") else median_ms(c)


def replay_ms(c: dict | None) -> float | None:
    """A candidate's CUDA-graph replay median; None where its call was not captured."""
    return median_ms(c) if c and c.get("timed_as") == "graph" else None


def candidates_ratio(a: dict | None, b: dict | None) -> float | None:
    """Candidate a's time over b's (:func:`~cudnn_rnn.matrix.record.same_basis_ratio`)."""
    return same_basis_ratio(replay_ms(a), plain_ms(a), replay_ms(b), plain_ms(b))


def best(rec: dict, where=lambda c: True) -> dict | None:
    """The fastest verified candidate of a shape record (that ``where`` accepts)."""
    ok = [c for c in verified(rec) if where(c)]
    return min(ok, key=lambda c: (median_ms(c), c["config"])) if ok else None
