"""A probe cell's life, in one place: stages → verification → timing → one record.

1. Walk the flow's stages (:mod:`cudnn_rnn.engine.flow`); the first failing stage ends the cell with
   its call, status name and code and cuDNN's reason. Without a GPU, the cell ends
   after the descriptor stages as SKIPPED.
2. A cell that passed every stage is compared with the float64 reference (outputs of
   training and inference, and the gradients dx, dhx, dcx, dw) on random data.
   Outside the tolerance it is WRONG_RESULT and gets no speed claim.
3. Only a verified cell is timed: forward inference, forward training, backward
   data and backward weights, each a median over ``reps`` CUDA-event timed calls
   after warm-up, with TFLOPS by the sample's FLOP formula.

The record (:class:`~cudnn_rnn.matrix.record.Record`) is built as the cell goes;
speed-ups against the FP32 baseline are added by the runner, which has every cell's record.
"""
from __future__ import annotations

import time
from contextlib import nullcontext, suppress

import numpy as np

from cudnn_rnn.bindings.enums import ForwardMode, RNNAlgo, StatusV9, status_category
from cudnn_rnn.check import kinks
from cudnn_rnn.check.verify import compare_with
from cudnn_rnn.bindings.errors import CudnnError
from cudnn_rnn.engine import capture, readback, timing
from cudnn_rnn.engine.gpu import cuda_errors
from cudnn_rnn.engine.flow import FlowResult, RNNFlow, StageFailure
from cudnn_rnn.engine.values import ValuesCache
from cudnn_rnn.matrix.beside import Alone
from cudnn_rnn.matrix.record import Record
from cudnn_rnn.matrix.references import ReferenceCache

# Each timed call: its name, the call, and the outputs it writes (checked bit for bit
# between a plain call and a replay of its CUDA graph).
TIMED = (("forward_inference", lambda f: f.forward(ForwardMode.INFERENCE),
          ("y_inf", "hy_inf", "cy_inf")),
         ("forward_training", lambda f: f.forward(ForwardMode.TRAINING), ("y", "hy", "cy")),
         ("backward_data", lambda f: f.backward_data(), ("dx", "dhx", "dcx")),
         ("backward_weights", lambda f: f.backward_weights(), ("dw",)))
PLAIN_SHARE = 4  # with a captured graph, the plain calls get a quarter of the repeats


def outcome_of(result: FlowResult, version_number: int) -> str:
    """OK-to-be (None), or the outcome name of a flow that did not complete."""
    f = result.failure
    if f is None:
        return "SKIPPED" if result.skip_reason else None
    if f.kind == "cuda":
        return "CRASH"
    if f.kind == "host":
        return "HOST_ERROR"
    if version_number >= 90000 and f.code is not None and f.code >= 1000:
        family = status_category(f.code)
        if family in StatusV9._value2member_map_:
            return StatusV9(family).name  # NOT_SUPPORTED_SHAPE counts as NOT_SUPPORTED
    return f.status


