"""cuDNN enumerations with the exact values of the headers.

Each class mirrors one C ``typedef enum`` (or a ``#define`` family) and keeps the
C names without their common prefix, so ``DataType.HALF`` is ``CUDNN_DATA_HALF``.
The ``C_PREFIX`` and ``C_NAME`` attributes let tests compare every member with
the header of the loaded library (tests/test_header_fidelity.py).

``cudnnStatus_t`` changed numbering between cuDNN 8 (flat 0..14) and cuDNN 9
(1000-based categories with sub-codes), so there are two status enums;
:func:`status_enum` picks the one matching a library version.
"""
from __future__ import annotations

import enum


END_MARKER = "COUNT"  # a C enum's count of its values (CUDNN_RNN_ALGO_COUNT): not a value


class CEnum(enum.IntEnum):
    """An IntEnum that knows the C typedef and name prefix it mirrors."""

    @classmethod
    def choices(cls) -> list:
        """The members a user may choose: all but the enum's end marker (:data:`END_MARKER`)."""
        return [m for m in cls if m.name != END_MARKER]

    @classmethod
    def parse(cls, text: str | int) -> "CEnum":
        """Accept a member name (with or without the C prefix, any case) or a value, of
        :meth:`choices` only: the end marker is the header's count, not a value to pass."""
        if isinstance(text, int) or (isinstance(text, str) and text.strip().lstrip("-").isdigit()):
            member = cls(int(text))
        else:
            key = text.strip().upper()
            prefix = cls.C_PREFIX  # type: ignore[attr-defined]
            member = cls.__members__.get(key[len(prefix):] if key.startswith(prefix) else key)
        if member is None or member not in cls.choices():
            names = ", ".join(m.name for m in cls.choices())
            raise ValueError(f"unknown {cls.C_NAME} value {text!r} (choose from {names})")
        return member


def _c(name: str, prefix: str):
    def deco(cls):
        cls.C_NAME = name
        cls.C_PREFIX = prefix
        return cls
    return deco


@_c("cudnnStatus_t", "CUDNN_STATUS_")
class StatusV9(CEnum):
    """cudnnStatus_t of cuDNN 9 (cudnn_graph.h): categories of 1000 with sub-codes."""
    SUCCESS = 0
    NOT_INITIALIZED = 1001
    SUBLIBRARY_VERSION_MISMATCH = 1002
    SERIALIZATION_VERSION_MISMATCH = 1003
    DEPRECATED = 1004
    LICENSE_ERROR = 1005
    RUNTIME_IN_PROGRESS = 1006
    RUNTIME_FP_OVERFLOW = 1007
    SUBLIBRARY_LOADING_FAILED = 1008
    BAD_PARAM = 2000
    INVALID_VALUE = 2001  # deprecated name, still its own code
    BAD_PARAM_NULL_POINTER = 2002
    BAD_PARAM_MISALIGNED_POINTER = 2003
    BAD_PARAM_NOT_FINALIZED = 2004
    BAD_PARAM_OUT_OF_BOUND = 2005
    BAD_PARAM_SIZE_INSUFFICIENT = 2006
    BAD_PARAM_STREAM_MISMATCH = 2007
    BAD_PARAM_SHAPE_MISMATCH = 2008
    BAD_PARAM_DUPLICATED_ENTRIES = 2009
    BAD_PARAM_ATTRIBUTE_TYPE = 2010
    BAD_PARAM_CUDA_GRAPH_MISMATCH = 2011
    BAD_PARAM_DESCRIPTOR_TYPE = 2012
    NOT_SUPPORTED = 3000
    NOT_SUPPORTED_GRAPH_PATTERN = 3001
    NOT_SUPPORTED_SHAPE = 3002
    NOT_SUPPORTED_DATA_TYPE = 3003
    NOT_SUPPORTED_LAYOUT = 3004
    NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER = 3005
    NOT_SUPPORTED_INCOMPATIBLE_CUDART = 3006
    NOT_SUPPORTED_ARCH_MISMATCH = 3007
    NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING = 3008
    NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE = 3009
    NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT = 3010
    NOT_SUPPORTED_PADDING = 3011
    NOT_SUPPORTED_BAD_LAUNCH_PARAM = 3012
    NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API = 3013
    NOT_SUPPORTED_INVALID_DYNAMIC_SHAPE = 3014
    INTERNAL_ERROR = 4000
    INTERNAL_ERROR_COMPILATION_FAILED = 4001
    INTERNAL_ERROR_UNEXPECTED_VALUE = 4002
    INTERNAL_ERROR_HOST_ALLOCATION_FAILED = 4003
    INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED = 4004
    INTERNAL_ERROR_BAD_LAUNCH_PARAM = 4005
    INTERNAL_ERROR_TEXTURE_CREATION_FAILED = 4006
    EXECUTION_FAILED = 5000
    EXECUTION_FAILED_CUDA_DRIVER = 5001
    EXECUTION_FAILED_CUBLAS = 5002
    EXECUTION_FAILED_CUDART = 5003
    EXECUTION_FAILED_CURAND = 5004
    # deprecated aliases (same value as the member they alias)
    ALLOC_FAILED = 4003
    ARCH_MISMATCH = 3007
    MAPPING_ERROR = 4006
    RUNTIME_PREREQUISITE_MISSING = 3008
    VERSION_MISMATCH = 1002

    @property
    def category(self) -> "StatusV9":
        """The family (:func:`status_category`) as a member; itself where the header has no
        member for the family (SUCCESS, the 1xxx BAD_PARAM_* codes have one: BAD_PARAM)."""
        family = status_category(self.value)
        return StatusV9(family) if family in StatusV9._value2member_map_ else self


