"""Every CUDA driver API function this project calls, declared once as data (cuda.h).

The same :class:`~..prototypes.Proto` records as the cuDNN and cuBLASLt bindings'; the
loader sets ``argtypes``/``restype`` from them and tests/test_driver_bindings.py checks
each against ``cuda.h``. None of these is renamed by the header's ``_v2`` macros.
"""
from __future__ import annotations

from ctypes import POINTER, c_char_p, c_int, c_uint

from ..prototypes import Proto
from . import types as T

STATUS = c_int  # CUresult: a call returning it is checked
E = c_int  # every C enum is passed as an int


def _p(name, *params):
    return Proto(name, STATUS, tuple(params), "cuda.h")


PROTOTYPES: tuple[Proto, ...] = (
    _p("cuInit", ("Flags", c_uint)),
    _p("cuDriverGetVersion", ("driverVersion", POINTER(c_int))),
    _p("cuGetErrorName", ("error", E), ("pStr", POINTER(c_char_p))),
    _p("cuGetErrorString", ("error", E), ("pStr", POINTER(c_char_p))),
    _p("cuFuncSetAttribute", ("hfunc", T.CUfunction), ("attrib", E), ("value", c_int)),
    _p("cuOccupancyMaxActiveClusters", ("numClusters", POINTER(c_int)),
       ("func", T.CUfunction), ("config", POINTER(T.CUlaunchConfig))),
)

BY_NAME = {p.name: p for p in PROTOTYPES}
