"""Every cuBLASLt function this project calls, declared once as data (cublasLt.h).

The same :class:`~..prototypes.Proto` records as the cuDNN bindings': each C prototype
transcribed with its return type and each parameter's ctypes type, in order, with the C
parameter name; the loader sets ``argtypes``/``restype`` from them and
tests/test_header_fidelity.py checks every one against the ``cublasLt.h`` of the loaded
library.
"""
from __future__ import annotations

from ctypes import POINTER, c_char_p, c_int, c_int64, c_size_t, c_uint64, c_void_p

from ..prototypes import Proto
from . import types as T

STATUS = c_int  # cublasStatus_t: a call returning it is checked
E = c_int  # every C enum is passed as an int
PVOID = c_void_p
PSIZE = POINTER(c_size_t)


def _p(name, restype, *params, **kw):
    return Proto(name, restype, tuple(params), "cublasLt.h", **kw)


PROTOTYPES: tuple[Proto, ...] = (
    _p("cublasLtGetVersion", c_size_t),
    _p("cublasLtGetCudartVersion", c_size_t),
    _p("cublasLtGetStatusName", c_char_p, ("status", E)),
    _p("cublasLtGetStatusString", c_char_p, ("status", E)),
    _p("cublasLtGetProperty", STATUS, ("type", E), ("value", POINTER(c_int))),
    _p("cublasLtCreate", STATUS, ("lightHandle", POINTER(T.cublasLtHandle_t))),
    _p("cublasLtDestroy", STATUS, ("lightHandle", T.cublasLtHandle_t)),
    _p("cublasLtMatrixLayoutCreate", STATUS, ("matLayout", POINTER(T.cublasLtMatrixLayout_t)),
       ("type", E), ("rows", c_uint64), ("cols", c_uint64), ("ld", c_int64)),
    _p("cublasLtMatrixLayoutDestroy", STATUS, ("matLayout", T.cublasLtMatrixLayout_t)),
    _p("cublasLtMatrixLayoutSetAttribute", STATUS, ("matLayout", T.cublasLtMatrixLayout_t),
       ("attr", E), ("buf", PVOID), ("sizeInBytes", c_size_t)),
    _p("cublasLtMatrixLayoutGetAttribute", STATUS, ("matLayout", T.cublasLtMatrixLayout_t),
       ("attr", E), ("buf", PVOID), ("sizeInBytes", c_size_t), ("sizeWritten", PSIZE)),
    _p("cublasLtMatmulDescCreate", STATUS, ("matmulDesc", POINTER(T.cublasLtMatmulDesc_t)),
       ("computeType", E), ("scaleType", E)),
    _p("cublasLtMatmulDescDestroy", STATUS, ("matmulDesc", T.cublasLtMatmulDesc_t)),
    _p("cublasLtMatmulDescSetAttribute", STATUS, ("matmulDesc", T.cublasLtMatmulDesc_t),
       ("attr", E), ("buf", PVOID), ("sizeInBytes", c_size_t)),
    _p("cublasLtMatmulDescGetAttribute", STATUS, ("matmulDesc", T.cublasLtMatmulDesc_t),
       ("attr", E), ("buf", PVOID), ("sizeInBytes", c_size_t), ("sizeWritten", PSIZE)),
    _p("cublasLtMatmulPreferenceCreate", STATUS,
       ("pref", POINTER(T.cublasLtMatmulPreference_t))),
    _p("cublasLtMatmulPreferenceDestroy", STATUS, ("pref", T.cublasLtMatmulPreference_t)),
    _p("cublasLtMatmulPreferenceSetAttribute", STATUS, ("pref", T.cublasLtMatmulPreference_t),
       ("attr", E), ("buf", PVOID), ("sizeInBytes", c_size_t)),
    _p("cublasLtMatmulPreferenceGetAttribute", STATUS, ("pref", T.cublasLtMatmulPreference_t),
       ("attr", E), ("buf", PVOID), ("sizeInBytes", c_size_t), ("sizeWritten", PSIZE)),
    _p("cublasLtMatmulAlgoGetHeuristic", STATUS, ("lightHandle", T.cublasLtHandle_t),
       ("operationDesc", T.cublasLtMatmulDesc_t), ("Adesc", T.cublasLtMatrixLayout_t),
       ("Bdesc", T.cublasLtMatrixLayout_t), ("Cdesc", T.cublasLtMatrixLayout_t),
       ("Ddesc", T.cublasLtMatrixLayout_t), ("preference", T.cublasLtMatmulPreference_t),
       ("requestedAlgoCount", c_int),
       ("heuristicResultsArray", POINTER(T.cublasLtMatmulHeuristicResult_t)),
       ("returnAlgoCount", POINTER(c_int))),
    _p("cublasLtMatmul", STATUS, ("lightHandle", T.cublasLtHandle_t),
       ("computeDesc", T.cublasLtMatmulDesc_t), ("alpha", PVOID), ("A", PVOID),
       ("Adesc", T.cublasLtMatrixLayout_t), ("B", PVOID), ("Bdesc", T.cublasLtMatrixLayout_t),
       ("beta", PVOID), ("C", PVOID), ("Cdesc", T.cublasLtMatrixLayout_t), ("D", PVOID),
       ("Ddesc", T.cublasLtMatrixLayout_t), ("algo", POINTER(T.cublasLtMatmulAlgo_t)),
       ("workspace", PVOID), ("workspaceSizeInBytes", c_size_t), ("stream", T.cudaStream_t)),
)

BY_NAME = {p.name: p for p in PROTOTYPES}
