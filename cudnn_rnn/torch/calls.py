"""One call of an accelerated module as tensors: the checks of what it is given, the
sequence-major input and the state the runners take, and the outputs in the module's own
form (as ``torch.nn.LSTM``/``GRU``/``RNN`` return them).

A runner reads and writes device memory through DLPack (:func:`device_array`): PyTorch's
tensors handed over as they are, on PyTorch's current stream, in the runner's data type.
Where the module's data type or layout is not the runner's, PyTorch converts on that stream
first (``.to(dtype)``, ``.contiguous()``: nothing when they already are).
"""
from __future__ import annotations

import torch

from cudnn_rnn.torch.errors import BadCall


def device_array(t, cp):
    """A cupy array sharing ``t``'s memory (DLPack); bfloat16, which cupy lacks, as its
    16-bit pattern (the runners take its address only); None for None."""
    if t is None:
        return None
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return cp.from_dlpack(t)


def _check_tensor(t, spec, device, what: str) -> None:
    if not isinstance(t, torch.Tensor):
        raise BadCall(f"{what} must be a torch.Tensor, got {type(t).__name__}")
    if t.device != device:
        raise BadCall(f"{what} is on {t.device}; the module is on {device}")
    if t.dtype != getattr(torch, spec.dtype):
        raise BadCall(f"{what} is {t.dtype}; the module takes {spec.dtype}")


def sequence_major(x, spec, device) -> tuple:
    """(x as (seq, batch, input), whether it was unbatched (seq, input)) for a padded call."""
    _check_tensor(x, spec, device, "the input")
    if x.dim() not in (2, 3) or x.shape[-1] != spec.input_size:
        raise BadCall(f"the input has shape {tuple(x.shape)}; the module takes (seq, batch, "
                      f"{spec.input_size})" + (" with batch_first: (batch, seq, ...)"
                                               if spec.batch_first else ""))
    x, unbatched = (x.unsqueeze(1), True) if x.dim() == 2 else \
        ((x.transpose(0, 1) if spec.batch_first else x), False)
    if x.shape[0] == 0:
        raise BadCall("the input has no steps (sequence length 0); the module runs sequences "
                      "of one step or more, as torch.nn's do")
    return x, unbatched


def state(hx, spec, batch: int, device, unbatched: bool = False, order=None) -> tuple:
    """(h0, c0) as the runners take them, (layers x dirs, batch, features) each, or None
    for a zero state; ``order``: a PackedSequence's sorted_indices (its state is given in
    the caller's order)."""
    lstm = spec.cell == "LSTM"
    if hx is None:
        return None, None
    if lstm and not (isinstance(hx, (tuple, list)) and len(hx) == 2):
        raise BadCall("an LSTM's state is a tuple (h_0, c_0)")
    h0, c0 = (hx[0], hx[1]) if lstm else (hx, None)
    shapes = [("h_0", h0, spec.proj)] + ([("c_0", c0, spec.hidden)] if lstm else [])
    out = []
    for name, t, features in shapes:
        _check_tensor(t, spec, device, name)
        if unbatched and t.dim() != 2:
            raise BadCall(f"for an unbatched (2-D) input, {name} is 2-D too (layers x "
                          f"directions, features), as torch.nn's modules take it; got "
                          f"{t.dim()}-D")
        if unbatched:
            t = t.unsqueeze(1)
        want = (spec.layers * spec.dirs, batch, features)
        if tuple(t.shape) != want:
            raise BadCall(f"{name} has shape {tuple(t.shape)}; expected {want}")
        out.append(t if order is None else t.index_select(1, order))
    return out[0], (out[1] if lstm else None)


def empty_outputs(spec, rows: tuple, batch: int, dtype, device) -> tuple:
    """(y of ``rows`` + (dirs x proj,), h_n, c_n or None), uninitialised, for a runner."""
    lay = spec.layers * spec.dirs
    y = torch.empty(rows + (spec.dirs * spec.proj,), dtype=dtype, device=device)
    hy = torch.empty((lay, batch, spec.proj), dtype=dtype, device=device)
    cy = torch.empty((lay, batch, spec.hidden), dtype=dtype, device=device) \
        if spec.cell == "LSTM" else None
    return y, hy, cy


def as_module_returns(spec, y, hy, cy, unbatched: bool = False, restore=None) -> tuple:
    """The outputs as the module returns them: its data type and layout, ``(y, (h_n,
    c_n))`` for an LSTM, ``(y, h_n)`` otherwise; ``restore``: a PackedSequence's
    unsorted_indices (its states are returned in the caller's order)."""
    dtype = getattr(torch, spec.dtype)
    y, hy = y.to(dtype), hy.to(dtype)
    cy = None if cy is None else cy.to(dtype)
    if restore is not None:
        hy = hy.index_select(1, restore)
        cy = None if cy is None else cy.index_select(1, restore)
    if unbatched:
        y, hy = y.squeeze(1), hy.squeeze(1)
        cy = None if cy is None else cy.squeeze(1)
    elif spec.batch_first and y.dim() == 3:
        y = y.transpose(0, 1)
    return y, ((hy, cy) if spec.cell == "LSTM" else hy)

