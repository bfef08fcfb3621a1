"""What an accelerated module runs, as data: the candidates in the order they are tried at a
shape (:class:`Candidate`: a cuDNN configuration, or an engine's with its calibrated 8-bit
thresholds), the module they were verified for, and the ranking they came from
(:class:`Plan`); saved as JSON so a deployment skips the tuning.

A plan file that is not one :meth:`Plan.save` wrote (not JSON, another format or version, a
field missing or of the wrong type, an unknown configuration, thresholds that do not fit
the module) is :class:`~cudnn_rnn.torch.errors.BadPlan`, one line naming the field.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cudnn_rnn.bindings.enums import DataType, MathType, RNNAlgo
from cudnn_rnn.lowbit import calibration, model, persistent
from cudnn_rnn.lowbit.configs import ENGINE_NAMES
from cudnn_rnn.torch.errors import BadPlan
from cudnn_rnn.torch.modules import CELLS, DTYPES, ModuleSpec

FORMAT = "cudnn_rnn.torch plan"
VERSION = 1
ENGINES = ("cuDNN",) + tuple(ENGINE_NAMES.values())  # a record's "engine"
ENGINE_KEYS = {v: k for k, v in ENGINE_NAMES.items()}  # "cuBLASLt" -> "gemm"


def label_of(rec: dict) -> str:
    """A precision-table record as tables name it: its label, and an 8-bit row's
    calibration method."""
    method = rec.get("calibration")
    return rec["label"] + (f", {method} calibration" if method else "")


@dataclass(frozen=True)
class Candidate:
    """One configuration a shape may run, as the ranking verified it at the example.

    ``cudnn``: (data type, math precision, math type, algorithm) names for cuDNN's; for the
    engines ``fmt``/``parts``/``calibration`` (None: FP16 throughout), the persistent
    kernel's launch ``settings``, and ``thresholds``: the calibrated activation thresholds
    per GEMM kind and pseudo-layer, from which each shape's scales are made."""
    id: str
    engine: str
    label: str
    family: str
    errors: dict
    ms: float | None = None
    plain_ms: float | None = None
    cudnn: tuple | None = None
    fmt: str | None = None
    parts: str | None = None
    calibration: str | None = None
    settings: str | None = None
    thresholds: dict | None = None

    @classmethod
    def from_record(cls, rec: dict, ms: float | None, plain_ms: float | None,
                    thresholds: dict | None = None) -> "Candidate":
        """The candidate of a precision-table record (:mod:`cudnn_rnn.charlm.rows`);
        ``thresholds``: the run's thresholds by format and method (an 8-bit row's are
        kept)."""
        cudnn = tuple(rec["label"].split("/")) if rec["engine"] == "cuDNN" else None
        fmt, method = rec.get("format"), rec.get("calibration")
        mine = thresholds[fmt][method] if fmt and thresholds else None
        return cls(rec["id"], rec["engine"], label_of(rec), rec["family"],
                   dict(rec["errors"]), ms, plain_ms, cudnn, fmt, rec.get("parts"), method,
                   rec.get("settings"), mine)

    @property
    def is_cudnn(self) -> bool:
        return self.engine == "cuDNN"

    @property
    def max_error(self) -> float:
        return max(self.errors.values())

    def as_dict(self) -> dict:
        d = asdict(self)
        d["cudnn"] = list(self.cudnn) if self.cudnn else None
        return d


