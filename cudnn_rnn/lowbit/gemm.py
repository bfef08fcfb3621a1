"""One cuBLASLt GEMM of the 8-bit engine: its types, its shape, and the descriptors it owns.

Every GEMM of the engine is ``out (M, N) = a (M, K) @ w.T`` with row-major operands: the
activations ``a`` (T*B or B rows), the stacked weights ``w`` (gates*hidden rows), the
pre-activations ``out``. cuBLASLt is column-major, and a row-major ``(r, c)`` matrix is the
column-major ``(c, r)`` one with ``ld = c``; so the call computes ``out.T = w @ a.T`` with
cuBLASLt's A the weights (``(K, N)``, ``ld K``, transposed) and its B the activations
(``(K, M)``, ``ld K``, not transposed): the "TN" form, which is the one cuBLASLt's INT8 and
FP8 kernels take. ``out`` is ``(N, M)`` column-major, ``ld N``: the row-major ``(M, N)``
the gate kernel reads.

:data:`PRECISIONS` says, per precision the engine offers, the operands' type, the
output's, the compute type and the type of alpha and beta. The 16-bit and FP8 GEMMs write
FP32 so the gate math reads FP32 pre-activations; INT8 writes the exact int32 sums. Every GEMM runs with
alpha 1 and beta 0: the gate kernel dequantizes each output column (activation scale
times that weight row's scale; 1 for a float GEMM), so INT8 and FP8 need no scale
attributes and one kernel serves every precision.

:class:`LtHandle` owns a ``cublasLtHandle_t``; :meth:`Matmul.choose` asks the heuristic for
the best algorithm within a workspace (cuBLASLt answers NOT_SUPPORTED, raised as
:class:`~cudnn_rnn.bindings.cublaslt.errors.NotSupported`, when it has none for these
types and sizes) and :meth:`Matmul.run` enqueues the GEMM on a stream.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

from cudnn_rnn.bindings import ctypes_types, cublaslt
from cudnn_rnn.bindings.cublaslt.enums import (ComputeType, DataType, MatmulDescAttribute,
                                               MatmulPreferenceAttribute, MatrixLayoutAttribute,
                                               Operation)


@dataclass(frozen=True)
class Precision:
    """The types of one GEMM precision: operands, output, accumulation, alpha/beta."""
    operands: DataType
    output: DataType
    compute: ComputeType
    scale: DataType


PRECISIONS = {
    "fp32": Precision(DataType.R_32F, DataType.R_32F, ComputeType.COMPUTE_32F, DataType.R_32F),
    "tf32": Precision(DataType.R_32F, DataType.R_32F, ComputeType.COMPUTE_32F_FAST_TF32,
                      DataType.R_32F),
    "fp16": Precision(DataType.R_16F, DataType.R_32F, ComputeType.COMPUTE_32F, DataType.R_32F),
    "bf16": Precision(DataType.R_16BF, DataType.R_32F, ComputeType.COMPUTE_32F, DataType.R_32F),
    "int8": Precision(DataType.R_8I, DataType.R_32I, ComputeType.COMPUTE_32I, DataType.R_32I),
    "fp8": Precision(DataType.R_8F_E4M3, DataType.R_32F, ComputeType.COMPUTE_32F,
                     DataType.R_32F),
}


@dataclass(frozen=True)
class Shape:
    """``out (M, N) = a (M, K) @ w.T``, all row-major."""
    M: int
    N: int
    K: int

    def __post_init__(self):
        sizes = (self.M, self.N, self.K)
        if not all(isinstance(n, int) and not isinstance(n, bool) and 0 < n < 2 ** 62
                   for n in sizes):  # uint64 rows and cols, int64 ld, with room for N*M
            raise ValueError(f"a GEMM's M, N and K must be positive integers below 2**62, "
                             f"got {sizes}")

    def layouts(self) -> dict:
        """cuBLASLt's (rows, cols, ld) of A (the weights), B (the activations) and D."""
        return {"A": (self.K, self.N, self.K), "B": (self.K, self.M, self.K),
                "D": (self.N, self.M, self.N)}


def rnn_shapes(cfg, in_size: int | None = None) -> tuple[Shape, Shape]:
    """The two GEMMs of one pseudo-layer of ``cfg`` (an RNNConfig): the input GEMM over all
    steps (T·B rows, K the layer input, ``in_size`` or the first layer's input size) and
    one step's recurrent GEMM (B rows, K the hidden size); N is gates·hidden for both."""
    n = cfg.gates * cfg.hidden_size
    return (Shape(cfg.seq_length * cfg.mini_batch, n, in_size or cfg.input_size),
            Shape(cfg.mini_batch, n, cfg.hidden_size))


class LtHandle:
    """A cuBLASLt handle (``cublasLtCreate``; NOT_INITIALIZED without a GPU), destroyed by
    :meth:`close`. It holds the library, so the library outlives the handle."""

    def __init__(self, lt=None):
        self.lt = lt or cublaslt.load()
        self.raw = cublaslt.types.cublasLtHandle_t()
        self.lt.cublasLtCreate(ctypes.byref(self.raw))

    def close(self) -> None:
        if self.raw:
            self.lt.cublasLtDestroy(self.raw)
            self.raw = cublaslt.types.cublasLtHandle_t()


_ONE = {DataType.R_32F: ctypes.c_float(1.0), DataType.R_32I: ctypes.c_int32(1)}
_ZERO = {DataType.R_32F: ctypes.c_float(0.0), DataType.R_32I: ctypes.c_int32(0)}


