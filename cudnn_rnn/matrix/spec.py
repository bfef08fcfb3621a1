"""Probe specifications: TOML files in probes/ that name the cells of a matrix.

A spec has ``[defaults]`` (axis values every block starts from) and one or more
``[[block]]`` tables. Each block lists values per axis and a list of ``shapes``;
its cells are the cartesian product. Axis values are cuDNN's enum names without
prefix (``HALF``, ``TENSOR_OP``, ``PERSIST_STATIC``, ``LSTM``, …); ``proj_size`` takes
``"none"`` (no projection) or an integer; a shape is ``{seq_length, layers, hidden,
batch}`` with an optional ``input_size`` (default: hidden)::

    name = "example"
    [defaults]
    direction = ["UNIDIRECTIONAL"]
    [[block]]
    name = "fp16"
    data_type = ["HALF"]
    math_prec = ["FLOAT", "HALF"]
    math_type = ["DEFAULT", "TENSOR_OP"]
    algo = ["STANDARD"]
    cell = ["LSTM"]
    shapes = [{seq_length = 20, layers = 2, hidden = 512, batch = 64}]

Anything unknown — a key, an enum value, a shape field — is a :class:`SpecError`
that names it, so a typo never silently shrinks a matrix.
"""
from __future__ import annotations

import itertools
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from cudnn_rnn.bindings.enums import (DataType, DirectionMode, MathType, RNNAlgo, RNNBiasMode,
                            RNNDataLayout, RNNInputMode, RNNMode)

from cudnn_rnn.matrix.errors import BadInput
from cudnn_rnn.engine.config import LENGTHS_FORMS, RNNConfig
from cudnn_rnn.matrix import baseline
from cudnn_rnn.matrix.runs import content_key

AXES = {
    "data_type": DataType, "math_prec": DataType, "math_type": MathType, "algo": RNNAlgo,
    "cell": RNNMode, "direction": DirectionMode, "input_mode": RNNInputMode,
    "bias_mode": RNNBiasMode, "layout": RNNDataLayout, "proj_size": None, "lengths": None,
}
SHAPE_KEYS = {"seq_length", "layers", "hidden", "batch", "input_size"}
REQUIRED_SHAPE_KEYS = {"seq_length", "layers", "hidden", "batch"}
AXIS_DEFAULTS = {
    "direction": ["UNIDIRECTIONAL"], "input_mode": ["LINEAR_INPUT"], "bias_mode": ["DOUBLE_BIAS"],
    "layout": ["SEQ_MAJOR_PACKED"], "proj_size": ["none"], "lengths": ["equal"],
}
PROBES_DIR = Path(__file__).resolve().parents[2] / "probes"
MAX_CELLS = 100_000  # counted before expanding: a larger product of axes is surely a typo


class SpecError(BadInput):
    """A malformed probe specification (reported in one line, exit code 2)."""


@dataclass(frozen=True)
class Cell:
    """One configuration of the matrix, and the block of the spec it came from."""
    config: RNNConfig
    block: str
    implicit: bool = False  # added only as the FP32 baseline of another cell

    @property
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
        names = ", ".join(m.short if hasattr(m, "short") else m.name for m in enum_cls)
        raise SpecError(f"{where}: unknown {axis} value {value!r} (known: {names})") from None


def _values(table: dict, axis: str, where: str) -> list:
    raw = table[axis]
    if not isinstance(raw, list) or not raw:
        raise SpecError(f"{where}: {axis} must be a non-empty list")
    return [parse_value(axis, v, where) for v in raw]


def _shape(raw, where: str) -> dict:
    if not isinstance(raw, dict):
        raise SpecError(f"{where}: each shape must be a table like {{seq_length=20, layers=2, "
                        f"hidden=512, batch=64}}")
    unknown = set(raw) - SHAPE_KEYS
    if unknown:
        raise SpecError(f"{where}: unknown shape field {sorted(unknown)[0]!r} "
                        f"(known: {', '.join(sorted(SHAPE_KEYS))})")
    missing = REQUIRED_SHAPE_KEYS - set(raw)
    if missing:
        raise SpecError(f"{where}: shape lacks {', '.join(sorted(missing))}")
    for k, v in raw.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise SpecError(f"{where}: shape field {k} must be a positive integer, got {v!r}")
    return raw


