"""cuBLASLt enumerations with the exact values of its headers (cublas_api.h, cublasLt.h)
and of CUDA's library_types.h (``cudaDataType_t``), transcribed from cuBLAS 12.9.

Each class mirrors one C ``typedef enum`` and keeps the C names without the prefix in
``C_PREFIX`` (``ComputeType.COMPUTE_32I`` is ``CUBLAS_COMPUTE_32I``); tests/
test_header_fidelity.py compares every member with the headers of the loaded library.
Members a later cuBLAS adds are the test's report, not an error, until transcribed here.
"""
from __future__ import annotations

from ..enums import CEnum, _c



@_c("cublasStatus_t", "CUBLAS_STATUS_")
class Status(CEnum):
    """cublasStatus_t (cublas_api.h): what every cuBLASLt call returns."""
    SUCCESS = 0
    NOT_INITIALIZED = 1
    ALLOC_FAILED = 3
    INVALID_VALUE = 7
    ARCH_MISMATCH = 8
    MAPPING_ERROR = 11
    EXECUTION_FAILED = 13
    INTERNAL_ERROR = 14
    NOT_SUPPORTED = 15
    LICENSE_ERROR = 16


@_c("cublasComputeType_t", "CUBLAS_")
class ComputeType(CEnum):
    """cublasComputeType_t (cublas_api.h): the GEMM's accumulation: COMPUTE_32I for
    int8 x int8 -> int32, COMPUTE_32F with FP8, FP16 or BF16 inputs, COMPUTE_32F_FAST_TF32."""
    COMPUTE_16F = 64
    COMPUTE_16F_PEDANTIC = 65
    COMPUTE_32F = 68
    COMPUTE_32F_PEDANTIC = 69
    COMPUTE_32F_FAST_16F = 74
    COMPUTE_32F_FAST_16BF = 75
    COMPUTE_32F_FAST_TF32 = 77
    COMPUTE_32F_EMULATED_16BFX9 = 78
    COMPUTE_64F = 70
    COMPUTE_64F_PEDANTIC = 71
    COMPUTE_32I = 72
    COMPUTE_32I_PEDANTIC = 73


@_c("cublasOperation_t", "CUBLAS_OP_")
class Operation(CEnum):
    """cublasOperation_t (cublas_api.h): transpose or not, per operand."""
    N = 0
    T = 1
    C = 2
    HERMITAN = 2
    CONJG = 3


@_c("cudaDataType", "CUDA_")
class DataType(CEnum):
    """cudaDataType_t (CUDA's library_types.h): the element type of a matrix or of the scale."""
    R_16F = 2
    C_16F = 6
    R_16BF = 14
    C_16BF = 15
    R_32F = 0
    C_32F = 4
    R_64F = 1
    C_64F = 5
    R_4I = 16
    C_4I = 17
    R_4U = 18
    C_4U = 19
    R_8I = 3
    C_8I = 7
    R_8U = 8
    C_8U = 9
    R_16I = 20
    C_16I = 21
    R_16U = 22
    C_16U = 23
    R_32I = 10
    C_32I = 11
    R_32U = 12
    C_32U = 13
    R_64I = 24
    C_64I = 25
    R_64U = 26
    C_64U = 27
    R_8F_E4M3 = 28
    R_8F_UE4M3 = 28
    R_8F_E5M2 = 29
    R_8F_UE8M0 = 30
    R_6F_E2M3 = 31
    R_6F_E3M2 = 32
    R_4F_E2M1 = 33


