"""The GEMM engine's candidates for one shape: each verified twice, then timed.

A candidate is a :class:`Config`: a float precision alone (fp32, tf32, fp16, bf16: the
control, which shows what the engine itself costs against cuDNN), or an 8-bit format
(INT8, FP8 E4M3) on a part of the GEMMs (``input``, ``recurrent`` or ``both``) with the
other GEMMs in :data:`REST`. For each, in one process and CUDA context
(:func:`run_configs`, a worker job):

1. weights U(-1/√H, 1/√H) and inputs U(-1, 1) drawn in float32 (so FP32 holds them
   exactly), and a second, independent *calibration batch*;
2. 8-bit scales from the calibration batch: max |x| of every GEMM's activation in a
   float64 run (:func:`cudnn_rnn.lowbit.model.calibrate`), weights per output channel
   (INT8) or per tensor (E4M3) (:func:`cudnn_rnn.lowbit.model.plan`);
3. one plain forward, compared with the float64 reference (cuBLAS DGEMM on the GPU) twice:
   on the original weights (``errors``: the whole error of the precision) and on the
   weights as the GEMMs see them (``errors_seen``: the rounding of activations and the
   arithmetic alone). Both must stay within :data:`BOUNDS` (relative Frobenius norm, as
   :func:`cudnn_rnn.check.verify.relative_error`) before anything is timed;
4. the forward captured in a CUDA graph by the mechanism cuDNN's calls use
   (:func:`cudnn_rnn.engine.capture.time_captured`): two plain forwards must write the same
   bytes and one replay the plain forward's, else the graph is refused with why;
5. medians of plain forwards and of replays (:func:`cudnn_rnn.engine.timing.time_call`).

Each candidate ends as one record (:func:`record`), shaped for the tuner's ranking: an
``outcome`` of OK, WRONG_RESULT or NOT_SUPPORTED (cuBLASLt's call and status, or the
engine's reason), ``timings``/``graph_timings`` of ``forward_inference``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from cudnn_rnn.bindings import cublaslt
from cudnn_rnn.bindings.cublaslt.errors import CublasLtError
from cudnn_rnn.check import reference
from cudnn_rnn.check.verify import relative_error
from cudnn_rnn.engine import capture, timing
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.engine.gpu import cupy_or_raise
from cudnn_rnn.lowbit import model, operands
from cudnn_rnn.lowbit.engine import Engine, Unsupported
from cudnn_rnn.matrix.jobs import job, name_of

REST = "fp16"  # the precision of an 8-bit candidate's GEMMs that are not 8-bit
# relative error bounds per precision (of the 8-bit part, for an 8-bit candidate): 3-5x
# the largest the float64 host model of the same arithmetic gives on the CPU test grid
# (INT8 1.9e-2, E4M3 5.6e-2 at T 20, L 2, H 64, B 16); FP16/BF16/TF32 as cuDNN's.
BOUNDS = {"fp32": 1e-5, "tf32": 5e-3, "fp16": 5e-3, "bf16": 3e-2, "int8": 6e-2, "e4m3": 1.5e-1}
OUTPUTS = ("y", "hy", "cy")


@dataclass(frozen=True)
class Config:
    """One candidate of the engine: ``precision`` for every GEMM, or ``fmt`` on ``parts``
    and :data:`REST` elsewhere."""
    precision: str = REST
    fmt: str | None = None
    parts: str | None = None

    @property
    def name(self) -> str:
        """e.g. ``fp16``, ``int8/both``, ``e4m3/input``."""
        return self.precision if self.fmt is None else f"{self.fmt}/{self.parts}"

    @property
    def bound(self) -> float:
        return BOUNDS[self.fmt or self.precision]

    def label(self) -> str:
        """How tables show it: ``cuBLASLt GEMMs int8/both (+fp16)``."""
        rest = "" if self.fmt is None or self.parts == "both" else f" (+{self.precision})"
        return f"cuBLASLt GEMMs {self.name}{rest}"


CONTROLS = tuple(Config(p) for p in ("fp32", "tf32", "fp16", "bf16"))
EIGHT_BIT = tuple(Config(REST, f, p) for f in model.FORMATS for p in model.PARTS)
FAMILIES = {"fp32": CONTROLS[:1], "tf32": CONTROLS[1:2], "fp16": CONTROLS[2:3],
            "bf16": CONTROLS[3:], "int8": EIGHT_BIT[:3], "fp8": EIGHT_BIT[3:],
            "any": CONTROLS + EIGHT_BIT}


def parse(name: str) -> Config:
    """The :class:`Config` named ``name`` (as :attr:`Config.name` writes it)."""
    for c in CONTROLS + EIGHT_BIT:
        if c.name == name:
            return c
    raise ValueError(f"no engine configuration named {name!r} "
                     f"(choose from {', '.join(c.name for c in CONTROLS + EIGHT_BIT)})")


# ---------------------------------------------------------------------------- values
def _f32(a):
    return None if a is None else np.asarray(a, dtype=np.float32).astype(np.float64)


def draw(cfg: RNNConfig, seed: int) -> dict:
    """float32-exact float64 values: ``stacked`` weights, ``io`` (x, hx, cx) and an
    independent calibration batch ``calibration`` of the same shapes."""
    rng = np.random.default_rng(seed)
    params = reference.random_params(cfg, rng)
    stacked = [model.Stacked(W=_f32(s.W), R=_f32(s.R), bW=_f32(s.bW), bR=_f32(s.bR), P=_f32(s.P))
               for s in model.stack(cfg, params)]

    def batch():
        return {"x": _f32(rng.uniform(-1, 1, cfg.x_shape())),
                "hx": _f32(rng.uniform(-1, 1, cfg.h_shape())),
                "cx": _f32(rng.uniform(-1, 1, cfg.c_shape())) if cfg.has_cell_state else None}
    return {"stacked": stacked, "io": batch(), "calibration": batch()}


def _device(cp, cfg, stacked):
    return [reference.LayerParams(*[[None if a is None else cp.asarray(a) for a in part]
                                    for part in (p.W, p.R, p.bW, p.bR)],
                                  None if p.P is None else cp.asarray(p.P))
            for p in model.unstack(cfg, stacked)]


def expected(cp, cfg, stacked, io) -> dict:
    """The float64 reference's y, hy, cy on the GPU (cupy) for ``stacked`` weights."""
    up = lambda a: None if a is None else cp.asarray(a)  # noqa: E731
    f = reference.forward(cfg, _device(cp, cfg, stacked), up(io["x"]), up(io["hx"]), up(io["cx"]))
    return {"y": f.y, "hy": f.hy, "cy": f.cy}


