"""Every cuDNN function this project calls, declared once as data.

Each :class:`Proto` is a transcription of the C prototype: the return type and
each parameter's ctypes type, in order, with the C parameter name. The loader
turns them into ``argtypes``/``restype``; tests/test_header_fidelity.py parses the
headers of the loaded library and checks every entry against its declaration.

``LEGACY_SYMBOLS`` are the pre-v8 RNN entry points that NVIDIA's old RNN_example
used. cuDNN 9 removed them; they are only probed for presence, never called.
"""
from __future__ import annotations


from ctypes import POINTER, c_char_p, c_float, c_int, c_int32, c_size_t, c_uint, \
    c_uint32, c_ulonglong, c_void_p
from dataclasses import dataclass

from . import ctypes_types as T

STATUS = c_int  # cudnnStatus_t: every call returning it is checked by errors.check


@dataclass(frozen=True)
class Proto:
    name: str
    restype: object
    params: tuple  # ((c_name, ctypes_type), ...)
    header: str  # cuDNN 9 header that declares it
    min_version: int = 0  # first cuDNN version (decoded, e.g. 90000) that has it
    required: bool = True  # a missing required symbol is an error, not a report row

    @property
    def argtypes(self) -> list:
        return [t for _, t in self.params]

    @property
    def returns_status(self) -> bool:
        return self.restype is STATUS


def _p(name, restype, header, *params, **kw):
    return Proto(name, restype, tuple(params), header, **kw)


PVOID = c_void_p
PPVOID = POINTER(c_void_p)
PINT = POINTER(c_int)
PI32 = POINTER(c_int32)
PSIZE = POINTER(c_size_t)
E = T.c_enum
PE = POINTER(T.c_enum)