@dataclass
class Plan:
    """The module (``module``, ``digest``), the example shape (seq, batch) and the
    ``candidates`` in the order a shape tries them (the choice first), the ``precision``
    and ``tolerance`` asked for, and ``report``: the ranking's rows and the module's own
    times (what :meth:`Accelerated.table` shows)."""
    module: ModuleSpec
    digest: str
    shape: tuple
    precision: str
    tolerance: float
    candidates: list
    report: dict = field(default_factory=dict)

    @property
    def choice(self) -> Candidate:
        return self.candidates[0]

    def tuned_on(self) -> dict:
        """:func:`machine` of the run the ranking came from."""
        run = self.report.get("run") or {}
        return machine(run.get("device") or {}, run.get("library") or {})

    def as_dict(self) -> dict:
        return {"format": FORMAT, "version": VERSION, "module": self.module.as_dict(),
                "digest": self.digest, "shape": list(self.shape), "precision": self.precision,
                "tolerance": self.tolerance,
                "candidates": [c.as_dict() for c in self.candidates], "report": self.report}

    def save(self, path) -> Path:
        """Write the plan as JSON to ``path`` (that file only); the path written."""
        path = Path(path)
        path.write_text(json.dumps(self.as_dict(), indent=1, default=_plain) + "\n")
        return path

    @classmethod
    def load(cls, path) -> "Plan":
        """The plan in ``path``; :class:`BadPlan` if it is not one."""
        p = Path(path)
        if not p.is_file():
            raise BadPlan(f"{p}: no such plan file (write one with fast.save(path))")
        try:
            data = json.loads(p.read_text())
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise BadPlan(f"{p}: not a plan file (not readable JSON: {exc})") from None
        return cls.from_dict(data, str(p))

    @classmethod
    def from_dict(cls, d, where: str = "plan") -> "Plan":
        """The plan ``d`` describes (:meth:`as_dict`'s form), every field checked."""
        _check(isinstance(d, dict) and d.get("format") == FORMAT, where,
               "is not a plan file written by cudnn_rnn.torch (no 'format' of "
               f"{FORMAT!r}); make one with accelerate(...).save(path)")
        _check(d.get("version") == VERSION, where, f"is a plan of version {d.get('version')!r}, "
               f"this cudnn_rnn reads version {VERSION}: tune again with accelerate()")
        spec = _module(_field(d, "module", dict, where), where)
        digest = _field(d, "digest", str, where)
        shape = _field(d, "shape", list, where)
        _check(len(shape) == 2 and all(_positive_int(n) for n in shape), where,
               f"'shape' must be [seq, batch] of positive integers, got {shape!r}")
        precision = _field(d, "precision", str, where)
        tolerance = _field(d, "tolerance", (int, float), where)
        _check(math.isfinite(tolerance) and tolerance > 0, where,
               f"'tolerance' must be a positive number, got {tolerance!r}")
        raw = _field(d, "candidates", list, where)
        _check(bool(raw), where, "has no candidates")
        candidates = [_candidate(c, spec, f"{where}: candidates[{i}]") for i, c in enumerate(raw)]
        report = _report(_field(d, "report", dict, where), f"{where}: 'report'")
        return cls(spec, digest, tuple(shape), precision, float(tolerance), candidates, report)


def machine(device: dict, library: dict) -> dict:
    """What a plan's ranking depends on: the GPU model, its compute capability, cuDNN's
    version (from :func:`cudnn_rnn.engine.gpu.device_info` and the library's describe())."""
    return {"gpu": device.get("gpu"), "compute_capability": device.get("compute_capability"),
            "cudnn": library.get("cudnn_version")}


def describe_machine(m: dict) -> str:
    return (f"{m['gpu'] or 'an unknown GPU'} (compute capability "
            f"{m['compute_capability'] or '?'}), cuDNN {m['cudnn'] or '?'}")


# ---------------------------------------------------------------------------- checks
def _plain(o):
    """JSON for numpy scalars (errors and times come from cupy/numpy)."""
    return o.item() if hasattr(o, "item") else str(o)


def _check(ok: bool, where: str, text: str) -> None:
    if not ok:
        raise BadPlan(f"{where} {text}")


def _positive_int(n) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n >= 1


def _field(d: dict, key: str, types, where: str):
    if key not in d:
        raise BadPlan(f"{where} has no {key!r}")
    value = d[key]
    if not isinstance(value, types) or isinstance(value, bool):
        names = " or ".join(t.__name__ for t in (types if isinstance(types, tuple) else (types,)))
        raise BadPlan(f"{where}: {key!r} must be {names}, got {type(value).__name__}")
    return value


ROW_TEXT = ("id", "label", "engine", "family", "status")
ROW_NUMBERS = ("error", "ms", "plain_ms")
ROW_OPTIONAL = ("timed_as", "reason")  # text or null


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _number_or_none(v) -> bool:
    return v is None or _number(v)


def _report(rep: dict, where: str) -> dict:
    """``rep`` where it has what fast.choice and fast.table() read: rows, the times, the run."""
    from cudnn_rnn.torch.ranking import STATUS  # the statuses' home (it imports the tuner)
    rows = rep.get("rows", [])
    _check(isinstance(rows, list), where, "'rows' is not a list")
    for i, row in enumerate(rows):
        _check(isinstance(row, dict) and set(ROW_TEXT + ROW_NUMBERS + ROW_OPTIONAL) <= set(row)
               and all(isinstance(row[k], str) for k in ROW_TEXT)
               and all(_number_or_none(row[k]) for k in ROW_NUMBERS)
               and all(row[k] is None or isinstance(row[k], str) for k in ROW_OPTIONAL)
               and row["status"] in STATUS, where,
               f"rows[{i}] is not a row of the table (text {', '.join(ROW_TEXT)}, numbers or "
               f"null {', '.join(ROW_NUMBERS)}, text or null {', '.join(ROW_OPTIONAL)}, a "
               f"known status)")
    times = rep.get("times", {})
    _check(isinstance(times, dict) and all(
        isinstance(t, dict) and all(isinstance(m, dict) and ("ms" not in m or _number(m["ms"]))
                                    for m in t.values())
        for t in times.values()), where, "'times' is not {who: {how: {'ms': number}}}")
    run = rep.get("run", {})
    _check(isinstance(run, dict) and all(isinstance(run.get(k) or {}, dict)
                                         for k in ("device", "library")), where,
           "'run' is not {'device': {...}, 'library': {...}}")
    return rep


