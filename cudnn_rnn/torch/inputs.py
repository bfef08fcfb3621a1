"""What :func:`~cudnn_rnn.torch.accelerate` measures on: the example batch and the
calibration batches, as (seq, batch, input) tensors of the module's data type on its
device.

``example`` is an input tensor (the module's layout: (batch, seq, input) with
``batch_first``) or a shape ``(seq, batch)``, for which inputs are drawn from U(-1, 1)
(seeded, so two tunings of one module see the same batch). ``calibration`` is a tensor or a
list of tensors of the same form; None calibrates on the example itself.
"""
from __future__ import annotations

from cudnn_rnn.torch.errors import NotAccelerated

SEED = 0


def example_shape(example) -> tuple[int, int] | None:
    """(seq, batch) when ``example`` is such a shape (two positive ints), else None."""
    if isinstance(example, (tuple, list)) and len(example) == 2 and all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in example):
        return int(example[0]), int(example[1])
    return None


def _as_batch(t, spec, device, torch, what: str):
    """``t`` as a (seq, batch, input) tensor of the module's data type on ``device``."""
    if not isinstance(t, torch.Tensor) or t.dim() != 3 or not t.is_floating_point():
        raise NotAccelerated(f"{what} must be (seq, batch) or a floating-point tensor of "
                             f"{'(batch, seq, input)' if spec.batch_first else '(seq, batch, input)'}"
                             f", got {type(t).__name__}"
                             + (f" of shape {tuple(t.shape)}" if hasattr(t, "shape") else ""))
    if t.shape[-1] != spec.input_size or 0 in t.shape:
        raise NotAccelerated(f"{what} has shape {tuple(t.shape)}; the module takes "
                             f"{spec.input_size} features per step")
    if not bool(torch.isfinite(t).all()):
        raise NotAccelerated(f"{what} holds NaN or infinite values")
    t = t.detach().to(device=device, dtype=getattr(torch, spec.dtype))
    return (t.transpose(0, 1) if spec.batch_first else t).contiguous()


def example_batch(example, spec, device, torch) -> tuple:
    """(the example as (seq, batch, input), how it was made)."""
    shape = example_shape(example)
    if shape is None:
        return _as_batch(example, spec, device, torch, "example"), "given"
    g = torch.Generator().manual_seed(SEED)
    x = torch.rand(shape + (spec.input_size,), generator=g, dtype=torch.float32) * 2 - 1
    return x.to(device=device, dtype=getattr(torch, spec.dtype)), "drawn from U(-1, 1)"


def calibration_batches(calibration, spec, device, torch) -> tuple[list | None, str]:
    """(the calibration batches as (seq, batch, input) tensors, or None for the example's;
    what they are)."""
    if calibration is None:
        return None, "the example itself (no calibration batches were given)"
    batches = list(calibration) if isinstance(calibration, (list, tuple)) else [calibration]
    if not batches:
        raise NotAccelerated("calibration is an empty list; give tensors, or None to "
                             "calibrate on the example")
    out = [_as_batch(b, spec, device, torch, f"calibration batch {i}")
           for i, b in enumerate(batches)]
    return out, f"{len(out)} calibration batch{'es' * (len(out) > 1)} given"
