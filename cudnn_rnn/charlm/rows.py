"""One configuration of the precision table on given weights and inputs: run, verify, time.

Two kinds, each returning ``(record, outputs)`` (outputs: y, hy, cy as float64 cupy arrays,
or None where the configuration did not verify):

* :func:`cudnn_row`: one cuDNN configuration (data type, math precision, math type,
  algorithm). The flow is walked to its ``weights`` stage, the model's weights and inputs
  replace the drawn ones (:func:`cudnn_rnn.engine.values.place`; rounded to the data
  type, as any deployment of that data type holds them), then one inference forward is
  compared with the float64 reference run on the values the device holds (``held``)
  within :func:`cudnn_rnn.check.verify.tolerances` (relative Frobenius norm per output, the
  project's rule), and its ``errors`` against the reference on the original values (the
  precision's whole error) are recorded; only then is it timed
  (:func:`cudnn_rnn.matrix.execute.time_cell`: CUDA-graph replays, checked bit for bit, and
  plain calls).
* :func:`engine_row`: the GEMM engine (:mod:`cudnn_rnn.lowbit`), or the persistent kernel
  (:mod:`cudnn_rnn.lowbit.persistent`: each launch shape verified, the fastest kept), with
  a plan's GEMMs in 8 bits and the others in FP16, or FP16 throughout (no plan). An 8-bit
  configuration is
  compared with its *twin*, the same quantized network in float64
  (:func:`cudnn_rnn.lowbit.model.forward` with the plan, on the GPU), and must be within
  :data:`TWIN_BOUNDS` of it *and*, in every output, nearer to it than to the unquantized
  float64 reference. Over a long sequence the engine and its twin drift apart (a last-bit
  difference moves an 8-bit code, and the recurrence carries it on), so the bound alone
  cannot tell the plan's network from no quantization at all (that one sits ~1e-3 from the
  reference); being nearer the twin can: an engine that skipped or misscaled the
  quantization would be nearer the reference, or far from both. The rounding rules
  themselves are checked exactly at small shapes by the engine's own tests. The precision's
  error against the reference (``errors``) is what the table reports, through the task
  metric. FP16 throughout is held to the float64 reference as the tuner holds it
  (:data:`cudnn_rnn.lowbit.configs.BOUNDS`).
"""
from __future__ import annotations

import time
from contextlib import nullcontext

from cudnn_rnn.bindings.enums import RNNAlgo
from cudnn_rnn.check.verify import tolerances
from cudnn_rnn.engine import capture, readback, values
from cudnn_rnn.engine.flow import FlowResult, FlowStop, RNNFlow
from cudnn_rnn.lowbit import model, persistent
from cudnn_rnn.lowbit.candidates import QUICK_REPS, build, checked, errors, failure, timed
from cudnn_rnn.lowbit.configs import (BOUNDS, ENGINE_NAMES, ENGINES, OUTPUTS, REST, TWIN_BOUNDS,
                                      Config)
from cudnn_rnn.matrix.execute import outcome_of, time_cell


def _failed(rec: dict, outcome: str, call: str, status: str, code, reason: str) -> dict:
    rec.update(outcome=outcome, failed_call=call, status=status, status_code=code, reason=reason)
    return rec


def cudnn_id(choice: tuple) -> str:
    """The record id of cuDNN's configuration ``choice`` (data type, math precision, math
    type, algorithm)."""
    return "cudnn/" + "/".join(c.name for c in choice)


def cudnn_config(rnn, T: int, B: int, choice: tuple):
    """The configuration of ``rnn``'s row ``choice`` at sequence ``T``, batch ``B``."""
    dt, prec, math, algo = choice
    return rnn.config(T, B, data_type=dt, math_prec=prec, math_type=math, algo=algo)


