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

A block may also vary its cells one axis at a time (``[block.vary]``): for each cell
of the product, one *variant* per listed value of each listed axis, with every other axis
as in that cell. A variant runs only if the cell it varies passed the descriptor stage
(``cudnnSetRNNDescriptor_v8`` and what comes before it), so the variants of what cuDNN
refuses outright cost nothing. ``[block.vary_only]`` restricts an axis's variants to
cells with given values (e.g. projection only for LSTM)::

    [block.vary]
    direction = ["BIDIRECTIONAL"]
    layers = [1, 3]
    lengths = ["descending:5"]
    proj_size = [256]
    [block.vary_only]
    proj_size = {cell = ["LSTM"]}

Anything unknown — a key, an enum value, a shape field — is a :class:`SpecError`
that names it, so a typo never silently shrinks a matrix.
"""
from __future__ import annotations

import itertools
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.matrix import baseline
from cudnn_rnn.matrix.cells import AXES, AXIS_DEFAULTS, Cell, SpecError, parse_value
from cudnn_rnn.matrix.runs import content_key
from cudnn_rnn.matrix.variants import parse_vary, variants_of

SHAPE_KEYS = {"seq_length", "layers", "hidden", "batch", "input_size"}
REQUIRED_SHAPE_KEYS = {"seq_length", "layers", "hidden", "batch"}
PROBES_DIR = Path(__file__).resolve().parents[2] / "probes"
MAX_CELLS = 100_000  # counted before expanding: a larger product of axes is surely a typo




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
    """A spec file's TOML and its resolved path; a name without '/' (``default`` or
    ``default.toml``) that is no file here is looked up in probes/. A missing, unreadable or malformed file raises ``error`` (a :class:`BadInput`)."""
    error = error or SpecError
    p = Path(path)
    if not str(path):
        raise error(f"give a {what}: a name in {hint} or the path of a .toml file")
    if p.suffix in ("", ".toml") and not p.exists() and "/" not in str(path):
        p = PROBES_DIR / (str(path) if p.suffix else f"{path}.toml")
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


# the top-level keys of each kind of spec (the probe's read here, the benchmark's by
# cudnn_rnn.matrix.bench), and the command that runs that kind
PROBE_KEYS = frozenset({"name", "description", "defaults", "block"})
BENCH_KEYS = frozenset({"name", "description", "objective", "candidates", "group", "lowbit"})
KINDS = {"probe": (PROBE_KEYS - BENCH_KEYS, "python -m cudnn_rnn.probe --spec"),
         "benchmark": (BENCH_KEYS - PROBE_KEYS, "python -m cudnn_rnn.bench --spec")}


def other_kind(data: dict, where: str, this: str) -> str:
    """Where a spec file of another kind than ``this`` ("probe" or "benchmark") was given:
    `` (NAME is a KIND spec: COMMAND NAME)``; else nothing."""
    for kind, (keys, command) in KINDS.items():
        if kind != this and keys & set(data):
            p = Path(where)
            name = p.stem if p.parent.resolve() == PROBES_DIR.resolve() else str(p)
            return f" ({p.stem} is a {kind} spec: {command} {name})"
    return ""


def load(path: str | Path) -> Spec:
    """Read and validate a probe spec (see :func:`read_toml` for where it is looked up)."""
    data, p = read_toml(path)
    return from_dict(data, str(p))


def from_dict(data: dict, where: str = "<spec>") -> Spec:
    unknown = set(data) - PROBE_KEYS
    if unknown:
        raise SpecError(f"{where}: unknown key {sorted(unknown)[0]!r} "
                        f"(known: {', '.join(sorted(PROBE_KEYS))})"
                        + other_kind(data, where, "probe"))
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
    cells, seen, all_variants = [], set(), []
    for i, block in enumerate(blocks):
        if not isinstance(block, dict):
            raise SpecError(f"{where}: block {i + 1} must be a table ([[block]]), got {block!r}")
        bname = block.get("name", f"block{i + 1}")
        if not isinstance(bname, str):
            raise SpecError(f"{where}: block {i + 1}'s name must be a string, got {bname!r}")
        bwhere = f"{where} block {bname!r}"
        for key in block:
            if key not in AXES and key not in ("name", "shapes", "vary", "vary_only"):
                raise SpecError(f"{bwhere}: unknown axis {key!r} (known: {', '.join(AXES)}, "
                                "shapes, vary, vary_only)")
        vary, vary_only = parse_vary(block, bwhere)
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
        product *= 1 + sum(len(v) for v in vary.values())
        if len(cells) + product > MAX_CELLS:
            raise SpecError(f"{where}: more than {MAX_CELLS} cells; split the spec")
        block_cells = []
        for combo in itertools.product(*(axes[a] for a in AXES), shapes):
            values = dict(zip(list(AXES) + ["shape"], combo))
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
            block_cells.append(Cell(cfg, bname))
        for cell in block_cells:
            if cell.id not in seen:
                seen.add(cell.id)
                cells.append(cell)
        all_variants += variants_of(block_cells, vary, vary_only, bwhere)
    # every block's own cells first: a variant with the id of a cell some block names is
    # that cell (e.g. the support matrix at 1 layer is the sweep's 20 1 512 64), and each
    # variant runs after every cell it may vary
    for cell in all_variants:
        if cell.id not in seen:
            seen.add(cell.id)
            cells.append(cell)
    return Spec(name, description, cells, where, content_key(data))


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
