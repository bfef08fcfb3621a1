"""CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED with sequences of different lengths.

A packed buffer holds no padding: time step by time step, the vectors of the sequences that
still run at that step, in batch order. cuDNN requires the lengths in non-increasing order
for this layout (cudnnSetRNNDataDescriptor: BAD_PARAM, "isSortedSequences == false"), so the
running sequences are always the first ones of the batch. With equal lengths a packed buffer
is the dense (T, B, features) array itself.
"""
from __future__ import annotations

import sys

import numpy as np

SEQUENCE_BUFFERS = ("x", "y", "dx", "dy", "y_inf")  # the (T, B, features) buffers


def pack(dense: np.ndarray, lengths) -> np.ndarray:
    """(T, B, F) host array → the packed rows, (sum(lengths), F), step by step."""
    lengths = np.asarray(lengths)
    return np.concatenate([dense[t][lengths > t] for t in range(dense.shape[0])], axis=0)


def unpack(rows, lengths, seq_length: int, fill: float = 0.0):
    """The inverse of :func:`pack`: (sum(lengths), F) → (T, B, F), padding set to ``fill``
    (numpy or cupy, as ``rows``)."""
    xp = _xp(rows)
    lengths = np.asarray(lengths)
    out = xp.full((seq_length, lengths.size, rows.shape[1]), fill, dtype=rows.dtype)
    start = 0
    for t in range(seq_length):
        active = np.flatnonzero(lengths > t)
        out[t, xp.asarray(active)] = rows[start:start + active.size]
        start += active.size
    return out


def _xp(a):
    cupy = sys.modules.get("cupy")  # cupy's module only where cupy is loaded already
    return cupy.get_array_module(a) if cupy is not None else np
