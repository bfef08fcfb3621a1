"""A runner's first call at a shape, judged: the project's rule for its kind, then the user's
tolerance against the module in float64.

The reference is :func:`cudnn_rnn.charlm.network.reference_outputs` on the module's weights
and the call's own inputs and state (the float64 reference that
:func:`~cudnn_rnn.torch.accelerate` checked against the module's own float64 forward). Then,
as the precision table's rows judge (:mod:`cudnn_rnn.charlm.rows`):

* cuDNN: against the reference on the values its data type holds (weights and inputs
  rounded to it) within :func:`cudnn_rnn.check.verify.tolerances`;
* an engine in FP16 throughout: against the reference within
  :data:`cudnn_rnn.lowbit.configs.BOUNDS`;
* an engine with 8-bit GEMMs: against its twin, the same quantized network in float64
  (:func:`cudnn_rnn.lowbit.model.forward` with this shape's plan), within
  :data:`~cudnn_rnn.lowbit.configs.TWIN_BOUNDS` and nearer to it than to the reference in
  every output (:func:`cudnn_rnn.charlm.rows.check_outputs`).

And in every case: the largest relative error of y, h_n (and c_n) against the reference
within the tolerance the user gave. Works on numpy or cupy arrays alike.
"""
from __future__ import annotations

from cudnn_rnn.charlm.network import reference_outputs
from cudnn_rnn.charlm.rows import check_outputs
from cudnn_rnn.charlm.table import held_weights
from cudnn_rnn.check.reference import array_module
from cudnn_rnn.check.verify import tolerances
from cudnn_rnn.lowbit import model
from cudnn_rnn.lowbit.candidates import errors
from cudnn_rnn.lowbit.configs import BOUNDS, REST, TWIN_BOUNDS

CHUNK_BYTES = 1 << 31  # the reference keeps every step: this many bytes of it at a time


def chunk(seq: int, hidden: int) -> int:
    """Sequences per reference run (as the precision table sizes it)."""
    return max(1, CHUNK_BYTES // (seq * hidden * 80))


def judge(candidate, runner, rnn, tolerance: float, module_in: dict, held_in: dict,
          out: dict, lengths=None, nearer_twin: bool = True) -> tuple[dict, str | None]:
    """(facts, why it fails or None) for the outputs ``out`` (y, hy, cy; float64, dense
    (T, B, features) even for a packed batch) of ``runner`` running ``candidate`` on
    ``held_in`` (x, hx, cx as the runner's data type holds them: the call's inputs, cast),
    the call's inputs being ``module_in`` (the same in the module's data type; hx, cx None
    for a zero state). ``nearer_twin`` False: an 8-bit engine within its twin's bound need
    not be nearer to it than to the unquantized reference (a call that only shows the state
    is used: from a state of its own the two can lie equally near, which proves nothing
    either way, and the first call has shown the quantized network)."""
    ref = _reference(rnn, module_in, lengths)
    if candidate.is_cudnn:
        facts, why = _cudnn(runner, rnn, held_in, out, ref, lengths)
    else:
        facts, why = _engine(candidate, runner, held_in, out, ref, nearer_twin)
    worst = max(facts["errors"].values())
    if why is None and not worst <= tolerance:
        why = (f"largest relative error {worst:.3g} against the module in float64 > "
               f"tolerance {tolerance:g}")
    return facts, why


def _reference(rnn, given: dict, lengths=None) -> dict:
    x = given["x"]
    return reference_outputs(rnn, x, array_module(x), chunk(x.shape[0], rnn.hidden),
                             given.get("hx"), given.get("cx"), lengths)


def _cudnn(runner, rnn, held_in: dict, out: dict, ref: dict, lengths) -> tuple[dict, str | None]:
    weights = held_weights(rnn, runner.cfg.data_type)  # None: the data type holds them all
    held = _reference(weights or rnn, held_in, lengths)
    facts = {"errors": errors(out, ref), "errors_held": errors(out, held)}
    bound = tolerances(runner.cfg)[0]
    worst = max(facts["errors_held"].values())
    if not worst <= bound:  # NaN fails too
        return facts, (f"largest relative error {worst:.3g} against the reference on the "
                       f"values held > bound {bound:g}")
    return facts, None


def _engine(candidate, runner, held_in: dict, out: dict, ref: dict,
            nearer_twin: bool = True) -> tuple[dict, str | None]:
    if runner.plan is None:
        return check_outputs(out, ref, None, BOUNDS[REST], "float64 reference")
    xp = array_module(held_in["x"])
    cfg = runner.cfg
    hx = held_in.get("hx")
    cx = held_in.get("cx")
    hx = xp.zeros(cfg.h_shape()) if hx is None else hx
    cx = (xp.zeros(cfg.c_shape()) if cx is None else cx) if cfg.has_cell_state else None
    y, hy, cy = model.forward(cfg, model.moved(runner.stacked, xp), held_in["x"], hx, cx,
                              runner.plan)
    twin = {"y": y, "hy": hy, "cy": cy}
    return check_outputs(out, ref, twin, TWIN_BOUNDS[candidate.fmt], "float64 twin",
                         nearer_twin)
