"""Where cuDNN puts each matrix and bias inside the weight space.

cudnnGetRNNWeightParams answers, per pseudo-layer (layer × direction) and linLayerID,
the address of one matrix and one bias and a tensor descriptor of each. The C API does
not say: which IDs exist per cell (RELU/TANH 0-1, GRU 0-5, LSTM 0-7: input matrices first,
then recurrent ones, gates in cuDNN's order), that LSTM's projection is ID 8 with no bias,
or that an absent entry comes back as a NULL address (NO_BIAS, SINGLE_*_BIAS, SKIP_INPUT).
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.engine.descriptors import TensorDescriptor

PROJECTION_ID = 8  # LSTM's recurrent projection (projSize < hiddenSize)


@dataclass
class WeightEntry:
    """One matrix or bias inside the weight space, as cudnnGetRNNWeightParams reports it."""
    pseudo_layer: int
    lin_id: int
    kind: str  # "matrix" | "bias"
    offset: int  # bytes from the start of the weight space
    dims: tuple  # as reported (3-D)

    @property
    def shape(self) -> tuple:
        d = self.dims
        return (d[1], d[2]) if self.kind == "matrix" else (d[1],)

    @property
    def size(self) -> int:
        return int(np.prod(self.dims))


def lin_ids(cfg: RNNConfig) -> range:
    """The linLayerIDs of one pseudo-layer: LSTM's eight matrices are 0-7, so its
    projection, when there is one, is the ninth (:data:`PROJECTION_ID`)."""
    return range(cfg.linear_layers)


def query_layout(lib, handle, rnn, cfg: RNNConfig, weight_space: int, base: int
                 ) -> list[WeightEntry]:
    """Every matrix and bias that exists, in (pseudo-layer, linLayerID, matrix-then-bias)
    order, with its byte offset from ``base`` (the weight space's device address)."""
    entries = []
    with TensorDescriptor(lib) as m_desc, TensorDescriptor(lib) as b_desc:
        for pseudo in range(cfg.pseudo_layers):
            for lin_id in lin_ids(cfg):
                m_addr, b_addr = ctypes.c_void_p(), ctypes.c_void_p()
                lib.cudnnGetRNNWeightParams(handle, rnn, pseudo, weight_space, base, lin_id,
                                            m_desc, ctypes.byref(m_addr), b_desc,
                                            ctypes.byref(b_addr))
                for kind, addr, desc in (("matrix", m_addr, m_desc), ("bias", b_addr, b_desc)):
                    if addr.value:
                        _dt, dims, _strides = desc.get_nd(3)
                        entries.append(WeightEntry(pseudo, lin_id, kind, addr.value - base,
                                                   tuple(dims)))
    return entries
