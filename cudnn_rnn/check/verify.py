"""Checking what cuDNN computed against the float64 reference.

The reference runs on the very values the device holds (inputs and weights
already rounded to the data type), so the remaining error is cuDNN's arithmetic
and storage in lower precision. Errors are relative Frobenius norms,
``‖out − ref‖ / ‖ref‖``; NaN (including unwritten, poisoned outputs) never passes.

Tolerances are stated per precision in :data:`TOLERANCE` as (outputs, gradients,
ReLU gradients). They sit 5-10x above the largest errors measured on an H200
(cuDNN 9.19 and 9.14) across the default matrix. ReLU gradients get their own,
looser bound: the ReLU derivative is a step, so wherever rounding moves a
pre-activation across zero a whole gradient term switches on or off. With TF32
or FP16 arithmetic that alone gives 2-7 % gradient error while the smooth cells
stay near 1e-3 (measured: FLOAT with DEFAULT math, RELU dx 2.3e-2, LSTM 3.4e-4). True FP32
keeps the tight bound: a ReLU cell whose outputs pass and gradients do not is rechecked
with the reference's derivative switched at pre-activations within rounding of zero
(:mod:`cudnn_rnn.check.kinks`), which names every switch in the record.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cudnn_rnn.bindings.enums import DataType, MathType, RNNMode, RNNDataLayout

from cudnn_rnn.check import reference
from cudnn_rnn.engine.config import RNNConfig

# (data type, math precision, math type or None for any) → (outputs, gradients, ReLU gradients)
TOLERANCE = {
    (DataType.DOUBLE, DataType.DOUBLE, None): (1e-12, 1e-12, 1e-12),
    # FMA is true FP32; DEFAULT and TENSOR_OP permit TF32 on Ampere and later (10-bit
    # mantissa), and ALLOW_CONVERSION may down-convert FP32 operands to FP16.
    (DataType.FLOAT, DataType.FLOAT, MathType.FMA_MATH): (5e-5, 5e-5, 5e-5),
    (DataType.FLOAT, DataType.FLOAT, None): (5e-3, 5e-3, 1e-1),
    (DataType.HALF, DataType.FLOAT, None): (5e-3, 5e-3, 1e-1),  # FP16 storage, FP32 math
    (DataType.HALF, DataType.HALF, None): (3e-2, 3e-2, 3e-1),  # FP16 arithmetic too
    (DataType.BFLOAT16, DataType.FLOAT, None): (3e-2, 3e-2, 3e-1),  # 8-bit mantissa storage
}
FALLBACK_TOLERANCE = (0.25, 0.5, 0.5)  # any other pairing (FP8, integers): a sanity bound only

GRADIENT_OUTPUTS = ("dx", "dhx", "dcx", "dw")


def tolerances(cfg: RNNConfig) -> tuple[float, float]:
    """(outputs, gradients) relative tolerance for ``cfg``."""
    triple = FALLBACK_TOLERANCE
    for key in ((cfg.data_type, cfg.math_prec, cfg.math_type), (cfg.data_type, cfg.math_prec, None)):
        if key in TOLERANCE:
            triple = TOLERANCE[key]
            break
    out, grad, relu_grad = triple
    return out, relu_grad if cfg.mode == RNNMode.RNN_RELU else grad


def _xp(*arrays):
    return reference.array_module(next((a for a in arrays if a is not None), None))


def relative_error(out, ref, scale: float | None = None) -> float:
    """‖out − ref‖ / ‖ref‖ in float64 (on the GPU when either is a cupy array); ``scale``:
    ‖ref‖ when already known (:class:`Expected` keeps it)."""
    xp = reference.array_module(out)
    if xp is np:
        xp = reference.array_module(ref)
    out = xp.asarray(out, dtype=xp.float64)
    ref = xp.asarray(ref, dtype=xp.float64)
    if out.shape != ref.shape:
        raise ValueError(f"shape mismatch {out.shape} vs {ref.shape}")
    if not bool(xp.all(xp.isfinite(out))):
        return float("inf")
    scale = float(xp.linalg.norm(ref)) if scale is None else scale
    diff = float(xp.linalg.norm(out - ref))
    return diff / scale if scale > 0 else diff


def _nonfinite(a) -> int:
    xp = reference.array_module(a)
    return int(a.size - int(xp.isfinite(a).sum()))


@dataclass
class Verification:
    errors: dict  # name → relative error
    tolerance: float
    gradient_tolerance: float
    nonfinite: dict = field(default_factory=dict)  # name → count of NaN/inf elements
    padding: dict = field(default_factory=dict)  # what cuDNN left in dx's padding (observed)
    kinks: dict = field(default_factory=dict)  # a ReLU recheck (cudnn_rnn.check.kinks)

    @property
    def passed(self) -> bool:
        return all(self.within(name) for name in self.errors)

    def within(self, name: str) -> bool:
        limit = self.gradient_tolerance if name in GRADIENT_OUTPUTS else self.tolerance
        return self.errors[name] <= limit

    @property
    def failures(self) -> list:
        return [n for n in self.errors if not self.within(n)]

    def as_record(self) -> dict:
        return {"errors": {k: _finite(v) for k, v in self.errors.items()},
                "tolerance": self.tolerance, "gradient_tolerance": self.gradient_tolerance,
                "nonfinite": self.nonfinite, "passed": self.passed,
                **({"padded_dx": self.padding} if self.padding else {}),
                **({"relu_kinks": self.kinks} if self.kinks else {})}


def _finite(v: float):
    return v if np.isfinite(v) else None


def expected(cfg: RNNConfig, host: dict, xp=np, keep_on_device: bool = False):
    """Reference forward and gradients for the flow's host copies of inputs and weights.

    Evaluated in float64 with ``xp``: numpy, or cupy (cuBLAS DGEMM, not cuDNN) when a GPU
    is there. Results come back as numpy unless ``keep_on_device``.
    """
    params, fwd, dy, dhy, dcy = expected_parts(cfg, host, xp)
    grads = reference.backward(cfg, params, fwd, dy, dhy, dcy)
    fwd = reference.Forward(fwd.y, fwd.hy, fwd.cy)  # drop the caches
    return (fwd, grads) if keep_on_device else to_host((fwd, grads))


def expected_parts(cfg: RNNConfig, host: dict, xp=np) -> tuple:
    """(weights, forward with its caches, dy, dhy, dcy) of the reference, in ``xp``."""
    # the weights are cupy arrays where the flow drew them on a GPU
    to = (lambda a: None if a is None else xp.asarray(a)) if xp is not np else \
        (lambda a: a.get() if type(a).__module__.startswith("cupy") else a)
    params = reference.params_from_arrays(cfg, {k: to(v) for k, v in host["weights"].items()})
    lengths = None if cfg.equal_lengths else to(np.asarray(cfg.seq_lengths))
    fwd = reference.forward(cfg, params, to(host["x"]), to(host["hx"]), to(host.get("cx")),
                            lengths=lengths)
    return params, fwd, to(host["dy"]), to(host["dhy"]), to(host.get("dcy"))


def to_host(pair):
    """A (forward, gradients) pair with every array as numpy."""
    xp = reference.array_module(pair[0].y)
    if xp is np:
        return pair
    back = lambda a: None if a is None else xp.asnumpy(a)  # noqa: E731
    fwd, grads = pair
    dparams = [reference.LayerParams([back(a) for a in p.W], [back(a) for a in p.R],
                                     [back(a) for a in p.bW], [back(a) for a in p.bR],
                                     back(p.P)) for p in grads.dparams]
    return (reference.Forward(back(fwd.y), back(fwd.hy), back(fwd.cy)),
            reference.Gradients(back(grads.dx), back(grads.dhx), back(grads.dcx), dparams))


def compare(cfg: RNNConfig, host: dict, outputs: dict) -> Verification:
    """Errors of every output present in ``outputs`` (see
    :func:`cudnn_rnn.engine.readback.outputs`)."""
    return compare_with(cfg, expected(cfg, host), outputs)


def _without_padded_dx(cfg: RNNConfig, outputs: dict) -> tuple[dict, dict]:
    """``outputs`` with dx's padded positions set to the reference's 0, and what cuDNN had
    left there. cuDNN's paddingFill covers the output descriptor only (cudnn_adv.h: "symbol
    for filling padding position in output"); nothing defines dx past a sequence's end, so
    it is observed, not judged. y's padding is the documented fill and stays checked."""
    dx = outputs["dx"]
    xp = reference.array_module(dx)
    running = reference.active_steps(cfg.seq_lengths, dx.shape[0], xp)
    pad = dx[~xp.broadcast_to(running, dx.shape)]
    finite = pad[xp.isfinite(pad)]
    seen = {"values": int(pad.size), "nonfinite": int(pad.size - finite.size),
            "max_abs": float(xp.abs(finite).max()) if finite.size else None}
    return dict(outputs, dx=xp.where(running, dx, 0.0)), seen


