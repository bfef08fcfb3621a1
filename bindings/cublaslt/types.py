"""cuBLASLt's handle types and the two structs it passes by value.

The handles are distinct ctypes pointer types (as in :mod:`..ctypes_types`), so a matrix
layout passed where a matmul descriptor is expected is a ctypes ``ArgumentError``. The
header declares the descriptors as pointers to "semi-opaque" structs of ``uint64_t``
words; cuBLASLt allocates them in its ``...Create`` calls, so their contents never matter
here and the pointed-to types are empty. ``cublasLtMatmulAlgo_t`` and
``cublasLtMatmulHeuristicResult_t`` are real structs: the heuristic writes them and
cublasLtMatmul reads the algorithm back.
"""
from __future__ import annotations

import ctypes

from .. import ctypes_types

cudaStream_t = ctypes_types.cudaStream_t  # the same opaque stream type as cuDNN's

# C typedef name -> the struct it points to (checked against cublasLt.h).
OPAQUE_STRUCTS: dict[str, str] = {}


def _opaque(typedef: str, struct_name: str):
    return ctypes_types.opaque(typedef, struct_name, OPAQUE_STRUCTS)


cublasLtHandle_t = _opaque("cublasLtHandle_t", "cublasLtContext")
cublasLtMatmulDesc_t = _opaque("cublasLtMatmulDesc_t", "cublasLtMatmulDescOpaque_t")
cublasLtMatrixLayout_t = _opaque("cublasLtMatrixLayout_t", "cublasLtMatrixLayoutOpaque_t")
cublasLtMatmulPreference_t = _opaque("cublasLtMatmulPreference_t",
                                     "cublasLtMatmulPreferenceOpaque_t")


class cublasLtMatmulAlgo_t(ctypes.Structure):
    """An algorithm the heuristic chose; handed back to cublasLtMatmul as is."""
    C_NAME = "cublasLtMatmulAlgo_t"
    _fields_ = [("data", ctypes.c_uint64 * 8)]


class cublasLtMatmulHeuristicResult_t(ctypes.Structure):
    """One answer of cublasLtMatmulAlgoGetHeuristic: the algorithm, the workspace it needs,
    whether it is usable (``state``: a cublasStatus_t) and its estimated waves."""
    C_NAME = "cublasLtMatmulHeuristicResult_t"
    _fields_ = [("algo", cublasLtMatmulAlgo_t), ("workspaceSize", ctypes.c_size_t),
                ("state", ctypes.c_int), ("wavesCount", ctypes.c_float),
                ("reserved", ctypes.c_int * 4)]


VALUE_STRUCTS = (cublasLtMatmulAlgo_t, cublasLtMatmulHeuristicResult_t)
