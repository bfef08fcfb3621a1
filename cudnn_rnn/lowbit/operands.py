"""What the 8-bit engine uploads, prepared on the host: each GEMM's precision, its weight
in the operand format, the per-column dequantization factors and the activation scale.

A pseudo-layer's input GEMM and recurrent GEMM each run in one precision of
:data:`cudnn_rnn.lowbit.gemm.PRECISIONS`: the plan's 8-bit format where a
:class:`~cudnn_rnn.lowbit.model.QuantPlan` quantizes that GEMM ("int8", or "fp8" for
E4M3), else the engine's float precision. Weights are converted here, once, by the
rules of :mod:`cudnn_rnn.lowbit.quant` (so the codes are exactly those the float64 model
uses; the 8-bit ones a block of rows at a time, on the GPU where an engine passes cupy
as ``xp``, the same float64 operations, rounded alike, copied back: on the host E4M3
takes 20-40 s for one 16384 x 4096 weight, and the tuner prepares each weight for every
row), and :attr:`Operand.seen` keeps, in float64, the weights as that GEMM sees them:
the reference run on :func:`seen_weights` isolates the error of rounding the activations.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cudnn_rnn.bindings.enums import DataType
from cudnn_rnn.engine import dtypes
from cudnn_rnn.lowbit import quant
from cudnn_rnn.lowbit.model import GemmScales, QuantPlan, Stacked, weight_column

FLOAT_PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
FORMAT_PRECISION = {"int8": "int8", "e4m3": "fp8"}  # a plan's format -> the GEMM precision
BLOCK_VALUES = 1 << 22  # weight values an 8-bit conversion takes at once (32 MB in float64)


def eight_bit_precisions(plan) -> set:
    """The GEMM precision of ``plan``'s 8-bit GEMMs, as a set (empty without a plan)."""
    return set() if plan is None else {FORMAT_PRECISION[plan.fmt]}


@dataclass
class Operand:
    """One GEMM's weight side: the precision, the weight's codes (numpy, the operand's
    dtype: float32, float16, uint16 for BF16 bits, int8, uint8 for E4M3 codes), the
    float64 weight those codes stand for, ``dq`` (one float32 per output column: what
    an output column is multiplied by) and ``act_scale`` (what the activation operand is
    divided by before rounding; 1 for a float GEMM)."""
    precision: str
    codes: np.ndarray
    seen: np.ndarray
    dq: np.ndarray
    act_scale: float


def weight_operand(w: np.ndarray, precision: str, scales: GemmScales | None,
                   xp=np) -> Operand:
    """``w`` (rows, K) float64 in ``precision``; ``scales`` for an 8-bit one (from a plan);
    ``xp`` (numpy or cupy) where an 8-bit conversion runs (the operand is on the host)."""
    rows = w.shape[0]
    ones = np.ones(rows, dtype=np.float32)
    if precision in ("fp32", "tf32"):
        codes = w.astype(np.float32)
        return Operand(precision, codes, codes.astype(np.float64), ones, 1.0)
    if precision == "fp16":
        codes = w.astype(np.float16)
        return Operand(precision, codes, codes.astype(np.float64), ones, 1.0)
    if precision == "bf16":
        codes = dtypes.encode(w, DataType.BFLOAT16)
        return Operand(precision, codes, dtypes.decode(codes, DataType.BFLOAT16), ones, 1.0)
    if scales is None:
        raise ValueError(f"an {precision} GEMM needs scales")
    w_col = weight_column(scales)  # per output channel (rows, 1) or per tensor
    if precision == "int8":
        quantize, dequantize = quant.quantize_int8, quant.dequantize_int8
    elif precision == "fp8":
        quantize, dequantize = quant.quantize_e4m3, quant.dequantize_e4m3
    else:
        raise ValueError(f"unknown precision {precision!r}")
    # a block of rows at a time: the conversion's temporaries (about 7x the block in float64
    # for E4M3) stay small, and so does what CuPy's pool keeps of them
    host = getattr(xp, "asnumpy", np.asarray)
    codes = np.empty(w.shape, np.int8 if precision == "int8" else np.uint8)
    seen = np.empty(w.shape, np.float64)
    step = max(1, BLOCK_VALUES // max(1, w.shape[1]))
    for r in range(0, rows, step):
        col = w_col[r:r + step] if w_col.ndim else w_col
        block = quantize(xp.asarray(w[r:r + step]), col)
        codes[r:r + step] = host(block)
        seen[r:r + step] = host(dequantize(block, col))
    dq = np.broadcast_to(scales.act * w_col.ravel(), (rows,)).astype(np.float32)
    return Operand(precision, codes, seen, dq, float(scales.act))


@dataclass
class Operands:
    """One pseudo-layer's two GEMMs (``input``: W, ``recurrent``: R) and its biases."""
    input: Operand
    recurrent: Operand
    bW: np.ndarray  # (gates*hidden,) float32
    bR: np.ndarray


def _precision(plan: QuantPlan | None, name: str, k: int, float_precision: str):
    scales = None if plan is None else getattr(plan, name)[k]
    return (float_precision if scales is None else FORMAT_PRECISION[plan.fmt]), scales


def precisions(stacked: list[Stacked], float_precision: str,
               plan: QuantPlan | None = None) -> list[tuple[str, str]]:
    """(input GEMM's precision, recurrent GEMM's) per pseudo-layer, as :func:`prepare`
    converts them, without converting anything (what a launch's layout needs to know);
    ValueError for what prepare refuses."""
    if float_precision not in FLOAT_PRECISIONS:
        raise ValueError(f"the float precision must be one of {FLOAT_PRECISIONS}, "
                         f"got {float_precision!r}")
    if any(s.W is None or s.P is not None for s in stacked):
        raise ValueError("the GEMM engine needs an input matrix and no projection")
    return [(_precision(plan, "input", k, float_precision)[0],
             _precision(plan, "recurrent", k, float_precision)[0]) for k in range(len(stacked))]


def prepare(stacked: list[Stacked], float_precision: str,
            plan: QuantPlan | None = None, xp=np) -> list[Operands]:
    """:class:`Operands` per pseudo-layer: the plan's GEMMs in 8 bits, the rest in
    ``float_precision`` (fp32, tf32, fp16 or bf16); ``xp``: see :func:`weight_operand`."""
    precisions(stacked, float_precision, plan)  # its refusals first
    out = []
    for k, s in enumerate(stacked):
        ops = {name: weight_operand(w, *_precision(plan, name, k, float_precision), xp=xp)
               for name, w in (("input", s.W), ("recurrent", s.R))}
        out.append(Operands(bW=s.bW.astype(np.float32), bR=s.bR.astype(np.float32), **ops))
    return out


def seen_weights(stacked: list[Stacked], operands: list[Operands]) -> list[Stacked]:
    """``stacked`` with W and R replaced by what the GEMMs see (biases as uploaded)."""
    return [Stacked(W=o.input.seen, R=o.recurrent.seen, bW=o.bW.astype(np.float64),
                    bR=o.bR.astype(np.float64), P=s.P)
            for s, o in zip(stacked, operands)]