def run_cell(cell, lib, *, device: bool, reps: int = 20, warmup: int = 3, time_it: bool = True,
             cache: ReferenceCache | None = None, seed: int = 1234,
             values: ValuesCache | None = None, kinds: tuple | None = None,
             budget_s: float | None = None, graphs: bool = True, handle=None,
             builder=None, beside=None) -> Record:
    """Everything that happens to one cell; returns its record (never raises for cuDNN).

    ``kinds`` limits the timed calls (names of :data:`TIMED`; all four by default);
    ``budget_s`` caps each measurement's device time (see
    :func:`cudnn_rnn.engine.timing.time_call`).
    Verification always covers every output and gradient, whatever is timed. With
    ``graphs``, each timed call is also captured in a CUDA graph and its replays timed
    (:mod:`cudnn_rnn.engine.capture`). ``handle``: a cuDNN handle shared across cells (see
    :class:`~cudnn_rnn.engine.flow.RNNFlow`). ``builder``: a
    :class:`~cudnn_rnn.matrix.ahead.Builder` that may have built this cell ahead; it builds
    nothing while the cell is timed. ``beside``: a :class:`~cudnn_rnn.matrix.beside.Beside`
    shared with another worker's builders (their GPU set-ups wait for this cell's
    verification and timing; the builds compiled meanwhile are noted in the record).
    """
    started = time.perf_counter()
    cfg = cell.config
    rec = Record.of(cell, lib.version_string, lib.resolved_path)
    cache = cache or ReferenceCache(1)
    with RNNFlow(cfg, lib, device=device, init="random", seed=seed, values=values,
                 handle=handle) as flow:
        try:
            result = run_stages(flow, cache, builder and (lambda: builder.adopt(flow, cell.id)))
            rec.add_flow(result)
            rec.outcome = outcome_of(result, lib.version_number)
            if rec.outcome is None:
                waited = time.perf_counter()
                with builder.quiet() if builder is not None else nullcontext():
                    if builder is not None:  # what builds under way cost this cell
                        rec.phase_s["builds_wait"] = round(time.perf_counter() - waited, 4)
                    with (beside or Alone()).measuring() as beside_counts:
                        verify_and_time(rec, flow, cache, reps, warmup, time_it, kinds,
                                        budget_s, graphs)
                    if beside_counts.get("waited", 0) >= 0.001:  # for a builder's set-up
                        rec.phase_s["beside_wait"] = round(beside_counts["waited"], 4)
                    if beside_counts.get("lock_lost"):
                        rec.notes.append("the workers' shared lock was given up on (a worker "
                                         "killed inside it): a builder's GPU set-up in the "
                                         "other worker may have run beside this cell's "
                                         "verification and timing")
                    if beside_counts.get("builds") and rec.timings:
                        rec.notes.append(f"verified and timed while {beside_counts['builds']} "
                                         "PERSIST_DYNAMIC builds compiled in another worker")
        finally:
            cache.finish()  # a reference begun for a cell that failed: done before the next
    rec.duration_s = round(time.perf_counter() - started, 4)
    return rec


def verify_and_time(rec: Record, flow: RNNFlow, cache: ReferenceCache, reps: int, warmup: int,
                    time_it: bool, kinds, budget_s, graphs: bool) -> None:
    """Compare a cell that passed every stage with its reference (its outcome: OK or
    WRONG_RESULT); time a verified one (after its reference is finished, whoever began it)."""
    cfg = flow.cfg
    t0 = time.perf_counter()
    on_gpu = flow.cp is not None
    xp = flow.cp if on_gpu else np
    got = readback.outputs(flow, on_gpu)
    check = compare_with(cfg, cache.get(flow, xp), got)
    if kinks.applies(cfg, check):  # ReLU gradients: allow cuDNN its side of zero
        check = kinks.recheck(cfg, flow.drawn, got, check, xp)
    passed = rec.add_check(check)
    del got
    rec.phase_s["verify"] = round(time.perf_counter() - t0, 4)
    rec.outcome = "OK" if passed else "WRONG_RESULT"
    if passed and time_it:
        t0 = time.perf_counter()
        try:
            rec.timings, rec.graph_timings, rec.graph_refused = time_cell(
                flow, reps, warmup, kinds, budget_s, graphs)
        except CudnnError as exc:  # a call that verified failed when timed: its record, as a
            flow.result.failure = StageFailure("time", exc.call, exc.status_name, exc.code,
                                               exc.reason)  # stage's, and no times
            rec.add_flow(flow.result)
            rec.outcome = outcome_of(flow.result, flow.lib.version_number)
        rec.phase_s["time"] = round(time.perf_counter() - t0, 4)


