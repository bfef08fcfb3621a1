"""ctypes bindings for the parts of cuBLASLt the 8-bit RNN engine uses.

The same shape as the cuDNN bindings one level up: enums with the headers' values
(:mod:`.enums`), distinct handle types and the structs passed by value (:mod:`.types`),
one prototype table (:mod:`.prototypes`), exceptions generated from ``cublasStatus_t``
(:mod:`.errors`) and one lazy, thread-safe loader (:mod:`.library`)::

    from cudnn_rnn.bindings import cublaslt
    lt = cublaslt.load()
    print(lt.version_string, lt.path, lt.source)
"""
from . import enums, errors, prototypes, types
from .library import Library, decode_version, load, loaded

__all__ = ["Library", "decode_version", "enums", "errors", "load", "loaded", "prototypes", "types"]
