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

import hashlib
import time
from collections import OrderedDict

import numpy as np

from bindings.enums import ForwardMode, StatusV9

from . import reference, timing
from .config import RNNConfig
from .flow import FlowResult, RNNFlow, params_from_arrays
from .verify import Verification, compare_with

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
    """Reference results keyed by the exact bytes of the inputs and weights, so cells that
    differ only in math type, precision or algorithm share one float64 evaluation."""

    def __init__(self, size: int = 8):
        self.size = size
        self._items: OrderedDict = OrderedDict()
        self.hits = self.misses = 0

    @staticmethod
    def key(cfg: RNNConfig, host: dict) -> str:
        h = hashlib.blake2b(digest_size=16)
        shape_axes = (cfg.cell, cfg.seq_length, cfg.num_layers, cfg.hidden_size, cfg.mini_batch,
                      cfg.input, cfg.proj, cfg.direction, cfg.input_mode, cfg.bias_mode)
        h.update(repr(shape_axes).encode())
        for name in sorted(k for k in host if k != "weights"):
            h.update(name.encode())
            h.update(np.ascontiguousarray(host[name]).tobytes())
        for key in sorted(host["weights"]):
            h.update(repr(key).encode())
            h.update(np.ascontiguousarray(host["weights"][key]).tobytes())
        return h.hexdigest()

    def get(self, cfg: RNNConfig, host: dict, xp=np):
        k = self.key(cfg, host)
        if k in self._items:
            self.hits += 1
            self._items.move_to_end(k)
            return self._items[k]
        self.misses += 1
        value = evaluate_reference(cfg, host, xp)
        self._items[k] = value
        while len(self._items) > self.size:
            self._items.popitem(last=False)
        return value


def evaluate_reference(cfg: RNNConfig, host: dict, xp=np):
    """Forward and gradients in float64 with ``xp`` (numpy, or cupy for large shapes);
    results come back as numpy arrays."""
    to = (lambda a: None if a is None else xp.asarray(a)) if xp is not np else (lambda a: a)
    back = (lambda a: None if a is None else xp.asnumpy(a)) if xp is not np else (lambda a: a)
    weights = {k: to(v) for k, v in host["weights"].items()}
    params = params_from_arrays(cfg, weights)
    fwd = reference.forward(cfg, params, to(host["x"]), to(host["hx"]), to(host.get("cx")))
    grads = reference.backward(cfg, params, fwd, to(host["dy"]), to(host["dhy"]),
                               to(host.get("dcy")))
    fwd_np = reference.Forward(back(fwd.y), back(fwd.hy), back(fwd.cy))
    dparams = [reference.LayerParams([back(a) for a in p.W], [back(a) for a in p.R],
                                     [back(a) for a in p.bW], [back(a) for a in p.bR],
                                     back(p.P)) for p in grads.dparams]
    grads_np = reference.Gradients(back(grads.dx), back(grads.dhx), back(grads.dcx), dparams)
    return fwd_np, grads_np


def base_record(cell, lib) -> dict:
    return skeleton_record(cell, lib.version_string, lib.resolved_path)


def run_cell(cell, lib, *, device: bool, reps: int = 20, warmup: int = 3, time_it: bool = True,
             cache: ReferenceCache | None = None, seed: int = 1234) -> dict:
    """Everything that happens to one cell; returns its record (never raises for cuDNN)."""
    started = time.perf_counter()
    cfg = cell.config
    rec = base_record(cell, lib)
    with RNNFlow(cfg, lib, device=device, init="random", seed=seed) as flow:
        result = flow.run()
        rec.update(stages=result.reached, skipped_stages=result.skipped,
                   skip_reason=result.skip_reason, notes=list(result.notes), sizes=result.sizes)
        if result.failure is not None:
            rec.update(result.failure.as_record())
        outcome = outcome_of(result, lib.version_number)
        if outcome is None:
            xp = flow.cp if (flow.cp is not None and cfg.seq_length * cfg.mini_batch
                             * cfg.hidden_size >= 1 << 16) else np
            expected = (cache or ReferenceCache(1)).get(cfg, flow.host, xp)
            check: Verification = compare_with(cfg, expected, flow.outputs())
            rec["errors"] = check.as_record()["errors"]
            rec["verification"] = {k: v for k, v in check.as_record().items() if k != "errors"}
            if not check.passed:
                outcome = "WRONG_RESULT"
                rec["reason"] = "outside tolerance: " + ", ".join(
                    f"{n} {check.errors[n]:.2e}" for n in check.failures)
            else:
                outcome = "OK"
                if time_it:
                    rec["timings"] = time_cell(flow, reps, warmup)
        rec["outcome"] = outcome
    rec["duration_s"] = round(time.perf_counter() - started, 4)
    return rec


def time_cell(flow: RNNFlow, reps: int, warmup: int) -> dict:
    flop = flow.cfg.flop_count()
    out = {}
    for name, call in TIMED:
        t = timing.time_call(flow.cp, flow.stream, lambda: call(flow), reps, warmup)
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