@_c("cublasLtMatmulDescAttributes_t", "CUBLASLT_MATMUL_DESC_")
class MatmulDescAttribute(CEnum):
    """cublasLtMatmulDescAttributes_t: what cublasLtMatmulDescSetAttribute sets (each
    value's C type is in cublasLt.h's comment on it; a buffer of another size is refused)."""
    COMPUTE_TYPE = 0
    SCALE_TYPE = 1
    POINTER_MODE = 2
    TRANSA = 3
    TRANSB = 4
    TRANSC = 5
    FILL_MODE = 6
    EPILOGUE = 7
    BIAS_POINTER = 8
    BIAS_BATCH_STRIDE = 10
    EPILOGUE_AUX_POINTER = 11
    EPILOGUE_AUX_LD = 12
    EPILOGUE_AUX_BATCH_STRIDE = 13
    ALPHA_VECTOR_BATCH_STRIDE = 14
    SM_COUNT_TARGET = 15
    A_SCALE_POINTER = 17
    B_SCALE_POINTER = 18
    C_SCALE_POINTER = 19
    D_SCALE_POINTER = 20
    AMAX_D_POINTER = 21
    EPILOGUE_AUX_DATA_TYPE = 22
    EPILOGUE_AUX_SCALE_POINTER = 23
    EPILOGUE_AUX_AMAX_POINTER = 24
    FAST_ACCUM = 25
    BIAS_DATA_TYPE = 26
    ATOMIC_SYNC_NUM_CHUNKS_D_ROWS = 27
    ATOMIC_SYNC_NUM_CHUNKS_D_COLS = 28
    ATOMIC_SYNC_IN_COUNTERS_POINTER = 29
    ATOMIC_SYNC_OUT_COUNTERS_POINTER = 30
    A_SCALE_MODE = 31
    B_SCALE_MODE = 32
    C_SCALE_MODE = 33
    D_SCALE_MODE = 34
    EPILOGUE_AUX_SCALE_MODE = 35
    D_OUT_SCALE_POINTER = 36
    D_OUT_SCALE_MODE = 37


@_c("cublasLtMatrixLayoutAttribute_t", "CUBLASLT_MATRIX_LAYOUT_")
class MatrixLayoutAttribute(CEnum):
    """cublasLtMatrixLayoutAttribute_t: what cublasLtMatrixLayoutSetAttribute sets."""
    TYPE = 0
    ORDER = 1
    ROWS = 2
    COLS = 3
    LD = 4
    BATCH_COUNT = 5
    STRIDED_BATCH_OFFSET = 6
    PLANE_OFFSET = 7
    BATCH_MODE = 8


@_c("cublasLtMatmulPreferenceAttributes_t", "CUBLASLT_MATMUL_PREF_")
class MatmulPreferenceAttribute(CEnum):
    """cublasLtMatmulPreferenceAttributes_t: limits of the heuristic's search."""
    SEARCH_MODE = 0
    MAX_WORKSPACE_BYTES = 1
    REDUCTION_SCHEME_MASK = 3
    MIN_ALIGNMENT_A_BYTES = 5
    MIN_ALIGNMENT_B_BYTES = 6
    MIN_ALIGNMENT_C_BYTES = 7
    MIN_ALIGNMENT_D_BYTES = 8
    MAX_WAVES_COUNT = 9
    IMPL_MASK = 12


@_c("cublasLtOrder_t", "CUBLASLT_ORDER_")
class Order(CEnum):
    """cublasLtOrder_t: a matrix layout's memory order."""
    COL = 0
    ROW = 1
    COL32 = 2
    COL4_4R2_8C = 3
    COL32_2R_4R4 = 4


@_c("cublasLtEpilogue_t", "CUBLASLT_EPILOGUE_")
class Epilogue(CEnum):
    """cublasLtEpilogue_t: work fused after the product (bias, activation)."""
    DEFAULT = 1
    RELU = 2
    RELU_AUX = 130
    BIAS = 4
    RELU_BIAS = 6
    RELU_AUX_BIAS = 134
    DRELU = 136
    DRELU_BGRAD = 152
    GELU = 32
    GELU_AUX = 160
    GELU_BIAS = 36
    GELU_AUX_BIAS = 164
    DGELU = 192
    DGELU_BGRAD = 208
    BGRADA = 256
    BGRADB = 512


@_c("cublasLtPointerMode_t", "CUBLASLT_POINTER_MODE_")
class PointerMode(CEnum):
    """cublasLtPointerMode_t: where alpha and beta live."""
    HOST = 0
    DEVICE = 1
    DEVICE_VECTOR = 2
    ALPHA_DEVICE_VECTOR_BETA_ZERO = 3
    ALPHA_DEVICE_VECTOR_BETA_HOST = 4


@_c("cublasLtMatmulMatrixScale_t", "CUBLASLT_MATMUL_MATRIX_SCALE_")
class MatrixScale(CEnum):
    """cublasLtMatmulMatrixScale_t: how an operand's scale is given (one float for the
    tensor, or block scales)."""
    SCALAR_32F = 0
    VEC16_UE4M3 = 1
    VEC32_UE8M0 = 2
    OUTER_VEC_32F = 3
    VEC128_32F = 4
    BLK128x128_32F = 5
    END = 6


HEADER_CHECKED = (Status, ComputeType, Operation, DataType, MatmulDescAttribute,
                  MatrixLayoutAttribute, MatmulPreferenceAttribute, Order, Epilogue, PointerMode,
                  MatrixScale)
