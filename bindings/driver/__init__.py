"""ctypes bindings for the few CUDA driver API calls CuPy does not make for this project
(the thread-block clusters' occupancy query and the kernel attribute it needs).

The same shape as the cuDNN and cuBLASLt bindings: enums with the header's values
(:mod:`.enums`), distinct handle types and the struct passed by pointer (:mod:`.types`),
one prototype table (:mod:`.prototypes`), exceptions generated from ``CUresult``
(:mod:`.errors`) and one lazy, thread-safe loader (:mod:`.library`)::

    from cudnn_rnn.bindings import driver
    drv = driver.load()
    print(drv.version_string, drv.path)
"""
from . import enums, errors, prototypes, types
from .library import Library, decode_version, load, loaded

__all__ = ["Library", "decode_version", "enums", "errors", "load", "loaded", "prototypes", "types"]