@dataclass
class Expected:
    """A reference evaluated once, ready for every cell that holds its values (cells that
    differ only in math type, math precision or algorithm): each output by the name of the
    buffer it is compared with, the weight gradients flattened in the order of their keys,
    and each one's norm (its relative error's denominator), where the reference ran."""
    outputs: dict  # y, hy, cy, dx, dhx, dcx, and y_inf, hy_inf, cy_inf (the same arrays)
    dw_keys: list = field(default_factory=list)  # (pseudo_layer, lin_id, kind), sorted
    dw: object = None  # every weight gradient, raveled and concatenated in dw_keys' order
    norms: dict = field(default_factory=dict)  # name (and "dw") -> ‖reference‖

    def arrays(self) -> list:
        """Each array once (the inference outputs are the training ones)."""
        found = {id(a): a for a in [*self.outputs.values(), self.dw] if a is not None}
        return list(found.values())

    @property
    def nbytes(self) -> int:
        return sum(int(a.nbytes) for a in self.arrays())


def prepare(cfg: RNNConfig, pair) -> Expected:
    """An evaluated ``(forward, gradients)`` pair as :class:`Expected` (norms included)."""
    fwd, grads = pair
    ref = {"y": fwd.y, "hy": fwd.hy, "y_inf": fwd.y, "hy_inf": fwd.hy}
    if fwd.cy is not None:
        ref.update(cy=fwd.cy, cy_inf=fwd.cy)
    out = Expected(ref)
    if grads is not None:
        ref.update(dx=grads.dx, dhx=grads.dhx)
        if grads.dcx is not None:
            ref["dcx"] = grads.dcx
        want = reference.arrays_from_params(cfg, grads.dparams)
        out.dw_keys = sorted(want)
        out.dw = _xp(*want.values()).concatenate([want[k].ravel() for k in out.dw_keys])
    norms = {}
    for name, a in [*ref.items(), ("dw", out.dw)]:
        if a is not None:
            xp = reference.array_module(a)
            norms[id(a)] = norms.get(id(a)) or float(xp.linalg.norm(xp.asarray(a, xp.float64)))
            out.norms[name] = norms[id(a)]
    return out