PROTOTYPES: tuple[Proto, ...] = (
    # --- cudnn_graph.h: version, errors, handle, logging
    _p("cudnnGetVersion", c_size_t, "cudnn_graph.h"),
    _p("cudnnGetCudartVersion", c_size_t, "cudnn_graph.h"),
    _p("cudnnGetErrorString", c_char_p, "cudnn_graph.h", ("status", E)),
    _p("cudnnGetLastErrorString", None, "cudnn_graph.h", ("message", c_char_p),
       ("max_size", c_size_t), min_version=90000, required=False),
    _p("cudnnCreate", STATUS, "cudnn_graph.h", ("handle", POINTER(T.cudnnHandle_t))),
    _p("cudnnDestroy", STATUS, "cudnn_graph.h", ("handle", T.cudnnHandle_t)),
    _p("cudnnSetStream", STATUS, "cudnn_graph.h", ("handle", T.cudnnHandle_t),
       ("streamId", T.cudaStream_t)),
    _p("cudnnSetCallback", STATUS, "cudnn_graph.h", ("mask", c_uint), ("udata", PVOID),
       ("fptr", T.cudnnCallback_t)),
    # --- cudnn_ops.h: tensor, filter, dropout
    _p("cudnnCreateTensorDescriptor", STATUS, "cudnn_ops.h",
       ("tensorDesc", POINTER(T.cudnnTensorDescriptor_t))),
    _p("cudnnSetTensorNdDescriptor", STATUS, "cudnn_ops.h", ("tensorDesc", T.cudnnTensorDescriptor_t),
       ("dataType", E), ("nbDims", c_int), ("dimA", PINT), ("strideA", PINT)),
    _p("cudnnGetTensorNdDescriptor", STATUS, "cudnn_ops.h", ("tensorDesc", T.cudnnTensorDescriptor_t),
       ("nbDimsRequested", c_int), ("dataType", PE), ("nbDims", PINT), ("dimA", PINT),
       ("strideA", PINT)),
    _p("cudnnDestroyTensorDescriptor", STATUS, "cudnn_ops.h",
       ("tensorDesc", T.cudnnTensorDescriptor_t)),
    _p("cudnnCreateFilterDescriptor", STATUS, "cudnn_ops.h",
       ("filterDesc", POINTER(T.cudnnFilterDescriptor_t))),
    _p("cudnnSetFilterNdDescriptor", STATUS, "cudnn_ops.h", ("filterDesc", T.cudnnFilterDescriptor_t),
       ("dataType", E), ("format", E), ("nbDims", c_int), ("filterDimA", PINT)),
    _p("cudnnDestroyFilterDescriptor", STATUS, "cudnn_ops.h",
       ("filterDesc", T.cudnnFilterDescriptor_t)),
    _p("cudnnCreateDropoutDescriptor", STATUS, "cudnn_ops.h",
       ("dropoutDesc", POINTER(T.cudnnDropoutDescriptor_t))),
    _p("cudnnDestroyDropoutDescriptor", STATUS, "cudnn_ops.h",
       ("dropoutDesc", T.cudnnDropoutDescriptor_t)),
    _p("cudnnDropoutGetStatesSize", STATUS, "cudnn_ops.h", ("handle", T.cudnnHandle_t),
       ("sizeInBytes", PSIZE)),
    _p("cudnnSetDropoutDescriptor", STATUS, "cudnn_ops.h", ("dropoutDesc", T.cudnnDropoutDescriptor_t),
       ("handle", T.cudnnHandle_t), ("dropout", c_float), ("states", PVOID),
       ("stateSizeInBytes", c_size_t), ("seed", c_ulonglong)),
    # --- cudnn_adv.h: RNN (v8 API)
    _p("cudnnCreateRNNDescriptor", STATUS, "cudnn_adv.h", ("rnnDesc", POINTER(T.cudnnRNNDescriptor_t))),
    _p("cudnnDestroyRNNDescriptor", STATUS, "cudnn_adv.h", ("rnnDesc", T.cudnnRNNDescriptor_t)),
    _p("cudnnSetRNNDescriptor_v8", STATUS, "cudnn_adv.h", ("rnnDesc", T.cudnnRNNDescriptor_t),
       ("algo", E), ("cellMode", E), ("biasMode", E), ("dirMode", E), ("inputMode", E),
       ("dataType", E), ("mathPrec", E), ("mathType", E), ("inputSize", c_int32),
       ("hiddenSize", c_int32), ("projSize", c_int32), ("numLayers", c_int32),
       ("dropoutDesc", T.cudnnDropoutDescriptor_t), ("auxFlags", c_uint32)),
    _p("cudnnCreateRNNDataDescriptor", STATUS, "cudnn_adv.h",
       ("rnnDataDesc", POINTER(T.cudnnRNNDataDescriptor_t))),
    _p("cudnnDestroyRNNDataDescriptor", STATUS, "cudnn_adv.h",
       ("rnnDataDesc", T.cudnnRNNDataDescriptor_t)),
    _p("cudnnSetRNNDataDescriptor", STATUS, "cudnn_adv.h", ("rnnDataDesc", T.cudnnRNNDataDescriptor_t),
       ("dataType", E), ("layout", E), ("maxSeqLength", c_int), ("batchSize", c_int),
       ("vectorSize", c_int), ("seqLengthArray", PINT), ("paddingFill", PVOID)),
    _p("cudnnGetRNNWeightSpaceSize", STATUS, "cudnn_adv.h", ("handle", T.cudnnHandle_t),
       ("rnnDesc", T.cudnnRNNDescriptor_t), ("weightSpaceSize", PSIZE)),
    _p("cudnnGetRNNTempSpaceSizes", STATUS, "cudnn_adv.h", ("handle", T.cudnnHandle_t),
       ("rnnDesc", T.cudnnRNNDescriptor_t), ("fwdMode", E), ("xDesc", T.cudnnRNNDataDescriptor_t),
       ("workSpaceSize", PSIZE), ("reserveSpaceSize", PSIZE)),
    _p("cudnnGetRNNWeightParams", STATUS, "cudnn_adv.h", ("handle", T.cudnnHandle_t),
       ("rnnDesc", T.cudnnRNNDescriptor_t), ("pseudoLayer", c_int32), ("weightSpaceSize", c_size_t),
       ("weightSpace", PVOID), ("linLayerID", c_int32), ("mDesc", T.cudnnTensorDescriptor_t),
       ("mAddr", PPVOID), ("bDesc", T.cudnnTensorDescriptor_t), ("bAddr", PPVOID)),
    _p("cudnnBuildRNNDynamic", STATUS, "cudnn_adv.h", ("handle", T.cudnnHandle_t),
       ("rnnDesc", T.cudnnRNNDescriptor_t), ("miniBatch", c_int)),
    _p("cudnnRNNForward", STATUS, "cudnn_adv.h", ("handle", T.cudnnHandle_t),
       ("rnnDesc", T.cudnnRNNDescriptor_t), ("fwdMode", E), ("devSeqLengths", PI32),
       ("xDesc", T.cudnnRNNDataDescriptor_t), ("x", PVOID), ("yDesc", T.cudnnRNNDataDescriptor_t),
       ("y", PVOID), ("hDesc", T.cudnnTensorDescriptor_t), ("hx", PVOID), ("hy", PVOID),
       ("cDesc", T.cudnnTensorDescriptor_t), ("cx", PVOID), ("cy", PVOID),
       ("weightSpaceSize", c_size_t), ("weightSpace", PVOID), ("workSpaceSize", c_size_t),
       ("workSpace", PVOID), ("reserveSpaceSize", c_size_t), ("reserveSpace", PVOID)),
    _p("cudnnRNNBackwardData_v8", STATUS, "cudnn_adv.h", ("handle", T.cudnnHandle_t),
       ("rnnDesc", T.cudnnRNNDescriptor_t), ("devSeqLengths", PI32),
       ("yDesc", T.cudnnRNNDataDescriptor_t), ("y", PVOID), ("dy", PVOID),
       ("xDesc", T.cudnnRNNDataDescriptor_t), ("dx", PVOID), ("hDesc", T.cudnnTensorDescriptor_t),
       ("hx", PVOID), ("dhy", PVOID), ("dhx", PVOID), ("cDesc", T.cudnnTensorDescriptor_t),
       ("cx", PVOID), ("dcy", PVOID), ("dcx", PVOID), ("weightSpaceSize", c_size_t),
       ("weightSpace", PVOID), ("workSpaceSize", c_size_t), ("workSpace", PVOID),
       ("reserveSpaceSize", c_size_t), ("reserveSpace", PVOID)),
    _p("cudnnRNNBackwardWeights_v8", STATUS, "cudnn_adv.h", ("handle", T.cudnnHandle_t),
       ("rnnDesc", T.cudnnRNNDescriptor_t), ("addGrad", E), ("devSeqLengths", PI32),
       ("xDesc", T.cudnnRNNDataDescriptor_t), ("x", PVOID), ("hDesc", T.cudnnTensorDescriptor_t),
       ("hx", PVOID), ("yDesc", T.cudnnRNNDataDescriptor_t), ("y", PVOID),
       ("weightSpaceSize", c_size_t), ("dweightSpace", PVOID), ("workSpaceSize", c_size_t),
       ("workSpace", PVOID), ("reserveSpaceSize", c_size_t), ("reserveSpace", PVOID)),
)

BY_NAME = {p.name: p for p in PROTOTYPES}

# The v6/v7 RNN API of the old RNN_example (cudnn_samples_v7/RNN), gone in cuDNN 9.0.
LEGACY_SYMBOLS: tuple[str, ...] = (
    "cudnnSetRNNDescriptor_v6",
    "cudnnSetRNNMatrixMathType",
    "cudnnSetRNNBiasMode",
    "cudnnGetRNNParamsSize",
    "cudnnGetRNNWorkspaceSize",
    "cudnnGetRNNTrainingReserveSize",
    "cudnnGetRNNLinLayerMatrixParams",
    "cudnnGetRNNLinLayerBiasParams",
    "cudnnRNNForwardInference",
    "cudnnRNNForwardTraining",
    "cudnnRNNBackwardData",
    "cudnnRNNBackwardWeights",
    "cudnnCreatePersistentRNNPlan",
    "cudnnSetPersistentRNNPlan",
    "cudnnDestroyPersistentRNNPlan",
)

