"""Opaque handle types and C structs of the cuDNN API.

Each ``typedef struct cudnnXStruct *cudnnX_t`` becomes a distinct ctypes pointer
type (the llvmlite.binding idiom), so passing an RNN descriptor where a tensor
descriptor is expected is a ctypes ``ArgumentError`` rather than undefined
behaviour inside libcudnn.
"""
from __future__ import annotations

import ctypes

# C typedef name -> the struct tag it points to (checked against the headers).
OPAQUE_STRUCTS: dict[str, str] = {}


def opaque(typedef: str, struct_tag: str, registry: dict = OPAQUE_STRUCTS):
    """A distinct pointer type to an empty struct named ``struct_tag``, for the C typedef
    ``typedef``, entered in ``registry`` (each library's header test reads its own)."""
    struct = type(struct_tag, (ctypes.Structure,), {"_fields_": []})
    ptr = ctypes.POINTER(struct)
    ptr.C_NAME = typedef
    registry[typedef] = struct_tag
    return ptr



cudnnHandle_t = opaque("cudnnHandle_t", "cudnnContext")
cudnnTensorDescriptor_t = opaque("cudnnTensorDescriptor_t", "cudnnTensorStruct")
cudnnFilterDescriptor_t = opaque("cudnnFilterDescriptor_t", "cudnnFilterStruct")
cudnnDropoutDescriptor_t = opaque("cudnnDropoutDescriptor_t", "cudnnDropoutStruct")
cudnnRNNDescriptor_t = opaque("cudnnRNNDescriptor_t", "cudnnRNNStruct")
cudnnRNNDataDescriptor_t = opaque("cudnnRNNDataDescriptor_t", "cudnnRNNDataStruct")

# CUDA runtime types that appear in cuDNN prototypes: a stream is an opaque pointer too
# (``typedef struct CUstream_st *cudaStream_t`` in CUDA's driver_types.h).
cudaStream_t = ctypes.POINTER(type("CUstream_st", (ctypes.Structure,), {"_fields_": []}))
cudaStream_t.C_NAME = "cudaStream_t"


def stream(address: int | None):
    """A cudaStream_t from a raw address (e.g. ``cupy.cuda.Stream().ptr``); 0/None is the
    legacy default stream."""
    return ctypes.cast(ctypes.c_void_p(address or 0), cudaStream_t)

# Every C enum is passed as a C int.
c_enum = ctypes.c_int


class cudnnDebug_t(ctypes.Structure):
    """``cudnnDebugStruct`` of cudnn_graph.h, handed to the logging callback."""
    _fields_ = [
        ("cudnn_version", ctypes.c_uint),
        ("cudnnStatus", ctypes.c_int),
        ("time_sec", ctypes.c_uint),
        ("time_usec", ctypes.c_uint),
        ("time_delta", ctypes.c_uint),
        ("handle", cudnnHandle_t),
        ("stream", cudaStream_t),
        ("pid", ctypes.c_ulonglong),
        ("tid", ctypes.c_ulonglong),
        ("cudaDeviceId", ctypes.c_int),
        ("reserved", ctypes.c_int * 15),
    ]


# typedef void (*cudnnCallback_t)(cudnnSeverity_t, void *udata, const cudnnDebug_t *, const char *msg)
# msg is a sequence of NUL-terminated lines ending with an empty one, so it is taken as void*.
cudnnCallback_t = ctypes.CFUNCTYPE(None, c_enum, ctypes.c_void_p, ctypes.POINTER(cudnnDebug_t),
                                   ctypes.c_void_p)
cudnnCallback_t.C_NAME = "cudnnCallback_t"
