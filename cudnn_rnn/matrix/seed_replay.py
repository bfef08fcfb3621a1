"""The seed's failing calls, replayed one by one on this cuDNN.

The seed (NVIDIA's old RNN_example switched to CUDNN_DATA_INT8) printed a cascade:
NOT_SUPPORTED, BAD_PARAM, then a CUDA out-of-memory. Here each link is run on its
own so the report can say which failures were real and which were consequences:

* the RNN descriptor with INT8 data and INT8 math precision (the first refusal);
* the weight-space size query on that descriptor, with the output pre-filled with a
  sentinel: a failed query leaves it unwritten, and the old sample went on to
  ``cudaMalloc`` whatever the variable held — the bogus out-of-memory;
* the seed's line 309, ``cudnnSetFilterNdDescriptor(wDesc, CUDNN_DATA_INT8,
  CUDNN_TENSOR_NCHW, 3, dimW)`` with a *correct* size (the FP32 parameter count of
  the same network), against the same call with FLOAT.
"""
from __future__ import annotations

import ctypes

from cudnn_rnn.bindings import errors
from cudnn_rnn.bindings.enums import DataType, RNNMode, TensorFormat

from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.engine.descriptors import DropoutDescriptor, FilterDescriptor, Handle, RNNDescriptor

SENTINEL = 0xDEADBEEFCAFE  # what an unwritten size_t would hold in this replay
SEED = RNNConfig(seq_length=20, num_layers=2, hidden_size=512, mini_batch=64,
                 mode=RNNMode.RNN_RELU, data_type=DataType.INT8, math_prec=DataType.INT8)


def parameter_count(cfg: RNNConfig) -> int:
    """Weights and biases of the network, by formula (what cudnnGetRNNWeightSpaceSize
    would report for FLOAT, divided by 4; no GPU needed)."""
    g, H, P = cfg.gates, cfg.hidden_size, cfg.proj_size
    total = 0
    for layer in range(cfg.num_layers):
        inp = cfg.input_size if layer == 0 else P * cfg.dirs
        per_dir = g * H * inp + g * H * P + 2 * g * H  # W, R, bW and bR (double bias)
        if cfg.linear_layers == 9:
            per_dir += P * H
        total += per_dir * cfg.dirs
    return total


def _outcome(call: str, fn) -> dict:
    try:
        fn()
        return {"call": call, "status": "SUCCESS", "status_code": 0, "reason": None}
    except errors.CudnnError as exc:
        return {"call": call, "status": exc.status_name, "status_code": exc.code,
                "reason": exc.reason}


def replay(lib, device: bool) -> list[dict]:
    """Run the seed's calls; each entry says what the call returned (never raises)."""
    steps = []
    handle = None
    if device:
        try:
            handle = Handle(lib)
        except errors.CudnnError:
            handle = None
    try:
        with DropoutDescriptor(lib) as dropout, RNNDescriptor(lib) as rnn:
            steps.append({**_outcome("cudnnSetRNNDescriptor_v8", lambda: rnn.set_v8(SEED, dropout)),
                          "args": "INT8 data, INT8 math precision, RNN_RELU, 512/512, 2 layers"})
            size = ctypes.c_size_t(SENTINEL)
            step = _outcome("cudnnGetRNNWeightSpaceSize", lambda: lib.cudnnGetRNNWeightSpaceSize(
                handle, rnn, ctypes.byref(size)))
            step.update(args="the INT8 descriptor above" + ("" if handle else ", no handle (no GPU)"),
                        output_before=SENTINEL, output_after=size.value,
                        output_written=size.value != SENTINEL)
            steps.append(step)
        count = parameter_count(SEED.replace(data_type=DataType.FLOAT, math_prec=DataType.FLOAT))
        for dt in (DataType.INT8, DataType.FLOAT):
            with FilterDescriptor(lib) as w:
                step = _outcome("cudnnSetFilterNdDescriptor",
                                lambda: w.set_nd(dt, TensorFormat.NCHW, [count, 1, 1]))
                step["args"] = f"CUDNN_DATA_{dt.name}, CUDNN_TENSOR_NCHW, 3, {{{count}, 1, 1}}"
                steps.append(step)
    finally:
        if handle is not None:
            handle.close()
    return steps
