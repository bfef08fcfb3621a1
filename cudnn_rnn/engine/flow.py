"""NVIDIA's RNN_example (the v8-API sample, ``RNN_v8.0``), stage by stage.

A :class:`RNNFlow` owns every cuDNN object and device buffer of one run and walks
:data:`STAGES` in the sample's order. Each stage is one method that either completes or
raises; :meth:`RNNFlow.run` stops at the first failing stage and records which call failed,
with which status and cuDNN's reason. No later call runs on outputs a failed call did not
write (the seed's bogus out-of-memory came from a size that a failed query never set).

Without a GPU only the descriptor stages run (they need no handle): the dropout descriptor
is created but not set, the RNN, data and state descriptors set for real; device stages are
then *skipped*, not failed.
"""
from __future__ import annotations

import ctypes
import time
from contextlib import ExitStack
from dataclasses import dataclass, field

import numpy as np

from cudnn_rnn import bindings
from cudnn_rnn.bindings import errors
from cudnn_rnn.bindings.enums import ForwardMode, RNNAlgo, RNNDataLayout, WgradMode

from cudnn_rnn.engine import dtypes, gpu, packing, values as drawn_values
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.engine.descriptors import (DropoutDescriptor, Handle, RNNDataDescriptor,
                                          RNNDescriptor, TensorDescriptor)
from cudnn_rnn.engine.values import ValuesCache
from cudnn_rnn.engine.weights import WeightEntry, query_layout

STAGES = (
    "handle",             # cudnnCreate, cudnnSetStream
    "dropout",            # cudnnCreateDropoutDescriptor, cudnnDropoutGetStatesSize, cudnnSetDropoutDescriptor
    "rnn_descriptor",     # cudnnCreateRNNDescriptor, cudnnSetRNNDescriptor_v8
    "data_descriptors",   # cudnnSetRNNDataDescriptor for x and y
    "state_descriptors",  # cudnnSetTensorNdDescriptor for h and c
    "weight_space",       # cudnnGetRNNWeightSpaceSize, then allocate w and dw
    "temp_space",         # cudnnGetRNNTempSpaceSizes (training and inference), allocate
    "weights",            # cudnnGetRNNWeightParams for every pseudo-layer and linLayerID; fill
    "build_dynamic",      # cudnnBuildRNNDynamic (PERSIST_DYNAMIC only)
    "forward_training",   # cudnnRNNForward(CUDNN_FWD_MODE_TRAINING)
    "backward_data",      # cudnnRNNBackwardData_v8
    "backward_weights",   # cudnnRNNBackwardWeights_v8 (WGRAD_MODE_ADD into a zeroed dw)
    "forward_inference",  # cudnnRNNForward(CUDNN_FWD_MODE_INFERENCE)
)
DESCRIPTOR_STAGES = ("dropout", "rnn_descriptor", "data_descriptors", "state_descriptors")
OUTPUTS = ("y", "hy", "dx", "dhx", "y_inf", "hy_inf")  # every output buffer; and for LSTM:
CELL_STATE_OUTPUTS = ("cy", "dcx", "cy_inf")
SEQUENCE_BUFFERS = ("x", "y", "dx", "dy", "y_inf")  # (T, B, features): the layout applies
COMPUTE_STAGES = ("forward_training", "backward_data", "backward_weights", "forward_inference")


@dataclass
class StageFailure:
    """Why a flow stopped: the stage, the C call, and what it returned."""
    stage: str
    call: str
    status: str  # cuDNN status name without prefix, or CUDA_ERROR / HOST_ERROR
    code: int | None
    reason: str | None
    kind: str = "cudnn"  # cudnn | cuda | host


@dataclass
class FlowResult:
    config: RNNConfig
    reached: list = field(default_factory=list)  # stages completed, in order
    skipped: list = field(default_factory=list)  # stages not run (no GPU, or not needed)
    skip_reason: str | None = None
    failure: StageFailure | None = None
    sizes: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    stage_s: dict = field(default_factory=dict)  # wall seconds per stage run

    @property
    def completed(self) -> bool:
        """Every stage that applies ran and succeeded."""
        return self.failure is None and not self.skip_reason