class Matmul:
    """The matmul descriptor and the three layouts of one GEMM (D doubles as C, with beta
    0), created on construction and destroyed by :meth:`close` (or leaving a ``with``).
    It holds the library it was created by, so the library outlives its descriptors."""

    def __init__(self, precision: str, shape: Shape, lt=None):
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        self.lt = lt or cublaslt.load()
        self.precision, self.types, self.shape = precision, PRECISIONS[precision], shape
        self.desc = cublaslt.types.cublasLtMatmulDesc_t()
        self.layouts: dict = {}
        try:
            self.lt.cublasLtMatmulDescCreate(ctypes.byref(self.desc), self.types.compute,
                                             self.types.scale)
            self.set(MatmulDescAttribute.TRANSA, Operation.T)
            self.set(MatmulDescAttribute.TRANSB, Operation.N)
            for name, (rows, cols, ld) in shape.layouts().items():
                layout = cublaslt.types.cublasLtMatrixLayout_t()
                kind = self.types.output if name == "D" else self.types.operands
                self.lt.cublasLtMatrixLayoutCreate(ctypes.byref(layout), kind, rows, cols, ld)
                self.layouts[name] = layout
        except BaseException:
            self.close()
            raise

    def set(self, attr: MatmulDescAttribute, value: int) -> None:
        """Set an int32-valued attribute of the descriptor (transposes, epilogue, ...)."""
        v = ctypes.c_int32(int(value))
        self.lt.cublasLtMatmulDescSetAttribute(self.desc, attr, ctypes.byref(v), ctypes.sizeof(v))

    def get(self, attr: MatmulDescAttribute) -> int:
        """Read back an int32-valued attribute of the descriptor."""
        v, written = ctypes.c_int32(), ctypes.c_size_t()
        self.lt.cublasLtMatmulDescGetAttribute(self.desc, attr, ctypes.byref(v), ctypes.sizeof(v),
                                               ctypes.byref(written))
        return v.value

    def layout(self, name: str) -> dict:
        """What cuBLASLt holds for layout ``name`` ("A", "B", "D"): type, rows, cols, ld."""
        out = {}
        for attr, ctype in ((MatrixLayoutAttribute.TYPE, ctypes.c_int32),
                            (MatrixLayoutAttribute.ROWS, ctypes.c_uint64),
                            (MatrixLayoutAttribute.COLS, ctypes.c_uint64),
                            (MatrixLayoutAttribute.LD, ctypes.c_int64)):
            v, written = ctype(), ctypes.c_size_t()
            self.lt.cublasLtMatrixLayoutGetAttribute(self.layouts[name], attr, ctypes.byref(v),
                                                     ctypes.sizeof(v), ctypes.byref(written))
            out[attr.name.lower()] = v.value
        return out

    def choose(self, handle: LtHandle, workspace_bytes: int) -> dict:
        """The heuristic's first algorithm for this GEMM within ``workspace_bytes``, kept
        for :meth:`run`; returns what it said (workspace needed, waves)."""
        pref = cublaslt.types.cublasLtMatmulPreference_t()
        self.lt.cublasLtMatmulPreferenceCreate(ctypes.byref(pref))
        try:
            limit = ctypes.c_uint64(workspace_bytes)
            self.lt.cublasLtMatmulPreferenceSetAttribute(
                pref, MatmulPreferenceAttribute.MAX_WORKSPACE_BYTES, ctypes.byref(limit),
                ctypes.sizeof(limit))
            result = cublaslt.types.cublasLtMatmulHeuristicResult_t()
            found = ctypes.c_int(0)
            L = self.layouts
            self.lt.cublasLtMatmulAlgoGetHeuristic(handle.raw, self.desc, L["A"], L["B"], L["D"],
                                                   L["D"], pref, 1, ctypes.byref(result),
                                                   ctypes.byref(found))
        finally:
            self.lt.cublasLtMatmulPreferenceDestroy(pref)
        if found.value < 1:  # the heuristic answers NOT_SUPPORTED itself; this is a guard
            raise cublaslt.errors.error_for("cublasLtMatmulAlgoGetHeuristic", 15,
                                            "no algorithm returned")
        self.algo, self.workspace_needed = result.algo, int(result.workspaceSize)
        self.handle = handle
        return {"workspace_bytes": self.workspace_needed, "waves": float(result.wavesCount)}

    def run(self, w_ptr: int, a_ptr: int, out_ptr: int, workspace_ptr: int,
            workspace_bytes: int, stream_ptr: int) -> None:
        """Enqueue ``out = a @ w.T`` (device pointers; row-major as in the module docstring)
        with the algorithm :meth:`choose` kept, on ``stream_ptr``."""
        s = self.types.scale
        self.lt.cublasLtMatmul(self.handle.raw, self.desc, ctypes.byref(_ONE[s]), w_ptr,
                               self.layouts["A"], a_ptr, self.layouts["B"], ctypes.byref(_ZERO[s]),
                               out_ptr, self.layouts["D"], out_ptr, self.layouts["D"],
                               ctypes.byref(self.algo), workspace_ptr, workspace_bytes,
                               ctypes_types.stream(stream_ptr))

    def close(self) -> None:
        """Destroy the layouts and the descriptor (once; safe after a failed construction)."""
        for layout in self.layouts.values():
            self.lt.cublasLtMatrixLayoutDestroy(layout)
        self.layouts = {}
        if self.desc:
            self.lt.cublasLtMatmulDescDestroy(self.desc)
            self.desc = cublaslt.types.cublasLtMatmulDesc_t()

    def __enter__(self) -> "Matmul":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
