"""The matrix's axes and one cell of it: the values each axis takes (cuDNN's enum names
without prefix), a cell's stable id, and selecting cells by axis values (the probe's
filters). Specs (:mod:`.spec`) and variants (:mod:`.variants`) are built from these."""
from __future__ import annotations

import functools
from dataclasses import dataclass

from cudnn_rnn.bindings.enums import (DataType, DirectionMode, MathType, RNNAlgo, RNNBiasMode,
                                      RNNDataLayout, RNNInputMode, RNNMode)
from cudnn_rnn.engine.config import LENGTHS_FORMS, RNNConfig
from cudnn_rnn.matrix.errors import BadInput

AXES = {
    "data_type": DataType, "math_prec": DataType, "math_type": MathType, "algo": RNNAlgo,
    "cell": RNNMode, "direction": DirectionMode, "input_mode": RNNInputMode,
    "bias_mode": RNNBiasMode, "layout": RNNDataLayout, "proj_size": None, "lengths": None,
}
AXIS_DEFAULTS = {
    "direction": ["UNIDIRECTIONAL"], "input_mode": ["LINEAR_INPUT"], "bias_mode": ["DOUBLE_BIAS"],
    "layout": ["SEQ_MAJOR_PACKED"], "proj_size": ["none"], "lengths": ["equal"],
}


class SpecError(BadInput):
    """A malformed probe specification (reported in one line, exit code 2)."""


@dataclass(frozen=True)
class Cell:
    """One configuration of the matrix, and the block of the spec it came from."""
    config: RNNConfig
    block: str
    implicit: bool = False  # added only as the FP32 baseline of another cell
    # a variant: the id of the cell it varies, which must pass the descriptor stage for
    # this one to run (see :func:`cudnn_rnn.matrix.variants.gated_out`); None for a cell
    # of the block's product
    base: str | None = None
    axis: str | None = None  # a variant: the axis in which it differs from its base

    @functools.cached_property
    def id(self) -> str:
        return cell_id(self.config)


def cell_id(c: RNNConfig) -> str:
    """A stable, readable key of every axis and the shape."""
    proj = "none" if c.proj_size == c.hidden_size else str(c.proj_size)
    return "/".join([c.data_type.name, c.math_prec.name, c.math_type.short, c.algo.name,
                     c.mode.name, c.direction.name, c.input_mode.name, c.bias_mode.name,
                     f"proj={proj}", c.layout.name,
                     f"T{c.seq_length}L{c.num_layers}H{c.hidden_size}B{c.mini_batch}I{c.input_size}"]
                    + ([] if c.equal_lengths else [f"len={c.lengths}"]))


def parse_value(axis: str, value, where: str):
    if axis == "lengths":
        kind = value.split(":")[0] if isinstance(value, str) else None
        if kind not in ("equal", "descending", "random", "list"):
            raise SpecError(f"{where}: lengths must be one of {', '.join(LENGTHS_FORMS)}, "
                            f"got {value!r}")
        numbers = value.strip().split(":")[1:]
        wanted = {"equal": 0, "descending": 1, "random": 2}.get(kind)
        if not all(n.strip().isdigit() for n in numbers) or (
                len(numbers) != wanted if wanted is not None else not numbers):
            form = next(f for f in LENGTHS_FORMS if f.split(":")[0] == kind)
            raise SpecError(f"{where}: lengths {value!r} is not of the form {form} "
                            "(non-negative integers after the colons)")
        lengths = numbers[:1] if kind in ("descending", "random") else numbers
        short = [int(n) for n in lengths if int(n) < 1]  # a seed may be 0; a length may not
        if short:
            raise SpecError(f"{where}: lengths {value!r}: a length of {short[0]} (a sequence "
                            "runs at least 1 step)")
        return value.strip()
    if axis == "proj_size":
        if isinstance(value, str) and value.strip().lower() in ("none", "hidden"):
            return None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
        raise SpecError(f"{where}: proj_size must be \"none\" or a positive integer, got {value!r}")
    enum_cls = AXES[axis]
    if not isinstance(value, str):
        raise SpecError(f"{where}: {axis} values are names such as {next(iter(enum_cls)).name!r}, "
                        f"got {value!r}")
    try:
        return enum_cls.parse(value)
    except (ValueError, KeyError):
        names = ", ".join(m.short if hasattr(m, "short") else m.name for m in enum_cls.choices())
        raise SpecError(f"{where}: unknown {axis} value {value!r} (known: {names})") from None


FILTER_AXES = dict(AXES, seq_length=int, layers=int, hidden=int, batch=int)


def parse_filters(pairs: dict, options: dict | None = None) -> dict:
    """``{"data_type": "HALF,INT8", "hidden": "512"}`` → allowed values per axis; a message
    names an axis by its command-line option (``options``: axis -> option, e.g.
    ``{"data_type": "--dtype"}``; by default ``--`` and the axis with dashes)."""
    out = {}
    for axis, text in pairs.items():
        if text is None:
            continue
        option = (options or {}).get(axis) or f"--{axis.replace('_', '-')}"
        items = [t for t in str(text).split(",") if t.strip()]
        if not items:
            raise SpecError(f"{option} needs at least one value")
        if FILTER_AXES[axis] is int:
            try:
                out[axis] = {int(t) for t in items}
            except ValueError:
                raise SpecError(f"{option} takes integers, got {text!r}") from None
            if min(out[axis]) < 1:
                raise SpecError(f"{option} takes positive integers, got {text!r}")
        else:
            out[axis] = {parse_value(axis, t.strip(), option) for t in items}
    return out


def axis_value(c: RNNConfig, axis: str):
    return {
        "data_type": c.data_type, "math_prec": c.math_prec, "math_type": c.math_type,
        "algo": c.algo, "cell": c.mode, "direction": c.direction, "input_mode": c.input_mode,
        "bias_mode": c.bias_mode, "layout": c.layout,
        "proj_size": None if c.proj_size == c.hidden_size else c.proj_size,
        "seq_length": c.seq_length, "layers": c.num_layers, "hidden": c.hidden_size,
        "batch": c.mini_batch, "lengths": c.lengths,
    }[axis]


def select(cells: list, filters: dict) -> list:
    return [c for c in cells if all(axis_value(c.config, a) in allowed
                                    for a, allowed in filters.items())]


def unmatched(cells: list, filters: dict) -> tuple | None:
    """The first filter none of ``cells`` passes, with the values the cells have on its axis
    (as text, numbers in order), or None where each filter alone keeps some cell."""
    for axis, allowed in filters.items():
        present = {axis_value(c.config, axis) for c in cells}
        if not present & allowed:
            shown = [str(getattr(v, "name", v)) for v in present]
            return axis, sorted(shown, key=lambda t: (not t.isdigit(), int(t) if t.isdigit()
                                                      else 0, t))
    return None