def cudnn_row(lib, handle, rnn, arrays: dict, io: dict, ref: dict, held: dict, choice: tuple,
              family: str, reps: int, warmup: int, budget_s: float | None, builder=None,
              drawn: values.ValuesCache | None = None):
    """One cuDNN configuration ``choice`` = (data type, math precision, math type, algo);
    ``ref``: the float64 outputs on the original values, ``held``: on the values rounded to
    the data type. ``builder``: a :class:`~cudnn_rnn.matrix.ahead.Builder` that may have
    built a PERSIST_DYNAMIC row's descriptor ahead (by its :func:`cudnn_id`); the row then
    runs on it (``built_ahead_s``), else builds its own; no build runs while it is timed.
    ``drawn``: the values the flow draws (and :func:`~cudnn_rnn.engine.values.place`
    replaces) kept for the next row of the same data type, not drawn again."""
    dt, prec, math, algo = choice
    T, B = io["x"].shape[:2]
    cfg = cudnn_config(rnn, T, B, choice)
    rec = {"id": cudnn_id(choice), "engine": "cuDNN",
           "family": family, "label": f"{dt.name}/{prec.name}/{math.name}/{algo.name}",
           "bound": tolerances(cfg)[0], "flop": cfg.flop_count()}
    started = time.monotonic()
    with RNNFlow(cfg, lib, init="random", handle=handle, values=drawn) as flow:
        result = flow.run(until="weights")
        if result.failure is not None:
            f = result.failure
            return _failed(rec, outcome_of(result, lib.version_number), f.call, f.status,
                           f.code, f.reason), None
        values.place(flow, arrays, io)
        try:
            if algo == RNNAlgo.PERSIST_DYNAMIC:
                built = builder.adopt(flow, rec["id"]) if builder else None
                if built is not None and built.flow is not None:  # adopted
                    rec["built_ahead_s"] = round(built.seconds, 3)
                else:
                    if built is not None:  # the build ahead failed: this row's call says why
                        rec["built_ahead_error"] = built.error
                    flow.run_stage("build_dynamic")
            flow.poison_outputs()
            flow.run_stage("forward_inference")
        except FlowStop as stop:
            f = stop.failure
            return _failed(rec, outcome_of(FlowResult(cfg, failure=f), lib.version_number),
                           f.call, f.status, f.code, f.reason), None
        out = {n: readback.read(flow, n + "_inf", on_device=True) for n in OUTPUTS
               if n + "_inf" in flow.buf}
        rec["errors"] = errors(out, ref)
        rec["errors_held"] = errors(out, held)
        worst = max(rec["errors_held"].values())
        if not worst <= rec["bound"]:
            rec.update(outcome="WRONG_RESULT", reason=f"largest relative error {worst:.3g} "
                       f"against the reference on the values held > bound {rec['bound']:g}")
            return rec, None
        with builder.quiet() if builder else nullcontext():
            plain, replayed, refused = time_cell(flow, reps, warmup, ("forward_inference",),
                                                 budget_s, graphs=True)
        rec.update(outcome="OK", timings=plain, graph_timings=replayed, graph_refused=refused,
                   duration_s=round(time.monotonic() - started, 3))
        return rec, out


def engine_row(cfg, stacked: list, stacked_dev: list, io_dev: dict, ref: dict, fmt, parts,
               method, amaxes, reps: int, warmup: int, budget_s: float | None,
               engine: str = "gemm", twins: dict | None = None):
    """``engine`` ("gemm": the GEMM engine; "persistent": the persistent kernel, its
    fastest verified launch shape) with ``fmt`` on ``parts`` at thresholds ``amaxes``
    (calibration ``method``; weights per output channel), or FP16 throughout when ``fmt``
    is None. ``twins``: float64 twin outputs by plan, shared between engines."""
    name = REST if fmt is None else f"{fmt}/{parts}/{method}"
    what = ENGINES[engine]
    rec = {"id": f"{'lowbit' if engine == 'gemm' else engine}/{name}",
           "engine": ENGINE_NAMES[engine], "family": fmt or REST,
           "format": fmt, "parts": parts, "calibration": method,
           "label": f"{what} {REST}" if fmt is None else
           f"{what} {fmt} {parts}" + ("" if parts == "both" else f" (+{REST})"),
           "bound": BOUNDS[REST] if fmt is None else TWIN_BOUNDS[fmt],
           "verified_against": "float64 reference" if fmt is None else "float64 twin",
           "flop": cfg.flop_count()}
    started = time.monotonic()
    plan = None if fmt is None else model.plan(cfg, stacked, amaxes, fmt, parts, channel=True)
    twin = None
    if plan is not None:
        key = (fmt, parts, method)
        twins = {} if twins is None else twins
        if key not in twins:
            y, hy, cy = model.forward(cfg, stacked_dev, io_dev["x"], io_dev["hx"],
                                      io_dev.get("cx"), plan)
            twins[key] = {"y": y, "hy": hy, "cy": cy}
        twin = twins[key]
    shapes = [None] if engine == "gemm" else list(persistent.SETTINGS)
    if engine == "persistent":
        persistent.precompile(e_cp(), cfg, stacked, REST, plan, shapes)
    tried, best, failed, verified = [], None, [], []
    try:
        for settings in shapes:
            why = settings and persistent.not_tried(settings, verified, shapes, cfg)
            if why:
                tried.append(persistent.tried(settings, {"outcome": "NOT_TRIED", "reason": why},
                                              None))
                continue
            facts, out, ms, e = _try(cfg, stacked, io_dev, ref, plan, twin, rec["bound"],
                                     rec["verified_against"], engine, settings, len(shapes) > 1)
            if settings is not None:
                tried.append(persistent.tried(settings, facts, ms))
            if facts["outcome"] != "OK":
                failed.append(facts)
            else:
                verified.append(settings)
                if best is None or (ms or 0) < best[2]:
                    if best is not None:
                        best[4].close()
                    best, e = (settings, facts, ms or 0, out, e), None
            if e is not None:  # verified, but another launch shape is faster
                e.close()
        if tried:
            rec["settings_tried"] = tried
        if best is None:  # a wrong result says more than a refusal
            first = next((f for f in failed if f["outcome"] == "WRONG_RESULT"), failed[0])
            rec.update(first)
            if len(tried) > 1:
                rec["reason"] = "; ".join(f"{t['settings']}: {t['reason']}" for t in tried)
            return rec, None
        settings, facts, _, out, e = best
        rec.update(facts)
        if settings is not None:
            rec["settings"] = settings.name
        try:  # the build verified is the one timed; run again, it must compute the same bytes
            e.forward()
            again = {n: a.astype("float64") for n, a in e.outputs().items()}
            if any(not bool(e.cp.array_equal(again[n], out[n])) for n in out):
                rec.update(outcome="WRONG_RESULT", reason="a second forward computed other "
                           "outputs than the first, verified one, from the same inputs")
                return rec, None
            rec.update(timed(e.cp, cfg, e, reps, warmup, budget_s))
        except BaseException as exc:
            failed = failure(exc, e.cp, "forward")
            if failed is None:
                raise
            rec.update(failed)
            return rec, None
    finally:
        if best is not None:
            best[4].close()
    rec.update(outcome="OK", duration_s=round(time.monotonic() - started, 3))
    return rec, out