def errors(out: dict, ref: dict) -> dict:
    """Relative error of each output (y, hy, and cy where the reference has one)."""
    return {n: relative_error(out[n], ref[n]) for n in OUTPUTS if ref.get(n) is not None}


# ---------------------------------------------------------------------------- records
def record(cfg: RNNConfig, config: Config, **facts) -> dict:
    """One candidate's record: its identity and shape, then ``facts`` (outcome, errors,
    timings, ...). ``id`` is unique within a shape's candidates."""
    rec = {"id": f"lowbit/{config.name}", "engine": "cuBLASLt", "label": config.label(),
           "config": config.name, "precision": config.precision, "format": config.fmt,
           "parts": config.parts, "cell": cfg.mode.name, "direction": cfg.direction.name,
           "shape": cfg.as_record()["shape"], "flop": cfg.flop_count(), "bound": config.bound}
    rec.update(facts)
    return rec


def refusal(exc: BaseException, stage: str) -> dict:
    """The facts of a failed build or forward: NOT_SUPPORTED (or cuBLASLt's status) with
    the call, status and the library's reason, or the engine's own refusal (Unsupported)."""
    if isinstance(exc, CublasLtError):
        status = exc.status_name
        return dict(outcome="NOT_SUPPORTED" if status == "NOT_SUPPORTED" else "ERROR",
                    failed_stage=stage, failed_call=exc.call, status=status,
                    status_code=exc.code, reason=exc.reason)
    return dict(outcome="NOT_SUPPORTED", failed_stage=stage,
                failed_call="cudnn_rnn.lowbit.engine", status="NOT_SUPPORTED", reason=str(exc))


def refused(cfg, config, exc: BaseException, stage: str) -> dict:
    """A candidate's record of a failed call (:func:`refusal`)."""
    return record(cfg, config, **refusal(exc, stage))


def timed(cp, cfg: RNNConfig, engine: Engine, reps: int, warmup: int, budget_s: float | None,
          graphs: bool = True) -> dict:
    """``timings`` of plain forwards and, with ``graphs``, ``graph_timings`` of replays of
    the forward captured and checked bit for bit (or ``graph_refused``, why not), each with
    its TFLOPS; for a verified engine only."""
    facts = {"timings": {"forward_inference": _rated(cfg, timing.time_call(
        cp, engine.stream, engine.forward, reps, warmup, budget_s))}}
    if graphs:
        try:
            facts["graph_timings"] = {"forward_inference": _rated(cfg, capture.time_captured(
                engine, Engine.forward, OUTPUTS, reps, warmup, budget_s))}
        except capture.CaptureRefused as exc:
            facts["graph_refused"] = {"forward_inference": str(exc)}
    return facts