@_c("cudnnStatus_t", "CUDNN_STATUS_")
class StatusV8(CEnum):
    """cudnnStatus_t of cuDNN 7 and 8 (cudnn_ops_infer.h): flat codes."""
    SUCCESS = 0
    NOT_INITIALIZED = 1
    ALLOC_FAILED = 2
    BAD_PARAM = 3
    INTERNAL_ERROR = 4
    INVALID_VALUE = 5
    ARCH_MISMATCH = 6
    MAPPING_ERROR = 7
    EXECUTION_FAILED = 8
    NOT_SUPPORTED = 9
    LICENSE_ERROR = 10
    RUNTIME_PREREQUISITE_MISSING = 11
    RUNTIME_IN_PROGRESS = 12
    RUNTIME_FP_OVERFLOW = 13
    VERSION_MISMATCH = 14

    @property
    def category(self) -> "StatusV8":
        return self


def status_category(code: int) -> int:
    """``CUDNN_STATUS_CATEGORY(full_error_code)`` of cudnn_graph.h (cuDNN 9): the code's
    1000-based family, e.g. 3003 (NOT_SUPPORTED_DATA_TYPE) → 3000 (NOT_SUPPORTED)."""
    return code // 1000 * 1000


def status_enum(cudnn_version: int) -> type[CEnum]:
    """The status enum for a decoded version number (e.g. 91900 or 8907)."""
    return StatusV9 if cudnn_version >= 90000 else StatusV8


@_c("cudnnDataType_t", "CUDNN_DATA_")
class DataType(CEnum):
    FLOAT = 0
    DOUBLE = 1
    HALF = 2
    INT8 = 3
    INT32 = 4
    INT8x4 = 5
    UINT8 = 6
    UINT8x4 = 7
    INT8x32 = 8
    BFLOAT16 = 9
    INT64 = 10
    BOOLEAN = 11
    FP8_E4M3 = 12
    FP8_E5M2 = 13
    FAST_FLOAT_FOR_FP8 = 14
    FP8_E8M0 = 15
    FP4_E2M1 = 16
    INT4 = 17
    UINT4 = 18
    UINT32 = 19
    COMPLEX_FP32 = 20
    COMPLEX_FP64 = 21
    BYTE_BOOLEAN = 22
    FP8_E5M3 = 23

    @classmethod
    def parse(cls, text):
        # INT8x4 etc. keep a lower-case x in C; accept any case.
        if isinstance(text, str):
            key = text.strip().upper().replace("CUDNN_DATA_", "")
            for m in cls:
                if m.name.upper() == key:
                    return m
        return super().parse(text)


# First cuDNN version whose header declares each data type (older headers lack them).
DATA_TYPE_SINCE = {
    DataType.BFLOAT16: 80000, DataType.INT64: 80000, DataType.BOOLEAN: 80700,
    DataType.FP8_E4M3: 80700, DataType.FP8_E5M2: 80700, DataType.FAST_FLOAT_FOR_FP8: 80700,
    DataType.FP8_E8M0: 90700, DataType.FP4_E2M1: 90700, DataType.INT4: 91100,
    DataType.UINT4: 91100, DataType.UINT32: 91100, DataType.COMPLEX_FP32: 91400,
    DataType.COMPLEX_FP64: 91400, DataType.BYTE_BOOLEAN: 92500, DataType.FP8_E5M3: 92600,
}


