"""cuDNN objects as context managers that always destroy what they created.

Each wrapper creates its C object in ``__init__`` and destroys it in
:meth:`close` (also on ``__exit__``), exactly once. Instances pass straight to
the bound functions through ``_as_parameter_``, so ``lib.cudnnRNNForward(handle,
rnn, ...)`` takes them as they are. Setting happens in separate methods, so a
created-but-unset descriptor is a state the probe can test (cuDNN accepts an
unset dropout descriptor in cudnnSetRNNDescriptor_v8).

Children keep their parents alive, as llvmlite's object references do: every object holds
its library, a dropout descriptor the handle it was set with, and an RNN descriptor its
dropout descriptor, so nothing cuDNN still points into is collected first. (Destruction
stays explicit: :class:`~cudnn_rnn.engine.flow.RNNFlow` closes them innermost first.)
"""
from __future__ import annotations

import ctypes
import threading

import numpy as np

from cudnn_rnn.bindings import Library
from cudnn_rnn.bindings import ctypes_types as T
from cudnn_rnn.bindings.enums import (DataType, RNNDataLayout, RNN_PADDED_IO_DISABLED,
                                      RNN_PADDED_IO_ENABLED)


_THREAD = threading.local()


def uncounted() -> None:
    """The objects this thread creates from now on are left out of :func:`live_objects`
    (a worker's builder threads: :mod:`cudnn_rnn.matrix.ahead`)."""
    _THREAD.uncounted = True


class _CObject:
    """One cuDNN object: ``_create``/``_destroy`` name the C pair, ``_ctype`` its handle type."""

    _create: str
    _destroy: str
    _ctype: type
    live = 0  # created and not yet destroyed, all kinds together (leak check)

    def __init__(self, lib: Library):
        self.lib = lib
        self._ptr = self._ctype()
        self.closed = True
        getattr(lib, self._create)(ctypes.byref(self._ptr))
        self.closed = False
        self._counted = not getattr(_THREAD, "uncounted", False)
        if self._counted:
            _CObject.live += 1

    @property
    def _as_parameter_(self):
        if self.closed:
            raise ValueError(f"{type(self).__name__} was already destroyed")
        return self._ptr

    @property
    def address(self) -> int:
        return ctypes.cast(self._ptr, ctypes.c_void_p).value or 0

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self._counted:
                _CObject.live -= 1
            getattr(self.lib, self._destroy)(self._ptr)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def live_objects() -> int:
    """How many cuDNN objects this process created and has not destroyed."""
    return _CObject.live


class Handle(_CObject):
    """cudnnHandle_t: needs a GPU (cudnnCreate returns NOT_INITIALIZED without one)."""
    _create, _destroy, _ctype = "cudnnCreate", "cudnnDestroy", T.cudnnHandle_t

    def set_stream(self, stream_ptr: int) -> None:
        self.lib.cudnnSetStream(self, T.stream(stream_ptr))


class TensorDescriptor(_CObject):
    _create, _destroy = "cudnnCreateTensorDescriptor", "cudnnDestroyTensorDescriptor"
    _ctype = T.cudnnTensorDescriptor_t

    def set_nd(self, data_type: DataType, dims, strides=None) -> None:
        dims = [int(d) for d in dims]
        if strides is None:  # fully packed, row-major
            strides, acc = [], 1
            for d in reversed(dims):
                strides.insert(0, acc)
                acc *= d
        n = len(dims)
        self.lib.cudnnSetTensorNdDescriptor(self, int(data_type), n, (ctypes.c_int * n)(*dims),
                                            (ctypes.c_int * n)(*strides))

    def get_nd(self, max_dims: int = 8) -> tuple[int, list[int], list[int]]:
        dt, nb = ctypes.c_int(), ctypes.c_int()
        dims, strides = (ctypes.c_int * max_dims)(), (ctypes.c_int * max_dims)()
        self.lib.cudnnGetTensorNdDescriptor(self, max_dims, ctypes.byref(dt), ctypes.byref(nb),
                                            dims, strides)
        return dt.value, list(dims[:nb.value]), list(strides[:nb.value])


class FilterDescriptor(_CObject):
    """cudnnFilterDescriptor_t: deprecated in cuDNN 9 and unused by the v8 RNN API.

    Kept because the old sample described its weights with one, and the seed's
    ``cudnnSetFilterNdDescriptor(wDesc, INT8, NCHW, 3, dimW)`` is worth replaying.
    """
    _create, _destroy = "cudnnCreateFilterDescriptor", "cudnnDestroyFilterDescriptor"
    _ctype = T.cudnnFilterDescriptor_t

    def set_nd(self, data_type: DataType, tensor_format: int, dims) -> None:
        n = len(dims)
        self.lib.cudnnSetFilterNdDescriptor(self, int(data_type), int(tensor_format), n,
                                            (ctypes.c_int * n)(*[int(d) for d in dims]))


class DropoutDescriptor(_CObject):
    _create, _destroy = "cudnnCreateDropoutDescriptor", "cudnnDestroyDropoutDescriptor"
    _ctype = T.cudnnDropoutDescriptor_t

    def set(self, handle: Handle, dropout: float, states_ptr: int, states_size: int,
            seed: int = 1337) -> None:
        self.lib.cudnnSetDropoutDescriptor(self, handle, float(dropout), states_ptr or None,
                                           int(states_size), int(seed))
        self.handle = handle


class RNNDescriptor(_CObject):
    _create, _destroy = "cudnnCreateRNNDescriptor", "cudnnDestroyRNNDescriptor"
    _ctype = T.cudnnRNNDescriptor_t

    def set_v8(self, cfg, dropout: DropoutDescriptor | None) -> None:
        """cudnnSetRNNDescriptor_v8 from an :class:`~cudnn_rnn.engine.config.RNNConfig`."""
        aux = RNN_PADDED_IO_ENABLED if cfg.padded_io else RNN_PADDED_IO_DISABLED
        self.lib.cudnnSetRNNDescriptor_v8(
            self, int(cfg.algo), int(cfg.mode), int(cfg.bias_mode), int(cfg.direction),
            int(cfg.input_mode), int(cfg.data_type), int(cfg.math_prec), int(cfg.math_type),
            cfg.input_size, cfg.hidden_size, cfg.proj_size, cfg.num_layers, dropout, aux)
        self.dropout = dropout


class RNNDataDescriptor(_CObject):
    _create, _destroy = "cudnnCreateRNNDataDescriptor", "cudnnDestroyRNNDataDescriptor"
    _ctype = T.cudnnRNNDataDescriptor_t

    def set(self, data_type: DataType, layout: RNNDataLayout, max_seq_length: int,
            batch_size: int, vector_size: int, seq_lengths) -> None:
        """``seq_lengths`` is the *host* array; padding is filled with zero (8 zero bytes
        read as the descriptor's data type, whatever it is)."""
        lengths = np.ascontiguousarray(seq_lengths, dtype=np.int32)
        if lengths.shape != (batch_size,):
            raise ValueError(f"seq_lengths holds {lengths.size} lengths for a batch of {batch_size}")
        self._fill = ctypes.c_double(0.0)  # kept alive with the descriptor
        self.lib.cudnnSetRNNDataDescriptor(self, int(data_type), int(layout), int(max_seq_length),
                                           int(batch_size), int(vector_size),
                                           lengths.ctypes.data_as(ctypes.POINTER(ctypes.c_int)),
                                           ctypes.cast(ctypes.byref(self._fill), ctypes.c_void_p))