class FlowStop(Exception):
    def __init__(self, failure: StageFailure):
        super().__init__(failure.call)
        self.failure = failure


def output_names(cfg: RNNConfig) -> tuple:
    """The output buffers a flow of ``cfg`` allocates."""
    return OUTPUTS + (CELL_STATE_OUTPUTS if cfg.has_cell_state else ())


def buffer_shape(cfg: RNNConfig, name: str) -> tuple:
    """The (T, B, features) or (layers x directions, B, features) shape of buffer ``name``."""
    return {"x": cfg.x_shape, "dx": cfg.x_shape, "y": cfg.y_shape, "y_inf": cfg.y_shape,
            "dy": cfg.y_shape, "hy": cfg.h_shape, "hy_inf": cfg.h_shape, "dhx": cfg.h_shape,
            "cy": cfg.c_shape, "cy_inf": cfg.c_shape, "dcx": cfg.c_shape}[name]()


def _ptr(buf) -> int | None:
    return None if buf is None else int(buf.data.ptr)


def _seq_lengths(buf):
    """The device ``int32_t devSeqLengths[]`` argument, typed as the prototype wants."""
    return ctypes.cast(ctypes.c_void_p(_ptr(buf)), ctypes.POINTER(ctypes.c_int32))


class RNNFlow:
    """Everything one RNN_example run creates; ``with RNNFlow(cfg) as flow: flow.run()``.

    ``init`` and ``seed`` choose the values (:mod:`.values`); ``values`` shares drawn
    values between flows. Outputs are read back with :mod:`.readback`.
    """

    def __init__(self, cfg: RNNConfig, lib: bindings.Library | None = None, *,
                 device: bool | None = None, init: str = "sample", seed: int = 0,
                 values: ValuesCache | None = None, handle: Handle | None = None):
        if init not in drawn_values.INITS:
            raise ValueError(f"init must be 'sample' or 'random', got {init!r}")
        self.cfg = cfg
        self.lib = lib or bindings.load()
        self.device = gpu.available() if device is None else device
        self.cp = gpu.cupy_or_raise() if self.device else None
        self.init = init
        self.seed = seed
        self.values = values
        self._stack = ExitStack()
        self.buf: dict = {}
        self.drawn: dict = {}  # float64 copies of what the device holds (weights: on it)
        self.entries: list[WeightEntry] = []
        self.sizes: dict = {}
        self.handle = self.dropout = self.rnn = None
        self._shared_handle = handle
        self.x_desc = self.y_desc = self.h_desc = self.c_desc = None
        self.stream = None
        self.result = FlowResult(cfg)

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def close(self) -> None:
        """Destroy descriptors and free device memory, innermost first."""
        if self.stream is not None:
            try:
                self.stream.synchronize()
            except Exception:
                pass
        self.buf.clear()
        self._stack.close()

    def _own(self, obj):
        self._stack.callback(obj.close)
        return obj

    # ------------------------------------------------------------------ running
    def run(self, until: str | None = None) -> FlowResult:
        """Walk the stages in order, on from where an earlier call stopped; stop at the
        first failure or after ``until``."""
        res = self.result
        for name in STAGES:
            if name in res.reached or res.failure is not None or (
                    name == "build_dynamic" and self.cfg.algo != RNNAlgo.PERSIST_DYNAMIC):
                continue
            if not self.device and name not in DESCRIPTOR_STAGES:
                res.skipped.append(name)
                res.skip_reason = gpu.unavailable_reason() or "device stages disabled"
                continue
            started = time.perf_counter()
            try:
                self.run_stage(name)
            except FlowStop as stop:
                res.failure = stop.failure
                break
            finally:
                res.stage_s[name] = round(time.perf_counter() - started, 5)
            res.reached.append(name)
            if name == until:
                break
        res.sizes = dict(self.sizes)
        return res

    def run_stage(self, name: str) -> None:
        """One stage; a failing call becomes :class:`FlowStop` with its record."""
        try:
            getattr(self, "_stage_" + name)()
        except errors.CudnnError as exc:
            raise FlowStop(StageFailure(name, exc.call, exc.status_name, exc.code, exc.reason))
        except errors.MissingSymbol as exc:
            raise FlowStop(StageFailure(name, str(exc).split()[0], "MISSING_SYMBOL", None,
                                        str(exc), "host"))
        except dtypes.NoHostEncoding as exc:
            raise FlowStop(StageFailure(name, "host", "HOST_ERROR", None, str(exc), "host"))
        except gpu.cuda_errors(self.cp) as exc:
            raise FlowStop(StageFailure(name, gpu.failed_call(exc), "CUDA_ERROR",
                                        getattr(exc, "status", None), str(exc), "cuda"))

    # ------------------------------------------------------------------ stages
    def _stage_handle(self):
        """cudnnCreate, or the caller's handle (one per worker, as PyTorch keeps one per
        device and thread), which the caller looks after: it gets this flow's stream."""
        shared = self._shared_handle
        self.handle = shared if shared is not None else self._own(Handle(self.lib))
        self.stream = self.cp.cuda.Stream(non_blocking=True)
        self.handle.set_stream(self.stream.ptr)

    def _stage_dropout(self):
        self.dropout = self._own(DropoutDescriptor(self.lib))
        if not self.device:
            return  # cudnnSetDropoutDescriptor needs a handle; an unset descriptor is accepted
        size = ctypes.c_size_t(0)
        self.lib.cudnnDropoutGetStatesSize(self.handle, ctypes.byref(size))
        self.sizes["dropout_states"] = size.value
        self.buf["dropout_states"] = self._alloc(size.value)
        self.dropout.set(self.handle, self.cfg.dropout, _ptr(self.buf["dropout_states"]),
                         size.value, 1337)

    def _stage_rnn_descriptor(self):
        self.rnn = self._own(RNNDescriptor(self.lib))
        self.rnn.set_v8(self.cfg, self.dropout)

    def _stage_data_descriptors(self):
        c = self.cfg
        lengths = np.asarray(c.seq_lengths, dtype=np.int32)
        self.x_desc = self._own(RNNDataDescriptor(self.lib))
        self.x_desc.set(c.data_type, c.layout, c.seq_length, c.mini_batch, c.input_size, lengths)
        self.y_desc = self._own(RNNDataDescriptor(self.lib))
        self.y_desc.set(c.data_type, c.layout, c.seq_length, c.mini_batch, c.y_size, lengths)
        if self.device:
            with self.stream:  # every device op goes on the flow's stream
                self.buf["seq_lengths"] = self.cp.asarray(lengths)

    def _stage_state_descriptors(self):
        c = self.cfg
        self.h_desc = self._own(TensorDescriptor(self.lib))
        self.h_desc.set_nd(c.data_type, c.h_shape())
        self.c_desc = self._own(TensorDescriptor(self.lib))
        self.c_desc.set_nd(c.data_type, c.c_shape())

    def _stage_weight_space(self):
        size = ctypes.c_size_t(0)
        self.lib.cudnnGetRNNWeightSpaceSize(self.handle, self.rnn, ctypes.byref(size))
        self.sizes["weight_space"] = size.value
        self.buf["w"] = self._alloc(size.value)
        self.buf["dw"] = self._alloc(size.value)

    def _stage_temp_space(self):
        sizes = {}
        for mode in (ForwardMode.TRAINING, ForwardMode.INFERENCE):
            work, reserve = ctypes.c_size_t(0), ctypes.c_size_t(0)
            self.lib.cudnnGetRNNTempSpaceSizes(self.handle, self.rnn, int(mode), self.x_desc,
                                               ctypes.byref(work), ctypes.byref(reserve))
            sizes[mode] = (work.value, reserve.value)
        self.sizes["work_space_training"], self.sizes["reserve_space"] = sizes[ForwardMode.TRAINING]
        self.sizes["work_space_inference"] = sizes[ForwardMode.INFERENCE][0]
        self.sizes["work_space"] = max(sizes[ForwardMode.TRAINING][0],
                                       sizes[ForwardMode.INFERENCE][0])
        self.buf["work"] = self._alloc(self.sizes["work_space"])
        self.buf["reserve"] = self._alloc(self.sizes["reserve_space"])

    def _stage_weights(self):
        c, space = self.cfg, self.sizes["weight_space"]
        self.entries = query_layout(self.lib, self.handle, self.rnn, c, space,
                                    _ptr(self.buf["w"]))
        key = ValuesCache.key(c, self.entries, self.init, self.seed, space) \
            if self.values is not None else None
        drawn = self.values.get(key) if key is not None else None
        with self.stream:  # the weights are drawn and encoded on the GPU, on this stream
            if drawn is None:
                drawn = drawn_values.draw(c, self.entries, space, self.init, self.seed, self.cp)
                if key is not None:
                    self.values.put(key, drawn)
            self.buf["w"][:space] = drawn["image"]
        self.drawn["weights"] = drawn["weights"]
        self.drawn.update(drawn["io"])
        self._place_io(drawn["io_bits"])

    def adopt(self, built) -> None:
        """Go on with ``built``'s RNN descriptor, set as this flow's and built ahead
        (:mod:`cudnn_rnn.matrix.ahead`); its flow is now this flow's to close."""
        self.rnn = self._own(built.flow).rnn

    def _stage_build_dynamic(self):
        self.lib.cudnnBuildRNNDynamic(self.handle, self.rnn, self.cfg.mini_batch)
        self.result.notes.append("cudnnBuildRNNDynamic called (PERSIST_DYNAMIC)")

    def _stage_forward_training(self):
        self.forward(ForwardMode.TRAINING)
        self.stream.synchronize()

    def _stage_backward_data(self):
        self.backward_data()
        self.stream.synchronize()

    def _stage_backward_weights(self):
        with self.stream:
            self.buf["dw"].fill(0)  # BackwardWeights with WGRAD_MODE_ADD accumulates into dw
        self.backward_weights()
        self.stream.synchronize()

    def _stage_forward_inference(self):
        self.forward(ForwardMode.INFERENCE)
        self.stream.synchronize()

    # ------------------------------------------------------------------ the compute calls
    def forward_space_sizes(self, mode: ForwardMode) -> tuple[int, int]:
        """(workSpaceSize, reserveSpaceSize) that :meth:`forward` passes in ``mode``: cuDNN's
        sizes for that mode (no reserve space in inference)."""
        if mode == ForwardMode.TRAINING:
            return self.sizes["work_space_training"], self.sizes["reserve_space"]
        return self.sizes["work_space_inference"], 0

    def forward(self, mode: ForwardMode, dev_seq_lengths: bool = True) -> None:
        """cudnnRNNForward; inference writes y_inf/hy_inf/cy_inf and uses no reserve space.
        The work space passed is the one buffer sized for both modes, with the size cuDNN
        gave for *this* mode (as PyTorch passes it). ``dev_seq_lengths=False`` passes NULL for
        devSeqLengths as PyTorch does (cuDNN 9 reads xDesc's); the sample the device copy."""
        b, s, lstm = self.buf, self.sizes, self.cfg.has_cell_state
        training = mode == ForwardMode.TRAINING
        sfx = "" if training else "_inf"
        work_size, reserve_size = self.forward_space_sizes(mode)
        self.lib.cudnnRNNForward(
            self.handle, self.rnn, int(mode),
            _seq_lengths(b["seq_lengths"]) if dev_seq_lengths else None,
            self.x_desc, _ptr(b["x"]), self.y_desc, _ptr(b["y" + sfx]),
            self.h_desc, _ptr(b["hx"]), _ptr(b["hy" + sfx]),
            self.c_desc, _ptr(b["cx"]) if lstm else None, _ptr(b["cy" + sfx]) if lstm else None,
            s["weight_space"], _ptr(b["w"]), work_size, _ptr(b["work"]),
            reserve_size, _ptr(b["reserve"]) if training else None)

    def backward_data(self) -> None:
        b, s, lstm = self.buf, self.sizes, self.cfg.has_cell_state
        self.lib.cudnnRNNBackwardData_v8(
            self.handle, self.rnn, _seq_lengths(b["seq_lengths"]), self.y_desc, _ptr(b["y"]),
            _ptr(b["dy"]), self.x_desc, _ptr(b["dx"]), self.h_desc, _ptr(b["hx"]),
            _ptr(b["dhy"]), _ptr(b["dhx"]), self.c_desc,
            _ptr(b["cx"]) if lstm else None, _ptr(b["dcy"]) if lstm else None,
            _ptr(b["dcx"]) if lstm else None,
            s["weight_space"], _ptr(b["w"]), s["work_space"], _ptr(b["work"]),
            s["reserve_space"], _ptr(b["reserve"]))

    def backward_weights(self) -> None:
        b, s = self.buf, self.sizes
        self.lib.cudnnRNNBackwardWeights_v8(
            self.handle, self.rnn, int(WgradMode.ADD), _seq_lengths(b["seq_lengths"]),
            self.x_desc, _ptr(b["x"]), self.h_desc, _ptr(b["hx"]), self.y_desc, _ptr(b["y"]),
            s["weight_space"], _ptr(b["dw"]), s["work_space"], _ptr(b["work"]),
            s["reserve_space"], _ptr(b["reserve"]))

    # ------------------------------------------------------------------ memory and data
    def _alloc(self, nbytes: int):
        """Raw device bytes (at least one, so every pointer is real and 256-byte aligned)."""
        with self.stream:
            return self.cp.empty(max(int(nbytes), 1), dtype=np.uint8)

    def _place_io(self, io_bits: dict) -> None:
        """Upload the inputs and allocate the outputs, filled with NaN."""
        c, dt = self.cfg, self.cfg.data_type
        for name, bits in io_bits.items():
            self.buf[name] = self._upload(self._to_device_layout(name, bits))
        for name in output_names(c):
            nbytes = int(np.prod(buffer_shape(c, name))) * dtypes.itemsize(dt)
            self.buf[name] = self._alloc(nbytes)
        self.poison_outputs(dtypes.nan_bits(dt))

    def poison_outputs(self, poison=None) -> None:
        """Fill every output with NaN, so anything cuDNN did not write is caught."""
        poison = dtypes.nan_bits(self.cfg.data_type) if poison is None else poison
        if poison is None:
            return
        pattern = poison.view(np.uint8)
        with self.stream:
            for name in output_names(self.cfg):
                self.buf[name].reshape(-1, pattern.size)[...] = self.cp.asarray(pattern)

    def _upload(self, bits: np.ndarray):
        raw = np.ascontiguousarray(bits).reshape(-1).view(np.uint8)
        dev = self._alloc(raw.size)
        dev.set(raw, stream=self.stream)
        return dev

    def batch_major(self, name: str) -> bool:
        """Whether buffer ``name`` is (B, T, features) on the device."""
        return self.cfg.layout == RNNDataLayout.BATCH_MAJOR_UNPACKED and name in SEQUENCE_BUFFERS

    def packed(self, name: str) -> bool:
        """Whether buffer ``name`` is packed without padding (:mod:`.packing`)."""
        return (self.cfg.layout == RNNDataLayout.SEQ_MAJOR_PACKED and not self.cfg.equal_lengths
                and name in packing.SEQUENCE_BUFFERS)

    def _to_device_layout(self, name: str, arr: np.ndarray) -> np.ndarray:
        if self.packed(name):
            return np.ascontiguousarray(packing.pack(arr, self.cfg.seq_lengths))
        return np.ascontiguousarray(arr.transpose(1, 0, 2)) if self.batch_major(name) else arr
