"""A user's ``torch.nn.LSTM``, ``GRU`` or ``RNN``: what it is (:class:`ModuleSpec`), its
weights in cuDNN's layout (through :mod:`cudnn_rnn.charlm.statedict`, the project's one
mapping of PyTorch's names), and a digest of them, by which a plan file names the module it
was made for.

Everything here but :func:`inspect` and :func:`state_arrays` works on numpy arrays, without
PyTorch.
"""
from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass

import numpy as np

from cudnn_rnn.bindings.enums import RNNMode
from cudnn_rnn.charlm import statedict
from cudnn_rnn.torch.errors import NotAccelerated

DTYPES = ("float32", "float16", "bfloat16")  # the weights this package takes
CELLS = ("LSTM", "GRU", "RNN_TANH", "RNN_RELU")  # torch.nn.RNNBase.mode, cuDNN's names


@dataclass(frozen=True)
class ModuleSpec:
    """The module's structure and data type: what a plan must match."""
    cell: str  # an RNNMode name (torch's ``mode``)
    layers: int
    input_size: int
    hidden: int
    proj: int  # the output features per direction: hidden unless proj_size is set
    bidirectional: bool
    batch_first: bool
    dtype: str  # one of DTYPES

    @property
    def mode(self) -> RNNMode:
        return RNNMode[self.cell]

    @property
    def dirs(self) -> int:
        return 2 if self.bidirectional else 1

    def as_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        """e.g. ``LSTM 2 layers, 512 -> 512, bidirectional, float16``."""
        proj = f", projection {self.proj}" if self.proj != self.hidden else ""
        return (f"{self.cell} {self.layers} layer{'s' * (self.layers > 1)}, "
                f"{self.input_size} -> {self.hidden}{proj}, "
                f"{'bidirectional' if self.bidirectional else 'unidirectional'}"
                f"{', batch_first' if self.batch_first else ''}, {self.dtype}")


def inspect(module) -> ModuleSpec:
    """The :class:`ModuleSpec` of a ``torch.nn.LSTM``/``GRU``/``RNN``; :class:`NotAccelerated`
    for anything else, or weights of another data type."""
    import torch
    if not isinstance(module, torch.nn.RNNBase) or getattr(module, "mode", None) not in CELLS:
        raise NotAccelerated(f"accelerate takes a torch.nn.LSTM, GRU or RNN, not a "
                             f"{type(module).__name__}")
    dtypes = {str(p.dtype).removeprefix("torch.") for p in module.parameters()}
    if len(dtypes) != 1 or not dtypes <= set(DTYPES):
        raise NotAccelerated(f"the module's weights are {', '.join(sorted(dtypes))}; give "
                             f"float32, float16 or bfloat16 weights (module.float(), .half() "
                             f"or .bfloat16())")
    proj = int(getattr(module, "proj_size", 0) or 0)
    return ModuleSpec(module.mode, int(module.num_layers), int(module.input_size),
                      int(module.hidden_size), proj or int(module.hidden_size),
                      bool(module.bidirectional), bool(module.batch_first), dtypes.pop())


def device_refusal(device_type: str, gpu_reason: str | None) -> str | None:
    """Why a module on ``device_type`` ("cuda", "cpu", ...) cannot be accelerated on this
    machine (``gpu_reason``: why there is no usable GPU, or None), or None where it can."""
    if gpu_reason is not None:
        return f"accelerate needs a CUDA GPU: {gpu_reason}"
    if device_type != "cuda":
        return (f"the module is on the {device_type.upper()}; move it to the GPU first "
                f"(module.cuda())")
    return None


def state_arrays(module) -> dict:
    """The module's state_dict as float32 numpy arrays (exact for every one of
    :data:`DTYPES`), with zero biases added where it was built with ``bias=False`` (its
    function is then cuDNN's DOUBLE_BIAS with zeros, exactly)."""
    state = {k: v.detach().float().cpu().numpy() for k, v in module.state_dict().items()}
    if not module.bias:
        for name in [k for k in state if k.startswith("weight_hh_l")]:
            rows = state[name].shape[0]
            for bias in ("bias_ih", "bias_hh"):
                state[name.replace("weight_hh", bias)] = np.zeros(rows, np.float32)
    return state


def weights(state: dict, spec: ModuleSpec) -> statedict.RNNWeights:
    """The module's weights (float64, cuDNN's per-gate layout) from its :func:`state_arrays`;
    the plain RNN keeps its nonlinearity. :class:`NotAccelerated` if the tensors do not
    describe ``spec``."""
    plain = spec.mode if spec.mode in (RNNMode.RNN_TANH, RNNMode.RNN_RELU) else RNNMode.RNN_TANH
    try:
        rnn = statedict.from_state(state, "the module's state_dict", plain_cell=plain)
    except statedict.BadModel as exc:
        raise NotAccelerated(str(exc)) from None
    got = (rnn.mode.name, rnn.layers, rnn.input_size, rnn.hidden, rnn.proj, rnn.bidirectional)
    want = (spec.cell, spec.layers, spec.input_size, spec.hidden, spec.proj, spec.bidirectional)
    if got != want:
        raise NotAccelerated(f"the module's tensors describe {got}, its attributes {want}")
    return rnn


def digest(state: dict) -> str:
    """sha256 of the tensors (names and float32 bytes, in name order): a plan file records
    it, and is refused for a module whose weights differ."""
    h = hashlib.sha256()
    for name in sorted(state):
        a = np.ascontiguousarray(state[name], dtype=np.float32)
        h.update(name.encode() + b"\0" + str(a.shape).encode() + b"\0" + a.tobytes())
    return h.hexdigest()