def _module(d: dict, where: str) -> ModuleSpec:
    try:
        spec = ModuleSpec(**d)
    except TypeError as exc:
        raise BadPlan(f"{where}: 'module' does not describe a module ({exc})") from None
    ok = (spec.cell in CELLS and spec.dtype in DTYPES and all(_positive_int(getattr(spec, n))
          for n in ("layers", "input_size", "hidden", "proj"))
          and isinstance(spec.bidirectional, bool) and isinstance(spec.batch_first, bool))
    _check(ok, where, f"'module' is not a module this package takes: {d!r}")
    return spec


def _candidate(d, spec: ModuleSpec, where: str) -> Candidate:
    _check(isinstance(d, dict), where, "is not an object")
    for key in ("id", "label", "family"):
        _field(d, key, str, where)
    engine = _field(d, "engine", str, where)
    _check(engine in ENGINES, where, f"names the engine {engine!r}; one of {', '.join(ENGINES)}")
    errors = _field(d, "errors", dict, where)
    _check(bool(errors) and all(_number(v) and math.isfinite(v) and v >= 0
                                for v in errors.values()), where,
           "'errors' must map outputs to finite numbers >= 0")
    fields = {k: d.get(k) for k in ("ms", "plain_ms", "fmt", "parts", "calibration",
                                    "settings", "thresholds")}
    for key in ("ms", "plain_ms"):  # measured times, or null where none was measured
        _check(fields[key] is None or (_number(fields[key]) and math.isfinite(fields[key])
                                       and fields[key] > 0), where,
               f"'{key}' must be a positive number of milliseconds or null, got {fields[key]!r}")
    for key in ("fmt", "parts", "calibration", "settings"):
        _check(fields[key] is None or isinstance(fields[key], str), where,
               f"'{key}' must be text or null, got {type(fields[key]).__name__}")
    _check(d.get("cudnn") is None or (isinstance(d["cudnn"], list)
                                      and all(isinstance(n, str) for n in d["cudnn"])), where,
           "'cudnn' must be a list of four names or null")
    c = Candidate(d["id"], engine, d["label"], d["family"], errors,
                  cudnn=tuple(d["cudnn"]) if d.get("cudnn") else None, **fields)
    if c.is_cudnn:
        _cudnn_names(c.cudnn, where)
    else:
        _engine_fields(c, spec, where)
    return c


def _cudnn_names(names, where: str) -> None:
    _check(names is not None and len(names) == 4, where,
           "is a cuDNN candidate without its (data type, math precision, math type, algorithm)")
    for enum, name in zip((DataType, DataType, MathType, RNNAlgo), names):
        _check(name in enum.__members__, where, f"names no {enum.__name__} {name!r}")


def _engine_fields(c: Candidate, spec: ModuleSpec, where: str) -> None:
    if c.settings is not None:
        _check(c.settings in {s.name for s in persistent.SETTINGS}, where,
               f"names no launch shape {c.settings!r} of the persistent kernel")
    if c.fmt is None:
        return
    _check(c.fmt in model.FORMATS and c.parts in model.PARTS and
           c.calibration in calibration.METHODS, where,
           f"names the 8-bit plan {c.fmt!r} on {c.parts!r} by {c.calibration!r}")
    _check(isinstance(c.thresholds, dict) and set(c.thresholds) == set(model.GEMMS), where,
           f"needs 'thresholds' for {', '.join(model.GEMMS)}")
    pseudo = spec.layers * spec.dirs
    for gemm, per_layer in c.thresholds.items():
        _check(isinstance(per_layer, list) and len(per_layer) == pseudo, where,
               f"has {gemm} thresholds for {len(per_layer) if isinstance(per_layer, list) else '?'}"
               f" pseudo-layers; the module has {pseudo}")
        _check(all(t is None or (_number(t) and math.isfinite(t) and t >= 0)
                   for t in per_layer), where,
               f"has a threshold of the {gemm} GEMM that is not a finite number >= 0")
        exists = gemm != "projection" or spec.proj != spec.hidden  # a module's W, R always
        _check(not exists or gemm not in model.quantized(c.parts) or None not in per_layer,
               where, f"lacks a threshold of the {gemm} GEMM, which its {c.parts!r} plan "
                      f"runs in 8 bits")
