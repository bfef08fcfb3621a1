"""ctypes bindings for the parts of libcudnn that NVIDIA's RNN_example uses.

A faithful, logic-free mirror of the C API: enums with the headers' values
(:mod:`.enums`), distinct opaque handle types (:mod:`.ctypes_types`), one
prototype table (:mod:`.prototypes`), exceptions generated from ``cudnnStatus_t``
(:mod:`.errors`) and one lazy, thread-safe loader (:mod:`.library`)::

    from cudnn_rnn.bindings import load, enums
    lib = load()
    print(lib.version_string, lib.path)
"""
from . import ctypes_types, enums, errors, prototypes
from .library import Library, decode_version, load, loaded

__all__ = ["Library", "ctypes_types", "decode_version", "enums", "errors", "load", "loaded",
           "prototypes"]
