"""A flow's device buffers back as float64, in the reference's (T, B, features) layout.

Every read first synchronises the flow's stream. cuDNN does not say that a
BATCH_MAJOR_UNPACKED buffer is (B, T, features) in memory, nor where the bytes of a
weight-space entry end: both come from the flow's data descriptors and weight layout.
"""
from __future__ import annotations

import numpy as np

from cudnn_rnn.engine import dtypes, packing
from cudnn_rnn.engine.flow import buffer_shape, output_names


def read(flow, name: str, on_device: bool = False):
    """One buffer as float64 (a cupy array when ``on_device``, else numpy)."""
    dt = flow.cfg.data_type
    flow.stream.synchronize()
    raw = flow.buf[name] if on_device else flow.buf[name].get()
    shape = buffer_shape(flow.cfg, name)
    values = dtypes.decode(raw.view(dtypes.storage_dtype(dt)), dt)
    if flow.packed(name):
        rows = sum(flow.cfg.seq_lengths)
        return packing.unpack(values[:rows * shape[2]].reshape(rows, shape[2]),
                              flow.cfg.seq_lengths, shape[0])
    if flow.batch_major(name):
        return values.reshape(shape[1], shape[0], shape[2]).transpose(1, 0, 2)
    return values.reshape(shape)


def weight_space(flow, name: str = "dw") -> np.ndarray:
    """The whole weight space (or dw) as float64 elements of the data type."""
    dt = flow.cfg.data_type
    flow.stream.synchronize()
    raw = flow.buf[name].get()[:flow.sizes["weight_space"]]
    usable = raw.size // dtypes.itemsize(dt) * dtypes.itemsize(dt)
    return dtypes.decode(raw[:usable].view(dtypes.storage_dtype(dt)), dt)


def weight_arrays(flow, name: str = "w", on_device: bool = False) -> dict:
    """Each matrix and bias of the weight space (or dw) by (pseudo_layer, lin_id, kind)."""
    dt = flow.cfg.data_type
    item = dtypes.itemsize(dt)
    flow.stream.synchronize()
    raw = flow.buf[name] if on_device else flow.buf[name].get()
    out = {}
    for e in flow.entries:
        chunk = raw[e.offset:e.offset + e.size * item].view(dtypes.storage_dtype(dt))
        out[(e.pseudo_layer, e.lin_id, e.kind)] = dtypes.decode(chunk, dt).reshape(e.shape)
    return out


def outputs(flow, on_device: bool = False) -> dict:
    """Every output of the training and inference passes and the weight gradients, as
    float64 (cupy arrays when ``on_device``: large shapes are then checked without a trip
    to the host)."""
    out = {n: read(flow, n, on_device) for n in output_names(flow.cfg)}
    out["dw"] = weight_arrays(flow, "dw", on_device)
    return out


def checksums(flow) -> dict:
    """The sample's checksums: float64 sums of y, hy, cy, dx, dhx, dcx and all of dw."""
    out = {n: float(read(flow, n).sum()) for n in ("y", "hy", "dx", "dhx")}
    if flow.cfg.has_cell_state:
        out["cy"] = float(read(flow, "cy").sum())
        out["dcx"] = float(read(flow, "dcx").sum())
    out["dw"] = float(weight_space(flow, "dw").sum())
    return out
