"""A probe cell's life, in one place: stages → verification → timing → one record.

1. Walk the flow's stages (:mod:`.flow`); the first failing stage ends the cell with
   its call, status name and code and cuDNN's reason. Without a GPU, the cell ends
   after the descriptor stages as SKIPPED.
2. A cell that passed every stage is compared with the float64 reference (outputs of
   training and inference, and the gradients dx, dhx, dcx, dw) on random data.
   Outside the tolerance it is WRONG_RESULT and gets no speed claim.
3. Only a verified cell is timed: forward inference, forward training, backward
   data and backward weights, each a median over ``reps`` CUDA-event timed calls
   after warm-up, with TFLOPS by the sample's FLOP formula.

The record's keys are listed in :data:`RECORD_KEYS`; speed-ups against the FP32
baseline are added by the runner, which has every cell's record.
"""
from __future__ import annotations

import time
from collections import OrderedDict

import numpy as np

from bindings.enums import ForwardMode, StatusV9

from . import reference, timing
from .flow import FlowResult, HostValues, RNNFlow, values_key
from .verify import Verification, compare_with, expected, to_host

RECORD_KEYS = ("id", "block", "implicit", "data_type", "math_prec", "math_type", "algo", "cell",
               "direction", "input_mode", "bias_mode", "proj_size", "layout", "shape", "outcome",
               "failed_stage", "failed_call", "status", "status_code", "reason", "stages",
               "skipped_stages", "skip_reason", "notes", "sizes", "errors", "verification",
               "timings", "flop", "cudnn_version", "library_path", "duration_s")
TIMED = (("forward_inference", lambda f: f.forward(ForwardMode.INFERENCE)),
         ("forward_training", lambda f: f.forward(ForwardMode.TRAINING)),
         ("backward_data", lambda f: f.backward_data()),
         ("backward_weights", lambda f: f.backward_weights()))


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
        category = f.code // 1000 * 1000
        if category in StatusV9._value2member_map_:
            return StatusV9(category).name  # NOT_SUPPORTED_SHAPE counts as NOT_SUPPORTED
    return f.status


class ReferenceCache:
    """Reference results shared by cells whose device inputs are the same values.

    The flow draws its random inputs and weights from ``seed`` in a fixed order over
    the weight entries cuDNN reports, then rounds them to the data type; so the data
    type, the seed, the structural axes and the reported weight layout determine
    every value. Cells that differ only in math type, math precision or algorithm
    therefore share one float64 evaluation. Only results of at most ``max_bytes``
    are kept, on the host, so the device memory in use stays flat between cells.
    """

    def __init__(self, size: int = 16, max_bytes: int = 64 << 20, device_bytes: int = 0):
        self.size = size
        self.max_bytes = max_bytes
        self.device_bytes = device_bytes  # results this large may stay on the GPU
        self._items: OrderedDict = OrderedDict()  # key -> (value, bytes held on the GPU)
        self.hits = self.misses = 0

    key = staticmethod(values_key)  # the reference depends on the values only

    def get(self, flow: RNNFlow, xp=np):
        k = self.key(flow)
        if k in self._items:
            self.hits += 1
            self._items.move_to_end(k)
            return self._items[k][0]
        self.misses += 1
        value = expected(flow.cfg, flow.host, xp, keep_on_device=True)
        nbytes = _nbytes(value)
        if xp is not np and nbytes <= self.device_bytes:
            self._items[k] = (value, nbytes)
        elif nbytes <= self.max_bytes:
            value = to_host(value)
            self._items[k] = (value, 0)
        while self._items and (len(self._items) > self.size or self.on_device() > self.device_bytes):
            self._items.popitem(last=False)
        return value

    def on_device(self) -> int:
        return sum(n for _v, n in self._items.values())


def _arrays(pair):
    fwd, grads = pair
    out = [fwd.y, fwd.hy, fwd.cy, grads.dx, grads.dhx, grads.dcx]
    out += reference.flat_params(grads.dparams)
    return [a for a in out if a is not None]


def _nbytes(pair) -> int:
    return sum(int(a.nbytes) for a in _arrays(pair))


def base_record(cell, lib) -> dict:
    return skeleton_record(cell, lib.version_string, lib.resolved_path)


