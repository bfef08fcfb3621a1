"""A PyTorch recurrent module's weights, by their state_dict names, as cuDNN's per-gate layout.

``torch.nn.LSTM``/``GRU``/``RNN`` name their tensors ``weight_ih_l{k}``, ``weight_hh_l{k}``,
``bias_ih_l{k}``, ``bias_hh_l{k}`` (``_reverse`` for the second direction) and, for an LSTM
with ``proj_size``, ``weight_hr_l{k}``. Each matrix stacks the gates along its rows in the
order cuDNN's linLayerIDs use (LSTM i, f, g, o; GRU r, z, n), which is why PyTorch can hand
its flat weights to cuDNN as they are. What neither API says: the cell follows from the
rows (4 H: LSTM, 3 H: GRU, H: a plain RNN, which is tanh unless told otherwise), and both
biases map to cuDNN's DOUBLE_BIAS (``bias_ih`` -> bW, ``bias_hh`` -> bR).

The reading of files (``.pt``, ``.safetensors``, ``.npz``) is in :mod:`.files`; this module
works on a dict of numpy arrays and raises :class:`BadModel` with what is wrong.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from cudnn_rnn.bindings.enums import DirectionMode, RNNMode
from cudnn_rnn.check.reference import LayerParams
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.matrix.errors import BadInput

GATES = {4: RNNMode.LSTM, 3: RNNMode.GRU}
_NAME = re.compile(r"^(weight_ih|weight_hh|bias_ih|bias_hh|weight_hr)_l(\d+)(_reverse)?$")


class BadModel(BadInput):
    """A file or dict that is not the state_dict of a supported recurrent module."""


@dataclass
class RNNWeights:
    """A recurrent module's shape and weights (float64, cuDNN's layout per pseudo-layer)."""
    mode: RNNMode
    layers: int
    hidden: int
    input_size: int
    proj: int
    bidirectional: bool
    params: list  # LayerParams per pseudo-layer

    def config(self, seq: int, batch: int, **kw) -> RNNConfig:
        """The cuDNN configuration of this module for ``seq`` x ``batch`` inputs."""
        return RNNConfig(seq_length=seq, mini_batch=batch, num_layers=self.layers,
                         hidden_size=self.hidden, input_size=self.input_size,
                         proj_size=self.proj, mode=self.mode,
                         direction=DirectionMode.BIDIRECTIONAL if self.bidirectional
                         else DirectionMode.UNIDIRECTIONAL, **kw)


def _shape(state: dict, key: str, ndim: int, where: str) -> tuple:
    a = state.get(key)
    if a is None:
        raise BadModel(f"{where} has no {key!r}")
    if a.ndim != ndim:
        raise BadModel(f"{where}: {key} has shape {a.shape}, expected {ndim} dimensions")
    if not np.isfinite(a).all():
        raise BadModel(f"{where}: {key} holds NaN or infinite values")
    return a.shape


def from_state(state: dict, where: str = "state_dict", prefix: str = "",
               plain_cell: RNNMode = RNNMode.RNN_TANH) -> RNNWeights:
    """The module whose tensors are ``state[prefix + name]`` (numpy arrays). Keys without
    the prefix are ignored; among those with it, a name a recurrent module does not have
    is an error, as is any missing tensor, a shape that does not chain, or a bias-less
    module (``bias=False``: cuDNN's DOUBLE_BIAS with zeros would do, but is not what was
    saved, so it is refused rather than guessed)."""
    own = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
    if not own:
        raise BadModel(f"{where} has no tensors" + (f" under {prefix!r}" if prefix else ""))
    found = {}
    for name in own:
        m = _NAME.match(name)
        if m is None:
            raise BadModel(f"{where}: {prefix}{name!r} is not a tensor of torch.nn.LSTM, GRU "
                           f"or RNN (expected weight_ih_l0, weight_hh_l0, bias_ih_l0, ...)")
        found[(m.group(1), int(m.group(2)), bool(m.group(3)))] = own[name]
    layers = 1 + max(k[1] for k in found)
    bidirectional = any(k[2] for k in found)
    dirs = 2 if bidirectional else 1
    rows, cols = _shape(own, "weight_hh_l0", 2, where)
    has_proj = ("weight_hr", 0, False) in found
    hidden = _shape(own, "weight_hr_l0", 2, where)[1] if has_proj else cols
    if hidden < 1 or rows < 1:
        raise BadModel(f"{where}: weight_hh_l0 has shape {(rows, cols)}; an empty module")
    if rows % hidden:
        raise BadModel(f"{where}: weight_hh_l0 has {rows} rows, not a multiple of the "
                       f"hidden size {hidden}")
    gates = rows // hidden
    mode = GATES.get(gates, plain_cell if gates == 1 else None)
    if mode is None:
        raise BadModel(f"{where}: weight_hh_l0 has {gates} x {hidden} rows; an LSTM has 4, "
                       f"a GRU 3, an RNN 1")
    if has_proj and mode != RNNMode.LSTM:
        raise BadModel(f"{where}: weight_hr (a projection) belongs to an LSTM only")
    proj = cols
    input_size = _shape(own, "weight_ih_l0", 2, where)[1]
    params = []
    for layer in range(layers):
        for d in range(dirs):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            in_cols = input_size if layer == 0 else proj * dirs
            want = {"weight_ih": (gates * hidden, in_cols), "weight_hh": (gates * hidden, proj),
                    "bias_ih": (gates * hidden,), "bias_hh": (gates * hidden,)}
            if has_proj:
                want["weight_hr"] = (proj, hidden)
            got = {}
            for name, shape in want.items():
                if _shape(own, name + sfx, len(shape), where) != shape:
                    raise BadModel(f"{where}: {name + sfx} has shape {own[name + sfx].shape}, "
                                   f"expected {shape} for a {layers}-layer {mode.name} of "
                                   f"hidden size {hidden}")
                got[name] = np.asarray(own[name + sfx], dtype=np.float64)
            split = lambda a: [a[k * hidden:(k + 1) * hidden] for k in range(gates)]  # noqa: E731
            params.append(LayerParams(W=split(got["weight_ih"]), R=split(got["weight_hh"]),
                                      bW=split(got["bias_ih"]), bR=split(got["bias_hh"]),
                                      P=got.get("weight_hr")))
    expected = len(params) * (5 if has_proj else 4)
    if len(found) != expected:
        raise BadModel(f"{where}: {len(found)} recurrent tensors where a {layers}-layer "
                       f"{'bidirectional ' if bidirectional else ''}{mode.name} has {expected}")
    return RNNWeights(mode, layers, hidden, input_size, proj, bidirectional, params)


def to_state(w: RNNWeights, prefix: str = "") -> dict:
    """Inverse of :func:`from_state`: float32 arrays by PyTorch's names."""
    out = {}
    for k, p in enumerate(w.params):
        layer, d = divmod(k, 2 if w.bidirectional else 1)
        sfx = f"_l{layer}" + ("_reverse" if d else "")
        for name, blocks in (("weight_ih", p.W), ("weight_hh", p.R), ("bias_ih", p.bW),
                             ("bias_hh", p.bR)):
            out[prefix + name + sfx] = np.concatenate(blocks).astype(np.float32)
        if p.P is not None:
            out[prefix + "weight_hr" + sfx] = np.asarray(p.P, dtype=np.float32)
    return out