# ---------------------------------------------------------------------------- one candidate
def run_one(cp, cfg, config: Config, values: dict, amaxes: dict, ref_whole: dict,
            reps: int, warmup: int, budget_s: float | None, graphs: bool) -> dict:
    """Build, verify (twice), capture and time one candidate; its record."""
    started = time.monotonic()
    stacked, io = values["stacked"], values["io"]
    plan = None if config.fmt is None else model.plan(cfg, stacked, amaxes, config.fmt,
                                                      config.parts)
    try:
        engine = Engine(cfg, stacked, config.precision, plan)
    except (CublasLtError, Unsupported) as exc:
        return refused(cfg, config, exc, "build")
    try:
        engine.set_inputs(io["x"], io["hx"], io["cx"])
        capture.prepare(engine, OUTPUTS)  # NaN: an output left unwritten cannot pass
        engine.forward()
        out = engine.outputs()
        seen = operands.seen_weights(stacked, engine.operands)
        whole, only = errors(out, ref_whole), errors(out, expected(cp, cfg, seen, io))
        worst = max(list(whole.values()) + list(only.values()))
        facts = {"errors": whole, "errors_seen": only, "algorithms": engine.algorithms(),
                 "scales": _scales(plan)}
        if not worst <= config.bound:  # NaN fails too
            return record(cfg, config, outcome="WRONG_RESULT", duration_s=_since(started),
                          reason=f"largest relative error {worst:.3g} > bound {config.bound:g}",
                          **facts)
        facts.update(timed(cp, cfg, engine, reps, warmup, budget_s, graphs))
        return record(cfg, config, outcome="OK", duration_s=_since(started), **facts)
    except CublasLtError as exc:
        return refused(cfg, config, exc, "forward")
    finally:
        engine.close()


def _rated(cfg: RNNConfig, t: timing.Timing) -> dict:
    return dict(t.as_record(), tflops=timing.tflops(cfg.flop_count(), t.median_ms))


def _since(started: float) -> float:
    return round(time.monotonic() - started, 3)


def _scales(plan) -> dict | None:
    """The activation scales of a plan's 8-bit GEMMs, per pseudo-layer (None: float)."""
    if plan is None:
        return None
    return {name: [None if s is None else s.act for s in getattr(plan, name)]
            for name in ("input", "recurrent")}


@job
def run_configs(cfg: RNNConfig, names: list, seed: int = 0, reps: int = 20, warmup: int = 3,
                budget_s: float | None = 0.3, graphs: bool = True) -> dict:
    """Every configuration in ``names`` (:attr:`Config.name`) at ``cfg``'s shape: records."""
    cp = cupy_or_raise()
    configs = [parse(n) for n in names]
    values = draw(cfg, seed)
    cal = values["calibration"]
    up = lambda a: None if a is None else cp.asarray(a)  # noqa: E731
    amaxes = model.calibrate(cfg, model.moved(values["stacked"], cp), up(cal["x"]),
                             up(cal["hx"]), up(cal["cx"]))
    ref_whole = expected(cp, cfg, values["stacked"], values["io"])
    records = [run_one(cp, cfg, c, values, amaxes, ref_whole, reps, warmup, budget_s, graphs)
               for c in configs]
    lt = cublaslt.load()
    return {"records": records, "calibration": amaxes, "library": lt.describe()}


def run_in(worker, cfg: RNNConfig, names: list, reps: int, budget_s: float | None,
           graphs: bool, timeout_s: float) -> list[dict]:
    """The records of :func:`run_configs` for the configurations ``names``, run as a job of
    ``worker`` (:class:`cudnn_rnn.matrix.worker.Worker`) within ``timeout_s`` per
    configuration; a job that did not finish gives one ERROR record saying why."""
    names = [parse(n).name for n in names]
    result = worker.job(name_of(run_configs), {"cfg": cfg, "names": names, "reps": reps,
                                               "budget_s": budget_s, "graphs": graphs},
                        timeout=timeout_s * len(names))
    if "records" in result:
        return result["records"]
    return [{"id": "lowbit", "engine": "cuBLASLt", "label": "cuBLASLt GEMMs", "config": "all",
             "outcome": "ERROR", "failed_call": name_of(run_configs),
             "reason": result.get("skipped")}]