# Members added after x.0 of their major version: older headers lack them (value: first version).
MEMBER_SINCE = {
    **DATA_TYPE_SINCE,
    StatusV9.SUBLIBRARY_LOADING_FAILED: 90200,
    StatusV9.BAD_PARAM_CUDA_GRAPH_MISMATCH: 90500,
    StatusV9.BAD_PARAM_DESCRIPTOR_TYPE: 90600,
    StatusV9.NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API: 90500,
    StatusV9.NOT_SUPPORTED_INVALID_DYNAMIC_SHAPE: 91800,
}


@_c("cudnnMathType_t", "CUDNN_")
class MathType(CEnum):
    DEFAULT_MATH = 0
    TENSOR_OP_MATH = 1
    TENSOR_OP_MATH_ALLOW_CONVERSION = 2
    FMA_MATH = 3

    @property
    def short(self) -> str:
        """Record name: DEFAULT, TENSOR_OP, TENSOR_OP_ALLOW_CONVERSION, FMA."""
        return self.name.replace("_MATH", "")

    @classmethod
    def parse(cls, text):
        if isinstance(text, str):
            key = text.strip().upper().replace("CUDNN_", "")
            for m in cls:
                if key in (m.name, m.short):
                    return m
        return super().parse(text)


@_c("cudnnRNNMode_t", "CUDNN_")
class RNNMode(CEnum):
    RNN_RELU = 0
    RNN_TANH = 1
    LSTM = 2
    GRU = 3


@_c("cudnnRNNAlgo_t", "CUDNN_RNN_ALGO_")
class RNNAlgo(CEnum):
    STANDARD = 0
    PERSIST_STATIC = 1
    PERSIST_DYNAMIC = 2
    PERSIST_STATIC_SMALL_H = 3
    COUNT = 4


@_c("cudnnDirectionMode_t", "CUDNN_")
class DirectionMode(CEnum):
    UNIDIRECTIONAL = 0
    BIDIRECTIONAL = 1


@_c("cudnnRNNInputMode_t", "CUDNN_")
class RNNInputMode(CEnum):
    LINEAR_INPUT = 0
    SKIP_INPUT = 1


@_c("cudnnRNNBiasMode_t", "CUDNN_RNN_")
class RNNBiasMode(CEnum):
    NO_BIAS = 0
    SINGLE_INP_BIAS = 1
    DOUBLE_BIAS = 2
    SINGLE_REC_BIAS = 3


@_c("cudnnRNNDataLayout_t", "CUDNN_RNN_DATA_LAYOUT_")
class RNNDataLayout(CEnum):
    SEQ_MAJOR_UNPACKED = 0
    SEQ_MAJOR_PACKED = 1
    BATCH_MAJOR_UNPACKED = 2


@_c("cudnnForwardMode_t", "CUDNN_FWD_MODE_")
class ForwardMode(CEnum):
    INFERENCE = 0
    TRAINING = 1


@_c("cudnnWgradMode_t", "CUDNN_WGRAD_MODE_")
class WgradMode(CEnum):
    ADD = 0
    SET = 1


@_c("cudnnTensorFormat_t", "CUDNN_TENSOR_")
class TensorFormat(CEnum):
    NCHW = 0
    NHWC = 1
    NCHW_VECT_C = 2


@_c("cudnnSeverity_t", "CUDNN_SEV_")
class Severity(CEnum):
    FATAL = 0
    ERROR = 1
    WARNING = 2
    INFO = 3


# #define constants of cudnn_adv.h / cudnn_graph.h
RNN_PADDED_IO_DISABLED = 0
RNN_PADDED_IO_ENABLED = 1 << 0
SEV_ERROR_EN = 1 << Severity.ERROR
SEV_WARNING_EN = 1 << Severity.WARNING

# Enums whose every member the header test checks.
HEADER_CHECKED = (StatusV9, DataType, MathType, RNNMode, RNNAlgo, DirectionMode, RNNInputMode,
                  RNNBiasMode, RNNDataLayout, ForwardMode, WgradMode, TensorFormat,
                  Severity)
