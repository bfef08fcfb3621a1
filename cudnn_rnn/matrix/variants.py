"""Variants: a cell of a block with one other axis changed at a time (``[block.vary]`` in
a spec, see :mod:`.spec`), run only where the cell they vary got past
cudnnSetRNNDescriptor_v8, so the variants of what cuDNN refuses outright cost nothing."""
from __future__ import annotations

from cudnn_rnn.matrix.cells import AXES, Cell, SpecError, axis_value, parse_value

VARY_AXES = ("direction", "input_mode", "bias_mode", "proj_size", "layout", "lengths", "layers")
# A variant runs only if its base got past this stage (cudnnSetRNNDescriptor_v8).
GATE_STAGE = "rnn_descriptor"


def parse_vary(block: dict, where: str) -> tuple[dict, dict]:
    """A block's ``vary`` table (axis → values) and ``vary_only`` (axis → {axis: values})."""
    vary_raw, only_raw = block.get("vary", {}), block.get("vary_only", {})
    if not isinstance(vary_raw, dict) or not isinstance(only_raw, dict):
        raise SpecError(f"{where}: vary and vary_only must be tables")
    vary = {}
    for axis, values in vary_raw.items():
        if axis not in VARY_AXES:
            raise SpecError(f"{where} vary: {axis!r} cannot be varied (vary one of "
                            f"{', '.join(VARY_AXES)})")
        if not isinstance(values, list) or not values:
            raise SpecError(f"{where} vary: {axis} must be a non-empty list")
        if axis == "layers":
            if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
                raise SpecError(f"{where} vary: layers must be positive integers, got {values!r}")
            vary[axis] = list(values)
        else:
            vary[axis] = [parse_value(axis, v, f"{where} vary") for v in values]
    only = {}
    for axis, cond in only_raw.items():
        if axis not in vary:
            raise SpecError(f"{where} vary_only: {axis!r} is not varied in this block")
        if not isinstance(cond, dict) or not cond:
            raise SpecError(f"{where} vary_only: {axis} must be a table such as "
                            "{cell = [\"LSTM\"]}")
        only[axis] = {}
        for key, values in cond.items():
            if key not in AXES or key == "lengths" or key == "proj_size":
                raise SpecError(f"{where} vary_only: {axis} cannot depend on {key!r}")
            if not isinstance(values, list) or not values:
                raise SpecError(f"{where} vary_only: {axis}.{key} must be a non-empty list")
            only[axis][key] = {parse_value(key, v, f"{where} vary_only") for v in values}
    return vary, only


FIELD = {"direction": "direction", "input_mode": "input_mode", "bias_mode": "bias_mode",
         "proj_size": "proj_size", "layout": "layout", "lengths": "lengths",
         "layers": "num_layers"}  # the RNNConfig field each varied axis sets


def variants_of(cells: list, vary: dict, only: dict, where: str) -> list:
    """Each of ``cells`` with one axis changed at a time (a value equal to a cell's own is
    skipped). Ordered by axis, then value, then cell: consecutive variants then share
    their values' shape, which lets a worker reuse the values it drew
    (:class:`~cudnn_rnn.engine.values.ValuesCache`)."""
    out = []
    for axis, values in vary.items():
        for value in values:
            for cell in cells:
                if axis_value(cell.config, axis) == value or any(
                        axis_value(cell.config, k) not in allowed
                        for k, allowed in only.get(axis, {}).items()):
                    continue
                try:
                    cfg = cell.config.replace(**{FIELD[axis]: value})
                except ValueError as exc:
                    raise SpecError(f"{where} vary {axis}={value!r}: {exc}") from None
                out.append(Cell(cfg, cell.block, base=cell.id, axis=axis))
    return out


def gated_out(cell: Cell, done: dict) -> bool:
    """A variant whose base is recorded without having passed :data:`GATE_STAGE`: refused
    by cudnnSetRNNDescriptor_v8, or lost before it (a crash, a hang, this tool's error), so
    its variants would most likely only repeat that. A variant whose base is not in the
    run (e.g. filtered out) runs."""
    base = done.get(cell.base) if cell.base else None  # a Record
    return base is not None and GATE_STAGE not in (base.stages or [])


def by_base(cells: list) -> dict:
    """The variants among ``cells`` by the id of the cell each varies."""
    out: dict = {}
    for cell in cells:
        if cell.base:
            out.setdefault(cell.base, []).append(cell)
    return out