def compare_with(cfg: RNNConfig, expected_pair, outputs: dict) -> Verification:
    """Like :func:`compare`, for an already evaluated ``(forward, gradients)`` pair or its
    :class:`Expected` form."""
    e = expected_pair if isinstance(expected_pair, Expected) else prepare(cfg, expected_pair)
    errors, nonfinite, padding = {}, {}, {}
    if not cfg.equal_lengths and "dx" in outputs:
        outputs, padding = _without_padded_dx(cfg, outputs)
        if cfg.layout == RNNDataLayout.SEQ_MAJOR_PACKED:
            padding = {}  # a packed dx has no padding: the zeros there are the unpacking's
    for name, value in e.outputs.items():
        if name in outputs:
            errors[name] = relative_error(outputs[name], value, e.norms.get(name))
            nonfinite[name] = _nonfinite(outputs[name])
    if e.dw is not None and "dw" in outputs:
        got = outputs["dw"]
        missing = [k for k in e.dw_keys if k not in got]
        if missing:
            raise ValueError(f"dw lacks {missing[:3]}")
        flat_got = _xp(*got.values()).concatenate([got[k].ravel() for k in e.dw_keys])
        errors["dw"] = relative_error(flat_got, e.dw, e.norms.get("dw"))
        nonfinite["dw"] = _nonfinite(flat_got)
    tol, grad_tol = tolerances(cfg)
    return Verification(errors, tol, grad_tol, nonfinite, padding)
