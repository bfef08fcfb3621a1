"""The precision families of cuDNN configurations: what the tuner searches and the
precision table picks the fastest verified configuration of.

``fp32`` true FP32 (FLOAT data and math, FMA math type); ``tf32`` FLOAT data with DEFAULT,
TENSOR_OP or TENSOR_OP_ALLOW_CONVERSION math (TF32, or FP16 conversion, allowed);
``fp16`` HALF data with FLOAT or HALF math precision; ``bf16`` BFLOAT16 data with FLOAT
math precision; ``int8`` and ``fp8`` cuDNN's 8-bit settings, which its RNN API refuses
(tried so the refusal is shown with its call and status); ``any`` the four float ones.
Every family is tried with each of :data:`ALGOS`.
"""
from __future__ import annotations

from cudnn_rnn.bindings.enums import DataType, MathType, RNNAlgo

ALGOS = (RNNAlgo.STANDARD, RNNAlgo.PERSIST_STATIC, RNNAlgo.PERSIST_DYNAMIC,
         RNNAlgo.PERSIST_STATIC_SMALL_H)
ALL_MATH = tuple(MathType)
FAMILIES = {
    "fp32": [(DataType.FLOAT, DataType.FLOAT, MathType.FMA_MATH)],
    "tf32": [(DataType.FLOAT, DataType.FLOAT, m) for m in (
        MathType.DEFAULT_MATH, MathType.TENSOR_OP_MATH, MathType.TENSOR_OP_MATH_ALLOW_CONVERSION)],
    "fp16": [(DataType.HALF, p, m) for p in (DataType.FLOAT, DataType.HALF) for m in ALL_MATH],
    "bf16": [(DataType.BFLOAT16, DataType.FLOAT, m) for m in ALL_MATH],
}
FAMILIES["any"] = [c for f in ("fp32", "tf32", "fp16", "bf16") for c in FAMILIES[f]]
# cuDNN's RNN API refuses 8-bit data (cudnnSetRNNDescriptor_v8): its candidates are tried so
# the refusal is shown with its call and status; the 8-bit candidates that run are the GEMM
# engine's (cudnn_rnn.lowbit.candidates, which has a family of the same name for each)
FAMILIES["int8"] = [(DataType.INT8, DataType.INT32, MathType.DEFAULT_MATH),
                    (DataType.INT8, DataType.FLOAT, MathType.TENSOR_OP_MATH)]
FAMILIES["fp8"] = [(DataType.FP8_E4M3, DataType.FLOAT, MathType.TENSOR_OP_MATH)]


def search_space(family: str) -> list[tuple]:
    """(data type, math precision, math type, algorithm) candidates of ``family``
    (KeyError for an unknown one)."""
    return [(d, p, m, a) for d, p, m in FAMILIES[family] for a in ALGOS]