def run_stages(flow: RNNFlow, cache: ReferenceCache, adopt_built=None) -> FlowResult:
    """The flow's stages; with a GPU, the reference of the flow's values begins in a thread as
    soon as they are drawn (its ``weights`` stage), beside the device stages after it.
    ``adopt_built``: adopts the cell's build ahead (:meth:`~cudnn_rnn.matrix.ahead.Builder.adopt`)
    into a PERSIST_DYNAMIC flow, which then does not call cudnnBuildRNNDynamic itself."""
    if flow.cp is None:
        return flow.run()
    result = flow.run(until="weights")
    if result.failure is None and "weights" in result.reached:
        cache.start(flow, flow.cp)
        if adopt_built is not None and flow.cfg.algo == RNNAlgo.PERSIST_DYNAMIC:
            started = time.perf_counter()
            built = adopt_built()
            if built is not None:
                result.notes.append(built.note())
                if built.flow is not None:  # adopted
                    result.reached.append("build_dynamic")  # waited for, if under way
                    result.stage_s["build_dynamic"] = round(time.perf_counter() - started, 5)
    return flow.run()


def healthy(flow, exc: BaseException) -> None:
    """Re-raise ``exc`` unless the flow's stream and the device still synchronise without
    an error: a failure beside a capture is then the capture's, not the cell's."""
    try:
        flow.stream.synchronize()
        flow.cp.cuda.runtime.deviceSynchronize()
    except Exception:
        raise exc from None


def time_cell(flow: RNNFlow, reps: int, warmup: int, kinds: tuple | None = None,
              budget_s: float | None = None, graphs: bool = True
              ) -> tuple[dict, dict | None, dict | None]:
    """(plain timings, graph-replay timings, why a call's capture was refused), by call.

    A captured call's replays get the repeats and the budget; its plain calls then get a
    :data:`PLAIN_SHARE` of them (at least five, or all of them when fewer were asked
    for), so capturing replaces repeats
    rather than adding to them. A refused call keeps its full plain timing."""
    flop = flow.cfg.flop_count()
    plain, replayed, refused = {}, {}, {}

    def with_rate(t: timing.Timing) -> dict:
        return dict(t.as_record(), tflops=round(timing.tflops(flop, t.median_ms), 4))

    for name, call, outputs in TIMED:
        if kinds is not None and name not in kinds:
            continue
        share, plain_warmup = 1, warmup
        if graphs:
            try:
                replayed[name] = with_rate(capture.time_captured(flow, call, outputs, reps, warmup,
                                                                 budget_s))
                share, plain_warmup = PLAIN_SHARE, 1  # the replays have warmed it up
            except capture.CaptureRefused as exc:
                refused[name] = str(exc)
            except capture.PlainCallFailed as exc:  # the call timed failed: the cell's record
                raise exc.cause from None
            except (CudnnError,) + cuda_errors(flow.cp) as exc:  # the check's calls or copies
                healthy(flow, exc)  # failed: a refusal only if CUDA is still well
                refused[name] = f"the capture's check failed: {type(exc).__name__}: {exc}"
        t = timing.time_call(flow.cp, flow.stream, lambda: call(flow),
                             max(reps // share, min(5, reps)), plain_warmup,
                             budget_s / share if budget_s else budget_s)
        plain[name] = with_rate(t)
    return plain, (replayed or None) if graphs else None, (refused or None) if graphs else None


# outcomes after which the worker's cuDNN handle serves the next cell: a refusal at a
# descriptor or size query, or a cell that ran; anything else (a failed execution, a hang,
# a refused graph capture) and the next cell gets a fresh handle
KEEPS_HANDLE = ("OK", "WRONG_RESULT", "NOT_SUPPORTED", "BAD_PARAM", "SKIPPED")


def kept_handle(handle, rec, exiting: bool, cudnn_error):
    """The worker's handle after a cell: its stream reset to the default one (the cell's
    stream is gone), or closed and dropped (None) where the cell may have left it worse."""
    if handle is None:
        return None
    if not exiting and rec.outcome in KEEPS_HANDLE and not rec.graph_refused:
        with suppress(cudnn_error):
            handle.set_stream(0)
            return handle
    with suppress(cudnn_error):
        handle.close()
    return None
