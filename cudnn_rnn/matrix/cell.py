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
from collections import OrderedDict

import numpy as np

from cudnn_rnn.bindings.enums import ForwardMode, StatusV9, status_category
from cudnn_rnn.check import reference
from cudnn_rnn.check.verify import compare_with, expected, to_host
from cudnn_rnn.engine import readback, timing
from cudnn_rnn.engine.flow import FlowResult, RNNFlow
from cudnn_rnn.engine.values import HostValues, values_key
from cudnn_rnn.matrix.record import Record

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
        family = status_category(f.code)
        if family in StatusV9._value2member_map_:
            return StatusV9(family).name  # NOT_SUPPORTED_SHAPE counts as NOT_SUPPORTED
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

    @staticmethod
    def key(flow: RNNFlow) -> tuple:
        """The reference depends on the values only
        (:func:`~cudnn_rnn.engine.values.values_key`)."""
        return values_key(flow.cfg, flow.entries, flow.init, flow.seed)

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


def run_cell(cell, lib, *, device: bool, reps: int = 20, warmup: int = 3, time_it: bool = True,
             cache: ReferenceCache | None = None, seed: int = 1234,
             values: HostValues | None = None, kinds: tuple | None = None,
             budget_s: float | None = None) -> Record:
    """Everything that happens to one cell; returns its record (never raises for cuDNN).

    ``kinds`` limits the timed calls (names of :data:`TIMED`; all four by default);
    ``budget_s`` caps each measurement's device time (see
    :func:`cudnn_rnn.engine.timing.time_call`).
    Verification always covers every output and gradient, whatever is timed.
    """
    started = time.perf_counter()
    cfg = cell.config
    rec = Record.of(cell, lib.version_string, lib.resolved_path)
    with RNNFlow(cfg, lib, device=device, init="random", seed=seed, values=values) as flow:
        result = flow.run()
        rec.add_flow(result)
        outcome = outcome_of(result, lib.version_number)
        if outcome is None:
            t0 = time.perf_counter()
            on_gpu = flow.cp is not None
            want = (cache or ReferenceCache(1)).get(flow, flow.cp if on_gpu else np)
            passed = rec.add_check(compare_with(cfg, want, readback.outputs(flow, on_gpu)))
            del want
            rec.phase_s["verify"] = round(time.perf_counter() - t0, 4)
            outcome = "OK" if passed else "WRONG_RESULT"
            if passed and time_it:
                t0 = time.perf_counter()
                rec.timings = time_cell(flow, reps, warmup, kinds, budget_s)
                rec.phase_s["time"] = round(time.perf_counter() - t0, 4)
        rec.outcome = outcome
    rec.duration_s = round(time.perf_counter() - started, 4)
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
