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
  (:func:`cudnn_rnn.matrix.cell.time_cell`: CUDA-graph replays, checked bit for bit, and
  plain calls).
* :func:`engine_row`: the GEMM engine (:mod:`cudnn_rnn.lowbit`) with a plan's GEMMs in 8
  bits and the others in FP16, or FP16 throughout (no plan). An 8-bit configuration is
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

from cudnn_rnn.bindings.cublaslt.errors import CublasLtError
from cudnn_rnn.bindings.enums import RNNAlgo
from cudnn_rnn.check.verify import tolerances
from cudnn_rnn.engine import capture, readback, values
from cudnn_rnn.engine.flow import FlowResult, FlowStop, RNNFlow
from cudnn_rnn.lowbit import model
from cudnn_rnn.lowbit.candidates import errors, refusal, timed
from cudnn_rnn.lowbit.configs import BOUNDS, OUTPUTS, REST, TWIN_BOUNDS
from cudnn_rnn.lowbit.engine import Engine, Unsupported
from cudnn_rnn.matrix.cell import outcome_of, time_cell


def _failed(rec: dict, outcome: str, call: str, status: str, code, reason: str) -> dict:
    rec.update(outcome=outcome, failed_call=call, status=status, status_code=code, reason=reason)
    return rec


def cudnn_row(lib, handle, rnn, arrays: dict, io: dict, ref: dict, held: dict, choice: tuple,
              family: str, reps: int, warmup: int, budget_s: float | None):
    """One cuDNN configuration ``choice`` = (data type, math precision, math type, algo);
    ``ref``: the float64 outputs on the original values, ``held``: on the values rounded to
    the data type."""
    dt, prec, math, algo = choice
    T, B = io["x"].shape[:2]
    cfg = rnn.config(T, B, data_type=dt, math_prec=prec, math_type=math, algo=algo)
    rec = {"id": f"cudnn/{dt.name}/{prec.name}/{math.name}/{algo.name}", "engine": "cuDNN",
           "family": family, "label": f"{dt.name}/{prec.name}/{math.name}/{algo.name}",
           "bound": tolerances(cfg)[0], "flop": cfg.flop_count()}
    started = time.monotonic()
    with RNNFlow(cfg, lib, init="random", handle=handle) as flow:
        result = flow.run(until="weights")
        if result.failure is not None:
            f = result.failure
            return _failed(rec, outcome_of(result, lib.version_number), f.call, f.status,
                           f.code, f.reason), None
        values.place(flow, arrays, io)
        try:
            if algo == RNNAlgo.PERSIST_DYNAMIC:
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
        plain, replayed, refused = time_cell(flow, reps, warmup, ("forward_inference",),
                                             budget_s, graphs=True)
        rec.update(outcome="OK", timings=plain, graph_timings=replayed, graph_refused=refused,
                   duration_s=round(time.monotonic() - started, 3))
        return rec, out


def engine_row(cfg, stacked: list, stacked_dev: list, io_dev: dict, ref: dict, fmt, parts,
               method, amaxes, reps: int, warmup: int, budget_s: float | None):
    """The GEMM engine with ``fmt`` on ``parts`` at thresholds ``amaxes`` (calibration
    ``method``; weights per output channel), or FP16 throughout when ``fmt`` is None."""
    name = REST if fmt is None else f"{fmt}/{parts}/{method}"
    rec = {"id": f"lowbit/{name}", "engine": "cuBLASLt", "family": fmt or REST,
           "format": fmt, "parts": parts, "calibration": method,
           "label": f"cuBLASLt GEMMs {REST}" if fmt is None else
           f"cuBLASLt GEMMs {fmt} {parts}" + ("" if parts == "both" else f" (+{REST})"),
           "bound": BOUNDS[REST] if fmt is None else TWIN_BOUNDS[fmt],
           "verified_against": "float64 reference" if fmt is None else "float64 twin",
           "flop": cfg.flop_count()}
    started = time.monotonic()
    plan = None if fmt is None else model.plan(cfg, stacked, amaxes, fmt, parts, channel=True)
    try:
        engine = Engine(cfg, stacked, REST, plan)
    except (CublasLtError, Unsupported) as exc:
        return dict(rec, **refusal(exc, "build")), None
    try:
        engine.set_inputs(io_dev["x"], io_dev["hx"], io_dev.get("cx"))
        capture.prepare(engine, OUTPUTS)
        engine.forward()
        out = {n: a.astype("float64") for n, a in engine.outputs().items()}
        rec["errors"] = errors(out, ref)
        if plan is None:
            check = rec["errors"]
        else:
            y, hy, cy = model.forward(cfg, stacked_dev, io_dev["x"], io_dev["hx"],
                                      io_dev.get("cx"), plan)
            check = rec["errors_twin"] = errors(out, {"y": y, "hy": hy, "cy": cy})
        worst = max(check.values())
        if not worst <= rec["bound"]:
            rec.update(outcome="WRONG_RESULT", reason=f"largest relative error {worst:.3g} "
                       f"against the {rec['verified_against']} > bound {rec['bound']:g}")
            return rec, None
        nearer = [n for n in check if plan is not None and not check[n] < rec["errors"][n]]
        if nearer:
            n = nearer[0]
            rec.update(outcome="WRONG_RESULT", reason=(
                f"{n} is as near the unquantized reference ({rec['errors'][n]:.3g}) as its "
                f"quantized twin ({check[n]:.3g}): not shown to compute the quantized network"))
            return rec, None
        rec.update(timed(engine.cp, cfg, engine, reps, warmup, budget_s))
        rec.update(outcome="OK", duration_s=round(time.monotonic() - started, 3))
        return rec, out
    except CublasLtError as exc:
        return dict(rec, **refusal(exc, "forward")), None
    finally:
        engine.close()


