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
import numpy as np

from cudnn_rnn.bindings import cublaslt
from cudnn_rnn.bindings.cublaslt.errors import CublasLtError
from cudnn_rnn.bindings.driver.errors import DriverError
from cudnn_rnn.check import reference
from cudnn_rnn.check.verify import relative_error
from cudnn_rnn.engine import capture, timing
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.engine.gpu import cuda_errors, cupy_or_raise, failed_call
from cudnn_rnn.lowbit import model, operands, persistent
from cudnn_rnn.lowbit.configs import ENGINE_NAMES, OUTPUTS, TWIN_BOUNDS, Config, parse
from cudnn_rnn.lowbit.engine import GemmEngine, Unsupported
from cudnn_rnn.lowbit.persistent import PersistentEngine, Stalled, precompile
from cudnn_rnn.lowbit.resident import ResidentEngine
from cudnn_rnn.matrix.jobs import job, name_of

# replays (their median) that rank a persistent candidate's launch shapes before it is timed:
# 20, not 5, since 'wbeiqs2' and 'wbeiq' lie within 1-4 % at LSTM 50/1/1024/256 INT8 and the
# benchmark's ranking of 5 took the slower (H100, tree f9fccd3: timed 0.4300 ms against the
# probe's 0.4143-0.4179 for 'wbeiqs2'); a replay there is 0.4 ms, a build and its
# verification seconds. The precision table's rows (charlm.rows) rank theirs alike
QUICK_REPS = 20

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
    rec = {"id": f"lowbit/{config.name}", "engine": ENGINE_NAMES[config.engine],
           "label": config.label(),
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


def timed(cp, cfg: RNNConfig, engine, reps: int, warmup: int, budget_s: float | None,
          graphs: bool = True) -> dict:
    """``timings`` of plain forwards and, with ``graphs``, ``graph_timings`` of replays of
    the forward captured and checked bit for bit (or ``graph_refused``, why not), each with
    its TFLOPS; for a verified engine only. A persistent launch that gave up a wait while
    timed measured nothing: :class:`~cudnn_rnn.lowbit.persistent.Stalled` then, not times
    (a stalled launch writes NaN, whose bytes a replay can match)."""
    facts = {"timings": {"forward_inference": _rated(cfg, timing.time_call(
        cp, engine.stream, engine.forward, reps, warmup, budget_s))}}
    if graphs:
        try:
            facts["graph_timings"] = {"forward_inference": _rated(cfg, capture.time_captured(
                engine, _forward, OUTPUTS, reps, warmup, budget_s))}
        except capture.CaptureRefused as exc:
            facts["graph_refused"] = {"forward_inference": str(exc)}
    checked(engine)
    return facts


def checked(engine) -> None:
    """:class:`~cudnn_rnn.lowbit.persistent.Stalled` where ``engine`` (a persistent one) gave
    up a wait since its inputs were set; the GEMM engine has nothing to check."""
    if hasattr(engine, "check"):
        engine.check()


TIMED = ("timings", "graph_timings", "graph_refused")  # what a failure after timing drops


def _forward(engine) -> None:
    engine.forward()


# ---------------------------------------------------------------------------- one candidate
def build(cfg: RNNConfig, config: Config, stacked, plan, settings=None):
    """The engine of ``config`` (a persistent one shaped by ``settings``; 'd': resident)."""
    s = settings or persistent.Settings()
    if config.engine == "persistent":
        kind = ResidentEngine if s.resident else PersistentEngine
        return kind(cfg, stacked, config.precision, plan, s)
    return GemmEngine(cfg, stacked, config.precision, plan)


def verify(cp, cfg: RNNConfig, config: Config, engine, values: dict, ref_whole: dict,
           twin: dict | None) -> tuple[dict, str | None]:
    """One plain forward of ``engine`` compared with the float64 reference on the original
    weights (``errors``: the precision's whole error) and on the weights as its GEMMs see
    them (``errors_seen``), both within :attr:`Config.bound`; an 8-bit one also with its
    float64 ``twin`` (the same quantized network), within :data:`TWIN_BOUNDS` and nearer
    to it than to the unquantized reference in every output (a forward that skipped or
    misscaled the quantization is not). (facts, None) or (facts, why it is wrong)."""
    stacked, io = values["stacked"], values["io"]
    engine.set_inputs(io["x"], io["hx"], io["cx"])
    capture.prepare(engine, OUTPUTS)  # NaN: an output left unwritten cannot pass
    engine.forward()
    out = engine.outputs()
    seen = operands.seen_weights(stacked, engine.operands)
    whole, only = errors(out, ref_whole), errors(out, expected(cp, cfg, seen, io))
    facts = {"errors": whole, "errors_seen": only}
    worst = max(list(whole.values()) + list(only.values()))
    if not worst <= config.bound:  # NaN fails too
        return facts, f"largest relative error {worst:.3g} > bound {config.bound:g}"
    if twin is None:
        return facts, None
    near = facts["errors_twin"] = errors(out, twin)
    bound = TWIN_BOUNDS[config.fmt]
    worst = max(near.values())
    if not worst <= bound:
        return facts, (f"largest relative error {worst:.3g} against its float64 twin "
                       f"> bound {bound:g}")
    for n in near:
        if not near[n] < whole[n]:
            return facts, (f"{n} is as near the unquantized reference ({whole[n]:.3g}) as "
                           f"its quantized twin ({near[n]:.3g}): not shown to compute the "
                           "quantized network")
    return facts, None


def failure(exc: BaseException, cp, stage: str) -> dict | None:
    """The facts of an exception an engine may raise (None: not one of them, a bug)."""
    if isinstance(exc, (CublasLtError, Unsupported)):
        return refusal(exc, stage)
    if isinstance(exc, Stalled):
        return dict(outcome="ERROR", failed_stage=stage, failed_call="persistent_rnn",
                    status="STALLED", reason=str(exc))
    if isinstance(exc, cuda_errors(cp)):
        return dict(outcome="ERROR", failed_stage=stage, failed_call=failed_call(exc),
                    status=type(exc).__name__, reason=str(exc))
    if isinstance(exc, DriverError):  # the driver refusing a launch shape (a cluster's size)
        return dict(outcome="NOT_SUPPORTED", failed_stage=stage, failed_call=exc.call,
                    status=exc.status_name, reason=str(exc))
    return None


def _attempt(cp, cfg, config, values, plan, ref_whole, twin, settings, quick: int,
             graphs: bool) -> tuple[dict, float | None]:
    """Build and verify one launch shape of the engine, then time ``quick`` replays
    (plain forwards without ``graphs``): (facts, median ms, or None where not timed)."""
    try:
        engine = build(cfg, config, values["stacked"], plan, settings)
    except BaseException as exc:
        facts = failure(exc, cp, "build")
        if facts is None:
            raise
        return facts, None
    facts = {}
    try:
        facts, wrong = verify(cp, cfg, config, engine, values, ref_whole, twin)
        facts["algorithms"] = engine.algorithms()
        if wrong:
            return dict(facts, outcome="WRONG_RESULT", reason=wrong), None
        if graphs:
            t = capture.time_captured(engine, _forward, OUTPUTS, quick, 1, None)
        else:
            t = timing.time_call(cp, engine.stream, engine.forward, quick, 1, None)
        checked(engine)  # the quick time chooses the launch shape: of a launch that ran
        return dict(facts, outcome="OK"), t.median_ms
    except capture.CaptureRefused as exc:
        return dict(facts, outcome="OK", graph_refused={"forward_inference": str(exc)}), None
    except BaseException as exc:
        failed = failure(exc, cp, "forward")
        if failed is None:
            raise
        return dict(facts, **failed), None
    finally:
        engine.close()


def choose_settings(cp, cfg, config, values, plan, ref_whole, twin, graphs: bool,
                    shapes=persistent.SETTINGS):
    """The persistent kernel's launch ``shapes`` (:class:`persistent.Settings`), each
    verified and timed briefly (all but those :func:`persistent.not_tried` names after the
    ones timed): (the fastest verified one, the first verified where none could be timed
    (its capture refused), or None; what each gave)."""
    tried, best, verified, first = [], None, [], None
    precompile(cp, cfg, values["stacked"], config.precision, plan, shapes)
    for settings in shapes:
        why = persistent.not_tried(settings, verified, shapes, cfg)
        facts, ms = ({"outcome": "NOT_TRIED", "reason": why}, None) if why else _attempt(
            cp, cfg, config, values, plan, ref_whole, twin, settings, QUICK_REPS, graphs)
        tried.append(persistent.tried(settings, facts, ms))
        if facts["outcome"] == "OK" and first is None:
            first = settings
        if ms is not None:  # verified and timed (a refused capture leaves it untimed)
            verified.append(settings)
        if ms is not None and (best is None or ms < best[1]):
            best = (settings, ms)
    return (best[0] if best else first), tried


def run_one(cp, cfg, config: Config, values: dict, amaxes: dict, ref_whole: dict,
            reps: int, warmup: int, budget_s: float | None, graphs: bool,
            twin=None, shapes=persistent.SETTINGS) -> dict:
    """Build, verify (against the reference twice, and an 8-bit one against its twin),
    capture and time one candidate; its record. A persistent candidate first tries each
    launch shape of ``shapes`` and keeps the fastest verified one (``settings``,
    ``settings_tried``).
    ``twin(plan)``: the plan's float64 twin outputs (computed here when not given)."""
    started = time.monotonic()
    stacked = values["stacked"]
    plan = None if config.fmt is None else model.plan(cfg, stacked, amaxes, config.fmt,
                                                      config.parts)
    twin_out = None if plan is None else (twin or twins(cp, cfg, values))(plan)
    extra, settings = {"scales": _scales(plan)}, None
    if config.engine == "persistent":
        settings, tried = choose_settings(cp, cfg, config, values, plan, ref_whole, twin_out,
                                          graphs, shapes)
        extra["settings_tried"] = tried
        if settings is None:
            return record(cfg, config, **_none_verified(tried), **extra,
                          duration_s=_since(started))
        extra["settings"] = settings.name
    try:
        engine = build(cfg, config, stacked, plan, settings)
    except BaseException as exc:
        failed = failure(exc, cp, "build")
        if failed is None:
            raise
        return record(cfg, config, duration_s=_since(started), **dict(extra, **failed))
    facts = dict(extra)
    try:  # the build verified is the build timed (another build is not its proof)
        checks, wrong = verify(cp, cfg, config, engine, values, ref_whole, twin_out)
        facts.update(checks, algorithms=engine.algorithms())
        if wrong:
            return record(cfg, config, duration_s=_since(started),
                          **dict(facts, outcome="WRONG_RESULT", reason=wrong))
        facts.update(outcome="OK", **timed(cp, cfg, engine, reps, warmup, budget_s, graphs))
        return record(cfg, config, duration_s=_since(started), **facts)
    except BaseException as exc:
        failed = failure(exc, cp, "forward")
        if failed is None:
            raise
        kept = {k: v for k, v in facts.items() if k not in TIMED}  # no times of a failure
        return record(cfg, config, **dict(kept, **failed))
    finally:
        engine.close()


def _none_verified(tried: list) -> dict:
    """The facts of a persistent candidate none of whose launch shapes verified."""
    wrong = [t for t in tried if t["outcome"] not in ("OK", "NOT_SUPPORTED", "NOT_TRIED")]
    first = (wrong or tried)[0]
    return dict(outcome=first["outcome"], failed_stage="build",
                failed_call="cudnn_rnn.lowbit.persistent", status=first["outcome"],
                reason="; ".join(f"{t['settings']}: {t['reason']}" for t in tried))


def twins(cp, cfg, values):
    """``twin(plan)``: the plan's float64 twin outputs {y, hy, cy} on the GPU, each plan's
    computed once (the GEMM engine and the persistent kernel of one plan share it)."""
    stacked_dev = model.moved(values["stacked"], cp)
    io = {n: None if a is None else cp.asarray(a) for n, a in values["io"].items()}
    cache = {}

    def twin(plan):
        key = (plan.fmt, plan.parts)
        if key not in cache:
            y, hy, cy = model.forward(cfg, stacked_dev, io["x"], io["hx"], io["cx"], plan)
            cache[key] = {"y": y, "hy": hy, "cy": cy}
        return cache[key]
    return twin


def _rated(cfg: RNNConfig, t: timing.Timing) -> dict:
    return dict(t.as_record(), tflops=timing.tflops(cfg.flop_count(), t.median_ms))


def _since(started: float) -> float:
    return round(time.monotonic() - started, 3)


def _scales(plan) -> dict | None:
    """The activation scales of a plan's 8-bit GEMMs, per pseudo-layer (None: float)."""
    return None if plan is None else {name: [None if s is None else s.act for s in getattr(
        plan, name)] for name in ("input", "recurrent")}


@job
def run_configs(cfg: RNNConfig, names: list, seed: int = 0, reps: int = 20, warmup: int = 3,
                budget_s: float | None = 0.3, graphs: bool = True,
                settings: list | None = None) -> dict:
    """Every configuration in ``names`` (:attr:`Config.name`) at ``cfg``'s shape: records.
    ``settings``: the persistent kernel's launch shapes to try, by name (None: the tuner's,
    :data:`persistent.SETTINGS`; any :meth:`persistent.Settings.parse` reads: b1t512,
    b1t256p, ..., each tried, 'g' where the projection staged verified too)."""
    cp = cupy_or_raise()
    shapes = persistent.SETTINGS if settings is None else tuple(
        persistent.Settings.parse(n) for n in settings)
    configs = [parse(n) for n in names]
    values = draw(cfg, seed)
    cal = values["calibration"]
    up = lambda a: None if a is None else cp.asarray(a)  # noqa: E731
    amaxes = model.calibrate(cfg, model.moved(values["stacked"], cp), up(cal["x"]),
                             up(cal["hx"]), up(cal["cx"]))
    ref_whole = expected(cp, cfg, values["stacked"], values["io"])
    twin = twins(cp, cfg, values)
    records = [run_one(cp, cfg, c, values, amaxes, ref_whole, reps, warmup, budget_s, graphs,
                       twin, shapes) for c in configs]
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
