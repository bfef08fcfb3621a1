"""What one RNN run is: cell, sizes, precisions and algorithm, as one frozen dataclass.

Defaults are those of NVIDIA's v8 RNN_example (``RNN_v8.0``): seqLength 20,
2 layers, hidden 512, input 512, batch 64, RELU, LINEAR_INPUT, UNIDIRECTIONAL,
DOUBLE_BIAS, STANDARD, FLOAT data with FLOAT math precision and DEFAULT math.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

from cudnn_rnn.bindings.enums import (DataType, DirectionMode, MathType, RNNAlgo, RNNBiasMode,
                            RNNDataLayout, RNNInputMode, RNNMode)

# Matrices per layer and direction ("linear layers"), and gates, per cell.
LINEAR_LAYERS = {RNNMode.RNN_RELU: 2, RNNMode.RNN_TANH: 2, RNNMode.LSTM: 8, RNNMode.GRU: 6}
GATES = {RNNMode.RNN_RELU: 1, RNNMode.RNN_TANH: 1, RNNMode.LSTM: 4, RNNMode.GRU: 3}
SAMPLE_MODES = (RNNMode.RNN_RELU, RNNMode.RNN_TANH, RNNMode.LSTM, RNNMode.GRU)  # argv mode 0..3
C_INT_MAX = 2 ** 31 - 1  # cuDNN's sizes, dimensions and strides are C ints


LENGTHS_FORMS = ("equal", "descending:MIN", "random:MIN:SEED", "list:L1:L2:...")


@functools.lru_cache(maxsize=4096)
def _all_full(text: str, seq_length: int, mini_batch: int) -> bool:
    """Whether every length of the form is seqLength (cached: ids ask for it per cell)."""
    return all(n == seq_length for n in sequence_lengths(text, seq_length, mini_batch))


@functools.lru_cache(maxsize=4096)  # a pure function, asked for again and again
def sequence_lengths(text: str, seq_length: int, mini_batch: int) -> tuple[int, ...]:
    """Each sequence's length in a batch, from a lengths axis value: ``equal`` (all
    seq_length), ``descending:MIN`` (evenly from seq_length down to MIN, non-increasing, as
    a packed layout needs), ``random:MIN:SEED`` (uniform in [MIN, seq_length], unsorted,
    from numpy's generator with SEED) or ``list:L1:L2:...`` (one per sequence). ValueError
    names what is wrong."""
    if not isinstance(text, str):
        raise ValueError(f"lengths must be text such as 'equal', got {text!r}")
    kind, *args = text.strip().split(":")
    try:
        nums = [int(a) for a in args]
    except ValueError:
        raise ValueError(f"lengths {text!r}: the numbers after {kind!r} must be integers") from None
    if kind == "equal" and not args:
        return (seq_length,) * mini_batch
    if kind == "descending" and len(nums) == 1:
        low = nums[0]
        _check_length(low, seq_length, text)
        if mini_batch == 1:
            return (seq_length,)
        return tuple(int(round(seq_length - (seq_length - low) * b / (mini_batch - 1)))
                     for b in range(mini_batch))
    if kind == "random" and len(nums) == 2:
        low, seed = nums
        _check_length(low, seq_length, text)
        import numpy as np  # here: the probe's parent expands specs without loading numpy
        return tuple(int(v) for v in np.random.default_rng(seed).integers(
            low, seq_length + 1, size=mini_batch))
    if kind == "list" and nums:
        if len(nums) != mini_batch:
            raise ValueError(f"lengths {text!r}: {len(nums)} lengths for a batch of {mini_batch}")
        for n in nums:
            _check_length(n, seq_length, text)
        return tuple(nums)
    raise ValueError(f"lengths {text!r}: write one of {', '.join(LENGTHS_FORMS)}")


def _check_length(n: int, seq_length: int, text: str) -> None:
    if not 1 <= n <= seq_length:
        raise ValueError(f"lengths {text!r}: a length of {n} is outside 1..seqLength "
                         f"({seq_length})")


def default_math_prec(data_type: DataType) -> DataType:
    """The math precision the sample pairs with a data type: FLOAT for 16-bit inputs."""
    if data_type in (DataType.HALF, DataType.BFLOAT16):
        return DataType.FLOAT
    return data_type


@dataclass(frozen=True)
class RNNConfig:
    seq_length: int = 20
    num_layers: int = 2
    hidden_size: int = 512
    mini_batch: int = 64
    mode: RNNMode = RNNMode.RNN_RELU  # cuDNN's cellMode
    input_size: int | None = None  # given None: hidden_size, as in the sample
    proj_size: int | None = None  # given None: hidden_size (no projection)
    data_type: DataType = DataType.FLOAT
    math_prec: DataType | None = None  # given None: default_math_prec(data_type)
    math_type: MathType = MathType.DEFAULT_MATH
    algo: RNNAlgo = RNNAlgo.STANDARD
    direction: DirectionMode = DirectionMode.UNIDIRECTIONAL
    input_mode: RNNInputMode = RNNInputMode.LINEAR_INPUT
    bias_mode: RNNBiasMode = RNNBiasMode.DOUBLE_BIAS
    layout: RNNDataLayout = RNNDataLayout.SEQ_MAJOR_PACKED
    dropout: float = 0.0
    lengths: str = "equal"  # each sequence's length in the batch (see sequence_lengths)

    def __post_init__(self):
        """Check every size, and resolve the three that may be given as None, so each
        field holds the value cuDNN is given."""
        for name in ("seq_length", "num_layers", "hidden_size", "mini_batch", "input_size",
                     "proj_size"):
            value = getattr(self, name)
            if value is None and name in ("input_size", "proj_size"):
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name, value in self.c_ints().items():
            if value is None:
                continue
            if value > C_INT_MAX:
                raise ValueError(f"{name} = {value} does not fit the C int cuDNN takes "
                                 f"(at most {C_INT_MAX})")
        if not 0.0 <= self.dropout < 1.0:  # also false for NaN
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.lengths != "equal":  # ValueError if wrong ("equal" is right for any batch)
            sequence_lengths(self.lengths, self.seq_length, self.mini_batch)
        derived = []
        for name, value in (("input_size", self.hidden_size), ("proj_size", self.hidden_size),
                            ("math_prec", default_math_prec(self.data_type))):
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
                derived.append(name)
        object.__setattr__(self, "_derived", tuple(derived))  # not a field: not compared

    def c_ints(self) -> dict[str, int]:
        """Every size the flow passes to cuDNN as a C ``int``, by what it is: the RNN
        descriptor's sizes, the data descriptors' dimensions and sequence lengths, and the
        strides of the hidden- and cell-state tensors (batch x proj, batch x hidden).
        ctypes truncates an ``int`` argument silently, so each must be checked first. Each
        is named by the sizes it is made of as the configuration gives them (hidden_size
        where there is no projection)."""
        out = "proj_size" if self.proj_size else "hidden_size"
        return {"seq_length": self.seq_length, "num_layers": self.num_layers,
                "hidden_size": self.hidden_size, "mini_batch": self.mini_batch,
                "input_size": self.input_size or self.hidden_size,
                "proj_size" if self.proj_size else "proj_size (hidden_size: no projection)":
                    self.proj_size or self.hidden_size,
                f"output vector size ({out} x directions)":
                    (self.proj_size or self.hidden_size) * self.dirs,
                f"hidden-state stride (mini_batch x {out})":
                    self.mini_batch * (self.proj_size or self.hidden_size),
                "cell-state stride (mini_batch x hidden_size)": self.mini_batch * self.hidden_size}

    # --- derived sizes ------------------------------------------------------------------
    @property
    def seq_lengths(self) -> tuple[int, ...]:
        """Each sequence's length (``seqLengthArray``), from :attr:`lengths`."""
        return sequence_lengths(self.lengths, self.seq_length, self.mini_batch)

    @property
    def equal_lengths(self) -> bool:
        """Every sequence runs seqLength steps (whatever form the lengths were given in)."""
        return _all_full(self.lengths, self.seq_length, self.mini_batch)

    @property
    def bidirectional(self) -> bool:
        return self.direction == DirectionMode.BIDIRECTIONAL

    @property
    def dirs(self) -> int:
        return 2 if self.bidirectional else 1

    @property
    def linear_layers(self) -> int:
        """linLayerIDs per pseudo-layer; LSTM with a projection adds ID 8."""
        extra = 1 if self.mode == RNNMode.LSTM and self.proj_size != self.hidden_size else 0
        return LINEAR_LAYERS[self.mode] + extra

    @property
    def gates(self) -> int:
        return GATES[self.mode]

    @property
    def has_cell_state(self) -> bool:
        return self.mode == RNNMode.LSTM

    @property
    def padded_io(self) -> bool:
        """Unpacked layouts need CUDNN_RNN_PADDED_IO_ENABLED in auxFlags."""
        return self.layout != RNNDataLayout.SEQ_MAJOR_PACKED

    @property
    def y_size(self) -> int:
        return self.proj_size * self.dirs

    @property
    def pseudo_layers(self) -> int:
        return self.num_layers * self.dirs

    def x_shape(self) -> tuple[int, int, int]:
        return (self.seq_length, self.mini_batch, self.input_size)

    def y_shape(self) -> tuple[int, int, int]:
        return (self.seq_length, self.mini_batch, self.y_size)

    def h_shape(self) -> tuple[int, int, int]:
        return (self.pseudo_layers, self.mini_batch, self.proj_size)

    def c_shape(self) -> tuple[int, int, int]:
        return (self.pseudo_layers, self.mini_batch, self.hidden_size)

    # --- the sample's FLOP count ------------------------------------------------------
    def flop_count(self) -> int:
        """RNN_example's count for one forward pass.

        ``matrices-per-cell × 2 × directions × hidden² × seqLength × miniBatch × layers``
        (2, 8 or 6 matrices for RELU/TANH, LSTM, GRU). It assumes input == hidden
        and ignores biases and projections; backward counts twice this. With unequal
        lengths, seqLength × miniBatch becomes the steps really run, the sum of the lengths.
        """
        return (LINEAR_LAYERS[self.mode] * 2 * self.dirs * self.hidden_size ** 2
                * sum(self.seq_lengths) * self.num_layers)

    def replace(self, **changes) -> "RNNConfig":
        """A copy with ``changes``; what this config derived (a size or the math precision
        given as None) is derived again, so ``replace(hidden_size=...)`` of a config without
        a projection still has none."""
        return dataclasses.replace(self, **{**{n: None for n in self._derived}, **changes})

    def as_record(self) -> dict:
        """The configuration with cuDNN's enum names (no prefixes), for JSON records."""
        return {
            "data_type": self.data_type.name,
            "math_prec": self.math_prec.name,
            "math_type": self.math_type.short,
            "algo": self.algo.name,
            "cell": self.mode.name,  # the files' name for cellMode
            "direction": self.direction.name,
            "input_mode": self.input_mode.name,
            "bias_mode": self.bias_mode.name,
            "proj_size": self.proj_size,
            "layout": self.layout.name,
            "dropout": self.dropout,
            "lengths": self.lengths,
            "shape": {"seq_length": self.seq_length, "layers": self.num_layers,
                      "hidden": self.hidden_size, "batch": self.mini_batch,
                      "input_size": self.input_size},
        }
