"""A PyTorch peer checked before it is timed: its outputs (and, for a training step, its
gradients) against the same module, inputs and step run in float64 on the GPU (cuDNN's
DOUBLE RNN), relative Frobenius errors as everywhere in this project
(:func:`cudnn_rnn.check.verify.relative_error`), bounded by the project's own bounds for
the data type PyTorch runs (:func:`cudnn_rnn.check.verify.tolerances`).

torch is imported inside the functions: this module is imported without it.
"""
from __future__ import annotations

from cudnn_rnn.bindings.enums import DataType, MathType, RNNMode
from cudnn_rnn.check.verify import relative_error, tolerances
from cudnn_rnn.engine.config import RNNConfig

# the cuDNN pairing whose bound a PyTorch variant is held to: float32 with TF32 permitted
# (PyTorch's default for cuDNN's float32 RNNs), float16 with FP16 arithmetic allowed (the
# looser of its pairings: PyTorch picks the math precision itself), bfloat16 storage
PEER_PRECISION = {"float64": (DataType.DOUBLE, DataType.DOUBLE),
                  "float32": (DataType.FLOAT, DataType.FLOAT),
                  "float16": (DataType.HALF, DataType.HALF),
                  "bfloat16": (DataType.BFLOAT16, DataType.FLOAT)}


def bounds(cell: str, dtype: str) -> tuple[float, float]:
    """(outputs, gradients) bound of a ``dtype`` module of ``cell``; KeyError for another
    dtype."""
    data, math = PEER_PRECISION[dtype]
    return tolerances(RNNConfig(seq_length=1, num_layers=1, hidden_size=1, mini_batch=1,
                                mode=RNNMode[cell], data_type=data, math_prec=math,
                                math_type=MathType.DEFAULT_MATH))


def relative(a, b) -> float:
    """:func:`~cudnn_rnn.check.verify.relative_error` of two torch tensors, flattened (on
    the GPU as CuPy arrays where they are there, through DLPack; inf where ``a`` holds a NaN
    or inf)."""
    return relative_error(_array(a), _array(b))


def _array(t):
    t = t.detach().double().flatten().contiguous()
    if t.is_cuda:
        import cupy
        return cupy.from_dlpack(t)
    return t.numpy()


def loss_of(out, state):
    """The training step's loss (every output and final state summed), as timed."""
    return out.sum() + (sum(s.sum() for s in state) if isinstance(state, tuple) else state.sum())


def _named(out, state) -> dict:
    h, c = state if isinstance(state, tuple) else (state, None)
    return {"y": out, "hy": h} | ({"cy": c} if c is not None else {})


def errors(model, args: tuple, got: tuple, training: bool) -> dict:
    """Relative errors of ``got`` (the variant's ``(out, state)`` from one call on ``args``;
    for a training step, made with every gradient cleared before it) against ``model``
    copied to float64 and run on ``args`` in float64: ``y``, ``hy``, ``cy`` and, for a
    training step, ``dx`` and ``dw`` (every parameter's gradient, concatenated)."""
    import copy
    import torch
    ref = copy.deepcopy(model).double().train(training)
    ref.zero_grad(set_to_none=True)
    x64 = args[0].detach().double().requires_grad_(training)
    state = args[1] if len(args) > 1 else None
    if state is not None:
        state = (tuple(s.detach().double() for s in state) if isinstance(state, tuple)
                 else state.detach().double())
    with torch.set_grad_enabled(training):
        out, st = ref(x64, state) if state is not None else ref(x64)
        if training:
            loss_of(out, st).backward()
    err = {k: relative(v, w) for (k, v), w in zip(_named(*got).items(),
                                                  _named(out, st).values())}
    if training:
        err["dx"] = relative(args[0].grad, x64.grad)
        grads = [p.grad.flatten() for p in model.parameters()]
        want = [p.grad.flatten() for p in ref.parameters()]
        err["dw"] = relative(torch.cat(grads), torch.cat(want))
    return err


def recorded(err: dict) -> dict:
    """``err`` as a record holds it: a non-finite error (a NaN or inf in the output) as the
    text ``"nonfinite"`` (records are strict JSON)."""
    return {k: v if v == v and abs(v) != float("inf") else "nonfinite" for k, v in err.items()}


def judged(cell: str, dtype: str, err: dict) -> str | None:
    """Why ``err`` fails its bounds (the worst output or gradient against its bound), or
    None where every error is within them."""
    out_bound, grad_bound = bounds(cell, dtype)
    limit = {k: grad_bound if k in ("dx", "dw") else out_bound for k in err}
    name = max(err, key=lambda k: err[k] / limit[k] if err[k] == err[k] else float("inf"))
    value, bound = err[name], limit[name]
    if value <= bound:
        return None
    return (f"not verified: {name} off the float64 module by {value:.3g} "
            f"(bound {bound:g} for {dtype})")
