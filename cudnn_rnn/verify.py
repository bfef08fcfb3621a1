"""Checking what cuDNN computed against the float64 reference.

The reference runs on the very values the device holds (inputs and weights
already rounded to the data type), so the remaining error is cuDNN's arithmetic
and storage in lower precision. Errors are relative Frobenius norms,
``‖out − ref‖ / ‖ref‖``; NaN (including unwritten, poisoned outputs) never passes.

Tolerances are stated per precision in :data:`TOLERANCE`; gradients get
:data:`GRADIENT_FACTOR` times more room, since they accumulate over the whole
sequence in both directions.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bindings.enums import DataType, MathType

from . import reference
from .config import RNNConfig

# (data type, math precision, math type or None for any) → relative tolerance for outputs.
TOLERANCE = {
    (DataType.DOUBLE, DataType.DOUBLE, None): 1e-10,
    # FMA is true FP32; DEFAULT and TENSOR_OP may use TF32 on Ampere and later (10-bit mantissa).
    (DataType.FLOAT, DataType.FLOAT, MathType.FMA_MATH): 1e-5,
    (DataType.FLOAT, DataType.FLOAT, MathType.DEFAULT_MATH): 5e-3,
    (DataType.FLOAT, DataType.FLOAT, MathType.TENSOR_OP_MATH): 5e-3,
    # ALLOW_CONVERSION may down-convert FP32 operands to FP16.
    (DataType.FLOAT, DataType.FLOAT, MathType.TENSOR_OP_MATH_ALLOW_CONVERSION): 2e-2,
    (DataType.HALF, DataType.FLOAT, None): 2e-2,  # FP16 storage of every output
    (DataType.HALF, DataType.HALF, None): 5e-2,  # and FP16 arithmetic
    (DataType.BFLOAT16, DataType.FLOAT, None): 6e-2,  # 8-bit mantissa storage
}
FALLBACK_TOLERANCE = 0.25  # any other pairing (FP8, integers): a sanity bound only
GRADIENT_FACTOR = 2.0

FORWARD_OUTPUTS = ("y", "hy", "cy", "y_inf", "hy_inf", "cy_inf")
GRADIENT_OUTPUTS = ("dx", "dhx", "dcx", "dw")


def tolerance(cfg: RNNConfig) -> float:
    """Relative tolerance for forward outputs of ``cfg``."""
    for key in ((cfg.data_type, cfg.precision, cfg.math_type), (cfg.data_type, cfg.precision, None)):
        if key in TOLERANCE:
            return TOLERANCE[key]
    return FALLBACK_TOLERANCE


def relative_error(out: np.ndarray, ref: np.ndarray) -> float:
    out = np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if out.shape != ref.shape:
        raise ValueError(f"shape mismatch {out.shape} vs {ref.shape}")
    if not np.all(np.isfinite(out)):
        return float("inf")
    scale = np.linalg.norm(ref)
    diff = np.linalg.norm(out - ref)
    return float(diff / scale) if scale > 0 else float(diff)


@dataclass
class Verification:
    errors: dict  # name → relative error
    tolerance: float
    gradient_tolerance: float
    nonfinite: dict = field(default_factory=dict)  # name → count of NaN/inf elements

    @property
    def passed(self) -> bool:
        return all(self.within(name) for name in self.errors)

    def within(self, name: str) -> bool:
        limit = self.gradient_tolerance if name in GRADIENT_OUTPUTS else self.tolerance
        return self.errors[name] <= limit

    @property
    def failures(self) -> list:
        return [n for n in self.errors if not self.within(n)]

    @property
    def worst(self) -> float:
        return max(self.errors.values()) if self.errors else 0.0

    def as_record(self) -> dict:
        return {"errors": {k: _finite(v) for k, v in self.errors.items()},
                "tolerance": self.tolerance, "gradient_tolerance": self.gradient_tolerance,
                "nonfinite": self.nonfinite, "passed": self.passed}


def _finite(v: float):
    return v if np.isfinite(v) else None


def expected(cfg: RNNConfig, host: dict, training: bool = True):
    """Reference forward (and gradients) for the flow's host copies of inputs and weights."""
    from .flow import params_from_arrays
    params = params_from_arrays(cfg, host["weights"])
    fwd = reference.forward(cfg, params, host["x"], host["hx"], host.get("cx"))
    grads = reference.backward(cfg, params, fwd, host["dy"], host["dhy"], host.get("dcy")) \
        if training else None
    return fwd, grads


def compare(cfg: RNNConfig, host: dict, outputs: dict, training: bool = True) -> Verification:
    """Errors of every output present in ``outputs`` (see :meth:`RNNFlow.outputs`)."""
    return compare_with(cfg, expected(cfg, host, training), outputs)


def compare_with(cfg: RNNConfig, expected_pair, outputs: dict) -> Verification:
    """Like :func:`compare`, for an already evaluated ``(forward, gradients)`` pair."""
    from .flow import arrays_from_params
    fwd, grads = expected_pair
    ref = {"y": fwd.y, "hy": fwd.hy, "y_inf": fwd.y, "hy_inf": fwd.hy}
    if fwd.cy is not None:
        ref.update(cy=fwd.cy, cy_inf=fwd.cy)
    if grads is not None:
        ref.update(dx=grads.dx, dhx=grads.dhx)
        if grads.dcx is not None:
            ref["dcx"] = grads.dcx
    errors, nonfinite = {}, {}
    for name, value in ref.items():
        if name in outputs:
            errors[name] = relative_error(outputs[name], value)
            nonfinite[name] = int(np.size(outputs[name]) - np.isfinite(outputs[name]).sum())
    if grads is not None and "dw" in outputs:
        want = arrays_from_params(cfg, grads.dparams)
        got = outputs["dw"]
        keys = sorted(want)
        missing = [k for k in keys if k not in got]
        if missing:
            raise ValueError(f"dw lacks {missing[:3]}")
        flat_got = np.concatenate([got[k].ravel() for k in keys])
        flat_want = np.concatenate([want[k].ravel() for k in keys])
        errors["dw"] = relative_error(flat_got, flat_want)
        nonfinite["dw"] = int(flat_got.size - np.isfinite(flat_got).sum())
    tol = tolerance(cfg)
    return Verification(errors, tol, tol * GRADIENT_FACTOR, nonfinite)