@dataclass
class Spec:
    name: str
    description: str
    cells: list  # list[Cell], in spec order, without duplicates
    path: str
    sha256: str  # of the parsed TOML: the spec's content, part of a run's identity


NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


def check_name(name, where: str, error=None) -> str:
    """A spec's name becomes a file name (``<name>.jsonl``): letters, digits, '-' and '_'
    only, so no name can point outside the output folder."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise (error or SpecError)(
            f"{where}: name must be 1-64 letters, digits, '-' or '_' (it names the results "
            f"file), got {name!r}")
    return name


def spec_name(data: dict, where: str, error=None) -> str:
    """The spec's ``name``, else its file's stem (``"spec"`` for one not read from a file),
    checked by :func:`check_name`."""
    default = "spec" if where.startswith("<") else Path(where).stem
    return check_name(data.get("name", default), where, error)


def read_toml(path: str | Path, error=None, what: str = "probe spec",
              hint: str = "probes/*.toml") -> tuple[dict, Path]:
    """A spec file's TOML and its resolved path; a name without '/' or '.toml' is looked up
    in probes/. A missing, unreadable or malformed file raises ``error`` (a :class:`BadInput`)."""
    error = error or SpecError
    p = Path(path)
    if not str(path):
        raise error(f"give a {what}: a name in {hint} or the path of a .toml file")
    if not p.suffix and not p.exists() and "/" not in str(path):
        p = PROBES_DIR / f"{path}.toml"
    try:
        return tomllib.loads(p.read_bytes().decode("utf-8")), p
    except FileNotFoundError:
        raise error(f"{what} {str(path)!r} not found (see {hint})") from None
    except IsADirectoryError:
        raise error(f"{what} {str(p)!r} is a directory; give the .toml file") from None
    except OSError as exc:
        raise error(f"cannot read {what} {str(p)!r}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise error(f"{p}: not valid TOML ({' '.join(str(exc).split()) or 'nested too deep'})") \
            from None


def load(path: str | Path) -> Spec:
    """Read and validate a probe spec (see :func:`read_toml` for where it is looked up)."""
    data, p = read_toml(path)
    return from_dict(data, str(p))


def from_dict(data: dict, where: str = "<spec>") -> Spec:
    unknown = set(data) - {"name", "description", "defaults", "block"}
    if unknown:
        raise SpecError(f"{where}: unknown key {sorted(unknown)[0]!r} "
                        f"(known: name, description, defaults, block)")
    name = spec_name(data, where)
    description = data.get("description", "")
    if not isinstance(description, str):
        raise SpecError(f"{where}: description must be a string")
    defaults = dict(AXIS_DEFAULTS)
    given = data.get("defaults", {})
    if not isinstance(given, dict):
        raise SpecError(f"{where}: [defaults] must be a table")
    for key in given:
        if key not in AXES:
            raise SpecError(f"{where} [defaults]: unknown axis {key!r} (known: {', '.join(AXES)})")
    defaults.update(given)
    blocks = data.get("block")
    if not isinstance(blocks, list) or not blocks:
        raise SpecError(f"{where}: needs at least one [[block]]")
    cells, seen = [], set()
    for i, block in enumerate(blocks):
        if not isinstance(block, dict):
            raise SpecError(f"{where}: block {i + 1} must be a table ([[block]]), got {block!r}")
        bname = block.get("name", f"block{i + 1}")
        if not isinstance(bname, str):
            raise SpecError(f"{where}: block {i + 1}'s name must be a string, got {bname!r}")
        bwhere = f"{where} block {bname!r}"
        for key in block:
            if key not in AXES and key not in ("name", "shapes"):
                raise SpecError(f"{bwhere}: unknown axis {key!r} (known: {', '.join(AXES)}, shapes)")
        table = {**defaults, **{k: v for k, v in block.items() if k in AXES}}
        missing = [a for a in AXES if a not in table]
        if missing:
            raise SpecError(f"{bwhere}: no values for {', '.join(missing)}")
        if "shapes" not in block or not isinstance(block["shapes"], list) or not block["shapes"]:
            raise SpecError(f"{bwhere}: needs a non-empty shapes list")
        axes = {a: _values(table, a, bwhere) for a in AXES}
        shapes = [_shape(s, bwhere) for s in block["shapes"]]
        product = len(shapes)
        for a in AXES:
            product *= len(axes[a])
        if len(cells) + product > MAX_CELLS:
            raise SpecError(f"{where}: more than {MAX_CELLS} cells; split the spec")
        for combo in itertools.product(*(axes[a] for a in AXES), shapes):
            values = dict(zip(list(AXES) + ["shape"], combo))
            if values["algo"] == RNNAlgo.COUNT:
                raise SpecError(f"{bwhere}: COUNT is not an algorithm")
            s = values["shape"]
            try:
                cfg = RNNConfig(
                    seq_length=s["seq_length"], num_layers=s["layers"], hidden_size=s["hidden"],
                    mini_batch=s["batch"], input_size=s.get("input_size"),
                    mode=values["cell"], proj_size=values["proj_size"],
                    data_type=values["data_type"], math_prec=values["math_prec"],
                    math_type=values["math_type"], algo=values["algo"],
                    direction=values["direction"], input_mode=values["input_mode"],
                    bias_mode=values["bias_mode"], layout=values["layout"],
                    lengths=values["lengths"])
            except ValueError as exc:
                raise SpecError(f"{bwhere}: shape {s}: {exc}") from None
            cell = Cell(cfg, bname)
            if cell.id not in seen:
                seen.add(cell.id)
                cells.append(cell)
    return Spec(name, description, cells, where, content_key(data))


FILTER_AXES = dict(AXES, seq_length=int, layers=int, hidden=int, batch=int)


def parse_filters(pairs: dict) -> dict:
    """``{"data_type": "HALF,INT8", "hidden": "512"}`` → allowed values per axis."""
    out = {}
    for axis, text in pairs.items():
        if text is None:
            continue
        items = [t for t in str(text).split(",") if t.strip()]
        if not items:
            raise SpecError(f"--{axis.replace('_', '-')} needs at least one value")
        if FILTER_AXES[axis] is int:
            try:
                out[axis] = {int(t) for t in items}
            except ValueError:
                raise SpecError(f"--{axis.replace('_', '-')} takes integers, got {text!r}") from None
        else:
            out[axis] = {parse_value(axis, t.strip(), f"--{axis.replace('_', '-')}") for t in items}
    return out


def _axis_value(c: RNNConfig, axis: str):
    return {
        "data_type": c.data_type, "math_prec": c.math_prec, "math_type": c.math_type,
        "algo": c.algo, "cell": c.mode, "direction": c.direction, "input_mode": c.input_mode,
        "bias_mode": c.bias_mode, "layout": c.layout,
        "proj_size": None if c.proj_size == c.hidden_size else c.proj_size,
        "seq_length": c.seq_length, "layers": c.num_layers, "hidden": c.hidden_size,
        "batch": c.mini_batch, "lengths": c.lengths,
    }[axis]


def select(cells: list, filters: dict) -> list:
    return [c for c in cells if all(_axis_value(c.config, a) in allowed
                                    for a, allowed in filters.items())]


def baseline_first(shape: RNNConfig, combos, block: str) -> list:
    """Cells of ``shape`` for each (data type, math precision, math type, algorithm) of
    ``combos``, the FP32 baseline first; added, marked implicit, when ``combos`` lacks it."""
    base = baseline.BASELINE
    combos = list(combos)
    implicit = base not in combos
    if not implicit:
        combos.remove(base)
    combos.insert(0, base)
    return [Cell(shape.replace(**dict(zip(baseline.AXES, combo))), block,
                 implicit=implicit and combo == base) for combo in combos]


def with_baselines(cells: list) -> list:
    """Put each cell's FP32 baseline before it (adding it, marked implicit, if absent)."""
    by_id = {c.id: c for c in cells}
    out, placed = [], set()
    for c in cells:
        base = Cell(baseline.of(c.config), c.block, implicit=True)
        if base.id not in placed:
            out.append(by_id.get(base.id, base))
            placed.add(base.id)
        if c.id not in placed:
            out.append(c)
            placed.add(c.id)
    return out