def e_cp():
    """cupy (an engine that failed to build leaves none to ask)."""
    from cudnn_rnn.engine.gpu import cupy_or_raise
    return cupy_or_raise()


def build_engine(cfg, stacked, plan, engine: str, settings):
    """The GEMM engine (``engine`` "gemm") or the persistent kernel shaped by ``settings``
    (:func:`cudnn_rnn.lowbit.candidates.build`), with ``plan``'s GEMMs in 8 bits and the
    others in :data:`REST` (all of them without a plan)."""
    return build(cfg, Config(engine=engine), stacked, plan, settings)


def check_outputs(out: dict, ref: dict, twin: dict | None, bound: float,
                  against: str, nearer_twin: bool = True) -> tuple[dict, str | None]:
    """An engine's outputs judged (see the module docstring): without a ``twin`` (FP16
    throughout) against the reference ``ref`` within ``bound``; with one (8 bits) against
    the twin within ``bound`` and (``nearer_twin``) nearer to it than to ``ref`` in every
    output. (facts: ``errors`` against ``ref`` and ``errors_twin``, why it is wrong or
    None)."""
    facts = {"errors": errors(out, ref)}
    check = facts["errors"] if twin is None else errors(out, twin)
    if twin is not None:
        facts["errors_twin"] = check
    worst = max(check.values())
    if not worst <= bound:  # NaN fails too
        return facts, (f"largest relative error {worst:.3g} against the {against} > bound "
                       f"{bound:g}")
    nearer = [n for n in check if twin is not None and nearer_twin
              and not check[n] < facts["errors"][n]]
    if nearer:
        n = nearer[0]
        return facts, (f"{n} is as near the unquantized reference ({facts['errors'][n]:.3g}) "
                       f"as its quantized twin ({check[n]:.3g}): not shown to compute the "
                       "quantized network")
    return facts, None


def _try(cfg, stacked, io_dev, ref, plan, twin, bound, against, engine, settings,
         quick: bool) -> tuple[dict, dict | None, float | None, object | None]:
    """One engine (one launch shape of the persistent kernel) built and verified: FP16
    throughout against the reference, 8 bits against the twin within its bound and nearer
    to it than to the reference in every output; then, with ``quick``, a few replays timed.
    (facts, outputs or None, ms or None, the engine where it verified (the caller's to
    close) or None)."""
    try:
        e = build_engine(cfg, stacked, plan, engine, settings)
    except BaseException as exc:
        facts = failure(exc, e_cp(), "build")
        if facts is None:
            raise
        return facts, None, None, None
    kept = False
    try:
        e.set_inputs(io_dev["x"], io_dev["hx"], io_dev.get("cx"))
        capture.prepare(e, OUTPUTS)
        e.forward()
        out = {n: a.astype("float64") for n, a in e.outputs().items()}
        facts, wrong = check_outputs(out, ref, None if plan is None else twin, bound, against)
        if wrong:
            return dict(facts, outcome="WRONG_RESULT", reason=wrong), None, None, None
        ms = None
        if quick:
            ms = capture.time_captured(e, lambda x: x.forward(), OUTPUTS, QUICK_REPS, 1,
                                       None).median_ms
            checked(e)  # the quick time chooses the launch shape: of a launch that ran
        kept = True
        return dict(facts, outcome="OK"), out, ms, e
    except capture.CaptureRefused as exc:
        return dict(facts, outcome="WRONG_RESULT", reason=f"replay: {exc}"), None, None, None
    except BaseException as exc:
        failed = failure(exc, e.cp, "forward")
        if failed is None:
            raise
        return failed, None, None, None
    finally:
        if not kept:
            e.close()
