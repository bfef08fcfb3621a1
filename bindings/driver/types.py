"""The driver API's handle types and the one struct it takes here (cuda.h).

Handles are distinct ctypes pointer types (as in :mod:`..ctypes_types`): a stream passed
where a function is expected is a ctypes ``ArgumentError``. ``CUfunction`` is what CuPy's
``RawKernel.kernel.ptr`` holds (the driver's function of a loaded module).
"""
from __future__ import annotations

import ctypes

from .. import ctypes_types

# C typedef name -> the struct it points to (checked against cuda.h).
OPAQUE_STRUCTS: dict[str, str] = {}

CUfunction = ctypes_types.opaque("CUfunction", "CUfunc_st", OPAQUE_STRUCTS)
CUstream = ctypes_types.cudaStream_t  # typedef struct CUstream_st *CUstream: the runtime's stream
OPAQUE_STRUCTS["CUstream"] = "CUstream_st"


class CUlaunchConfig(ctypes.Structure):
    """A launch's grid, block, dynamic shared memory, stream and attributes. Queries such as
    ``cuOccupancyMaxActiveClusters`` read it; ``attrs`` may be NULL with ``numAttrs`` 0 (a
    kernel's ``__cluster_dims__`` then gives the cluster size). ``attrs`` points to
    ``CUlaunchAttribute`` records, which nothing here builds: a plain pointer."""
    C_NAME = "CUlaunchConfig"
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint),
                ("gridDimZ", ctypes.c_uint), ("blockDimX", ctypes.c_uint),
                ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", CUstream),
                ("attrs", ctypes.c_void_p), ("numAttrs", ctypes.c_uint)]


VALUE_STRUCTS = (CUlaunchConfig,)