def run_cell(cell, lib, *, device: bool, reps: int = 20, warmup: int = 3, time_it: bool = True,
             cache: ReferenceCache | None = None, seed: int = 1234,
             values: HostValues | None = None, kinds: tuple | None = None,
             budget_s: float | None = None) -> dict:
    """Everything that happens to one cell; returns its record (never raises for cuDNN).

    ``kinds`` limits the timed calls (names of :data:`TIMED`; all four by default);
    ``budget_s`` caps each measurement's device time (see :func:`.timing.time_call`).
    Verification always covers every output and gradient, whatever is timed.
    """
    started = time.perf_counter()
    cfg = cell.config
    rec = base_record(cell, lib)
    phase = {}
    with RNNFlow(cfg, lib, device=device, init="random", seed=seed, values=values) as flow:
        result = flow.run()
        rec.update(stages=result.reached, skipped_stages=result.skipped,
                   skip_reason=result.skip_reason, notes=list(result.notes), sizes=result.sizes)
        if result.failure is not None:
            rec.update(result.failure.as_record())
        outcome = outcome_of(result, lib.version_number)
        if outcome is None:
            t0 = time.perf_counter()
            on_gpu = flow.cp is not None
            expected = (cache or ReferenceCache(1)).get(flow, flow.cp if on_gpu else np)
            check: Verification = compare_with(cfg, expected, flow.outputs(on_device=on_gpu))
            del expected
            phase["verify"] = round(time.perf_counter() - t0, 4)
            rec["errors"] = check.as_record()["errors"]
            rec["verification"] = {k: v for k, v in check.as_record().items() if k != "errors"}
            if not check.passed:
                outcome = "WRONG_RESULT"
                rec["reason"] = "outside tolerance: " + ", ".join(
                    f"{n} {check.errors[n]:.2e}" for n in check.failures)
            else:
                outcome = "OK"
                if time_it:
                    t0 = time.perf_counter()
                    rec["timings"] = time_cell(flow, reps, warmup, kinds, budget_s)
                    phase["time"] = round(time.perf_counter() - t0, 4)
        rec["outcome"] = outcome
        rec["stage_s"] = result.stage_s
        rec["phase_s"] = phase
    rec["duration_s"] = round(time.perf_counter() - started, 4)
    return rec


def time_cell(flow: RNNFlow, reps: int, warmup: int, kinds: tuple | None = None,
              budget_s: float | None = None) -> dict:
    flop = flow.cfg.flop_count()
    out = {}
    for name, call in TIMED:
        if kinds is not None and name not in kinds:
            continue
        t = timing.time_call(flow.cp, flow.stream, lambda: call(flow), reps, warmup, budget_s)
        out[name] = dict(t.as_record(), tflops=round(timing.tflops(flop, t.median_ms), 4))
    return out


def skeleton_record(cell, cudnn_version: str, library_path: str) -> dict:
    """A record for a cell whose worker could not report one itself."""
    cfg = cell.config
    rec = {k: None for k in RECORD_KEYS}
    rec.update(cfg.as_record())
    rec.update(id=cell.id, block=cell.block, implicit=cell.implicit, stages=[], skipped_stages=[],
               notes=[], sizes={}, flop=cfg.flop_count(), cudnn_version=cudnn_version,
               library_path=library_path)
    return rec


def crash_record(cell, info: dict, reason: str, status: str) -> dict:
    rec = skeleton_record(cell, info["cudnn_version"], info["library_path"])
    rec.update(outcome="CRASH", status=status, reason=reason)
    return rec


def error_record(cell, info: dict, exc: BaseException) -> dict:
    """A cell on which this tool's own code raised: outcome ERROR, with the exception's
    type, message and innermost frames. It says nothing about cuDNN; it is a bug to fix."""
    import traceback
    rec = skeleton_record(cell, info["cudnn_version"], info["library_path"])
    frames = traceback.extract_tb(exc.__traceback__)[-3:]
    rec.update(outcome="ERROR", status=type(exc).__name__, reason=f"{type(exc).__name__}: {exc}",
               notes=[f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} in {f.name}" for f in frames])
    return rec
