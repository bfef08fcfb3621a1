"""The probe record: one per matrix cell, the project's central data, and its one owner.

:class:`Record` lists every key with its JSON check; it is built only here (from the
cell, the flow's result, the verification, the timings, the worker's facts, or a lost
worker), and its JSON form (:meth:`Record.as_json`) is what a worker hands back, what
:class:`ResultsFile` writes and what :func:`read_records` returns to the probe, tune,
bench, report and diff. Each record carries ``schema`` (:data:`SCHEMA`); a record
without it was written by cudnn-rnn 0.2 or earlier (schema 1, the same keys less some).

Files are JSON Lines, safe against kill -9: each record is one ``write`` of a complete
line followed by ``flush``, so a killed run leaves at most one torn last line;
:func:`read_records` leaves it out and says so in one line on stderr (not while another
process writes the run: its last line may be unfinished, see :mod:`.writer_lock`), and
:class:`ResultsFile` truncates it away before appending. ``fsync`` runs at most every
:data:`FSYNC_INTERVAL_S` seconds and on close, which bounds what a machine crash (not a
process kill) can lose without making thousands of descriptor-only cells wait on the disk.

A run committed to ``results/`` may keep its records gzipped (``<spec>.jsonl.gz``, made
with ``gzip -n``; a grown matrix's 12 MB of records take 0.5 MB): :func:`read_records`
reads either form, and :func:`run_file` names the ``<spec>.run.json`` beside both.
"""
from __future__ import annotations

import dataclasses
import gzip
import json
import os
import sys
import time
import traceback
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from cudnn_rnn.engine.config import C_INT_MAX
from cudnn_rnn.matrix import writer_lock
from cudnn_rnn.matrix.errors import MalformedResults
from cudnn_rnn.matrix.jsontypes import (ANY, BOOL, INT, NAME, NON_NEG_INT, NUM, POS_INT,
                                        POS_NUM, STR, Dict, List, Obj, Opt, Pred, problem)
# re-exported: the speeds read from a record live in .speed; their callers import them here
from cudnn_rnn.matrix.speed import (TIMED_KINDS, add_speedup, objective_basis,  # noqa: F401
                                    objective_ms, objective_replay_ms, objective_speedup,
                                    ranked_timing, same_basis_ratio)

SCHEMA = 4  # of each record; 2 added "schema" (0.3.0), 3 graph timings (0.4.0), 4 "lengths"
RUN_SCHEMA = 2  # of <spec>.run.json; 2 added the run's identity
FSYNC_INTERVAL_S = 0.5
UNFINISHED = ("CRASH", "TIMEOUT", "ERROR")  # outcomes of a cell whose worker could not finish it
# SKIPPED where no device stages run: every descriptor-level call passed. Its name alone would
# say the cell was left out, so the reports and the progress bar call it otherwise
OUTCOME_WORDS = {"SKIPPED": "passed the descriptor stages"}
OUTCOME_SHORT = {"SKIPPED": "desc OK"}
DESCRIPTOR_ONLY = "device stages not run on this machine"

TIMING = Obj({"median_ms": POS_NUM, "tflops": NUM, "min_ms": NUM, "max_ms": NUM, "q1_ms": NUM,
              "q3_ms": NUM, "reps": POS_INT},
             required={"median_ms", "tflops", "min_ms", "max_ms", "q1_ms", "q3_ms", "reps"})
# sizes cuDNN takes as C ints (RNNConfig.c_ints), as a record can hold them
C_SIZE = Pred(lambda v: POS_INT(v, "") is None and v <= C_INT_MAX,
              f"a positive integer that fits a C int (at most {C_INT_MAX})")
SHAPE = Obj({"seq_length": C_SIZE, "layers": C_SIZE, "hidden": C_SIZE, "batch": C_SIZE,
             "input_size": C_SIZE}, required={"seq_length", "layers", "hidden", "batch"})


def _key(check, default=None, required: bool = False, factory=None):
    """A record key: its JSON check, and whether a record of any schema must have it."""
    meta = {"check": check, "required": required}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class Record:
    """Every key of a probe record. Axis values are cuDNN's enum names without prefix;
    ``cell`` is cuDNN's cellMode (the files' name for it), ``shape`` the sizes."""
    # what the cell is
    id: str = _key(STR, required=True)
    block: str | None = _key(Opt(STR))
    implicit: bool | None = _key(Opt(BOOL))  # added only as another cell's FP32 baseline
    data_type: str = _key(NAME, required=True)
    math_prec: str = _key(NAME, required=True)
    math_type: str = _key(NAME, required=True)
    algo: str = _key(NAME, required=True)
    cell: str = _key(NAME, required=True)
    direction: str | None = _key(Opt(NAME))
    input_mode: str | None = _key(Opt(NAME))
    bias_mode: str | None = _key(Opt(NAME))
    proj_size: int | None = _key(Opt(POS_INT))
    layout: str | None = _key(Opt(NAME))
    dropout: float | None = _key(Opt(NUM))
    lengths: str | None = _key(Opt(STR))  # the batch's sequence lengths (engine.config); None: equal
    # ... as they were run (a random form depends on NumPy's generator): None when equal
    seq_lengths: list | None = _key(Opt(List(POS_INT)))
    # a variant (matrix.variants): the id of the cell it varies, and the axis it changes
    varies: dict | None = _key(Opt(Obj({"base": STR, "axis": NAME}, required={"base", "axis"},
                                       closed=True)))
    shape: dict = _key(SHAPE, required=True, factory=dict)
    flop: int | None = _key(Opt(NON_NEG_INT))  # the sample's count for one forward pass
    # what happened
    outcome: str | None = _key(NAME, required=True)
    failed_stage: str | None = _key(Opt(STR))
    failed_call: str | None = _key(Opt(STR))
    status: str | None = _key(Opt(STR))
    status_code: int | None = _key(Opt(INT))
    reason: str | None = _key(Opt(STR))
    stages: list = _key(Opt(List(STR)), factory=list)
    skipped_stages: list = _key(Opt(List(STR)), factory=list)
    skip_reason: str | None = _key(Opt(STR))
    notes: list = _key(Opt(List(STR)), factory=list)
    sizes: dict = _key(Opt(Dict(NON_NEG_INT)), factory=dict)
    errors: dict | None = _key(Opt(Dict(Opt(NUM))))  # relative error per output
    verification: dict | None = _key(Opt(Dict(ANY)))
    timings: dict | None = _key(Opt(Dict(TIMING)))  # plain calls
    graph_timings: dict | None = _key(Opt(Dict(TIMING)))  # replays of each call's CUDA graph
    graph_refused: dict | None = _key(Opt(Dict(STR)))  # why a call's capture was refused
    speedup: dict | None = _key(Opt(Dict(NUM)))  # over the FP32 baseline, same run
    baseline_id: str | None = _key(Opt(STR))
    # where and how long
    cudnn_version: str | None = _key(Opt(STR))
    library_path: str | None = _key(Opt(STR))
    duration_s: float | None = _key(Opt(NUM))
    stage_s: dict = _key(Opt(Dict(NUM)), factory=dict)
    phase_s: dict = _key(Opt(Dict(NUM)), factory=dict)
    live_descriptors: int | None = _key(Opt(INT))
    device_memory_bytes: int | None = _key(Opt(INT))
    worker_pid: int | None = _key(Opt(INT))
    schema: int = _key(Opt(POS_INT), default=SCHEMA)

    # --- building ----------------------------------------------------------------------
    @classmethod
    def of(cls, cell, cudnn_version: str | None, library_path: str | None) -> "Record":
        """The record of ``cell`` (a :class:`~cudnn_rnn.matrix.cells.Cell`) before it runs."""
        cfg = cell.config
        varies = {"base": cell.base, "axis": cell.axis} if cell.base else None
        return cls(id=cell.id, block=cell.block, implicit=cell.implicit, **cfg.as_record(),
                   varies=varies, seq_lengths=None if cfg.equal_lengths else list(cfg.seq_lengths),
                   flop=cfg.flop_count(), cudnn_version=cudnn_version,
                   library_path=library_path)

    @classmethod
    def unfinished(cls, cell, where: dict, outcome: str, status: str, reason: str) -> "Record":
        """A cell whose worker could not finish it (:data:`UNFINISHED`); ``where`` holds the
        worker's ``cudnn_version`` and ``library_path``."""
        rec = cls.of(cell, where["cudnn_version"], where["library_path"])
        rec.outcome, rec.status, rec.reason = outcome, status, reason
        return rec

    @classmethod
    def tool_error(cls, cell, where: dict, exc: BaseException) -> "Record":
        """A cell on which this tool's own code raised: outcome ERROR, with the exception's
        type, message and innermost frames. It says nothing about cuDNN; it is a bug."""
        rec = cls.unfinished(cell, where, "ERROR", type(exc).__name__, f"{type(exc).__name__}: {exc}")
        frames = traceback.extract_tb(exc.__traceback__)[-3:]
        rec.notes = [f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} in {f.name}" for f in frames]
        return rec

    def add_flow(self, result) -> None:
        """The stages of a :class:`~cudnn_rnn.engine.flow.FlowResult`, and its failure."""
        self.stages, self.skipped_stages = list(result.reached), list(result.skipped)
        self.skip_reason, self.notes = result.skip_reason, list(result.notes)
        self.sizes, self.stage_s = dict(result.sizes), dict(result.stage_s)
        f = result.failure
        if f is not None:
            self.failed_stage, self.failed_call = f.stage, f.call
            self.status, self.status_code, self.reason = f.status, f.code, f.reason

    def add_check(self, check) -> bool:
        """A :class:`~cudnn_rnn.check.verify.Verification`; outside the tolerance the
        reason names each output that failed. Returns whether it passed."""
        data = check.as_record()
        self.errors = data.pop("errors")
        self.verification = data
        if not check.passed:
            self.reason = "outside tolerance: " + ", ".join(
                f"{n} {check.errors[n]:.2e}" for n in check.failures)
        return check.passed

    def add_worker(self, live_descriptors: int, device_memory_bytes: int | None,
                   pid: int) -> None:
        self.live_descriptors = live_descriptors
        self.device_memory_bytes = device_memory_bytes
        self.worker_pid = pid

    def context_lost(self, found: str) -> None:
        """The CUDA context was in error after this cell: whatever the cell reported, it
        is a CRASH (a sticky error may have corrupted it), and its own outcome and failing
        call are kept in the notes."""
        if self.outcome == "CRASH":
            self.notes = list(self.notes) + [found]
            return
        before = f"before the context check: {self.outcome}" + (
            f" ({self.failed_call}: {self.status}: {self.reason})" if self.failed_call else "")
        self.notes = list(self.notes) + [before]
        self.outcome, self.status, self.reason = "CRASH", "CUDA_ERROR", found
        self.timings = self.speedup = self.graph_timings = self.graph_refused = None

    def as_json(self) -> dict:
        """The record's one serialised form: what the results file holds and readers read."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "Record":
        """A record read back (a line of a results file that passed :data:`RECORD`), for
        the probe to go on with; one without ``schema`` was written by 0.2 (schema 1)."""
        names = {f.name for f in dataclasses.fields(cls)}
        rec = cls(**{k: v for k, v in data.items() if k in names})
        if "schema" not in data:
            rec.schema = 1
        return rec


RECORD = Obj({f.name: f.metadata["check"] for f in dataclasses.fields(Record)},
             required={f.name for f in dataclasses.fields(Record) if f.metadata["required"]},
             rule=lambda rec, where: _consistent(rec, where), closed=True)


def _consistent(rec: dict, where: str) -> str | None:
    """What the probe guarantees across keys: a verified cell carries its errors, and a
    timed one all four timed calls (a variant, those its run times: at least one)."""
    if rec["outcome"] == "OK" and (not rec.get("errors") or None in rec["errors"].values()):
        return f"{where}: an OK cell without every verification error (a finite number each)"
    t = rec.get("timings")
    if t:
        missing = [k for k in TIMED_KINDS if k not in t]
        if missing and not (rec.get("varies") and len(missing) < len(TIMED_KINDS)):
            return f"{where}.timings: lacks {missing[0]!r}"
        if rec["outcome"] != "OK":
            return f"{where}: timings on a cell that is not OK"
    g, why = rec.get("graph_timings") or {}, rec.get("graph_refused") or {}
    if (g or why) and not t:
        return f"{where}: graph timings without plain ones"
    for kind in set(g) | set(why):
        if kind not in (t or {}) or (kind in g) == (kind in why):
            return f"{where}: {kind!r} needs a plain timing and either a graph timing or why not"
    return None


def max_error(rec: dict) -> float | None:
    """The largest relative error of any output or gradient (None if not verified)."""
    errs = [v for v in (rec.get("errors") or {}).values() if v is not None]
    return max(errs) if errs else None


def config_label(rec: dict) -> str:
    """DATA/PREC/MATH/ALGO, e.g. HALF/FLOAT/TENSOR_OP/STANDARD."""
    return f"{rec['data_type']}/{rec['math_prec']}/{rec['math_type']}/{rec['algo']}"


def read_records(path: str | Path, check=RECORD, what: str = "probe record",
                 reading: bool = False) -> tuple[list[dict], int]:
    """Complete records of ``path`` and the byte length they occupy.

    Every line that ends in a newline must pass ``check`` (a :mod:`.jsontypes` check of
    a record's keys); bytes after the last newline are the torn tail of a
    killed run: left out, with one line on stderr naming the file and the line. ``reading``
    (a report, not a run going on): a file whose only line is torn is an error, that one
    line.
    """
    p = Path(path)
    if not p.exists():
        return [], 0
    try:
        data = p.read_bytes()
    except IsADirectoryError:
        raise MalformedResults(f"{p} is a directory, not a results file") from None
    except OSError as exc:
        raise MalformedResults(f"cannot read {p}: {exc.strerror or exc}") from None
    if p.name.endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise MalformedResults(f"{p} is not a whole gzip file ({exc}); gzip the .jsonl "
                                   "again with gzip -n") from None
    good = data.rfind(b"\n") + 1
    lines = data[:good].split(b"\n")[:-1]
    if good < len(data) and _whole(data[good:], check):
        # a record whose write stopped just before its newline: whole, and kept (an object
        # cut anywhere before its closing brace is not JSON)
        lines.append(data[good:])
        good = len(data)
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):  # not JSON or UTF-8, 4300+ digits, deep nesting
            raise MalformedResults(f"{p}: line {number} is not JSON") from None
        if check is RECORD and isinstance(rec, dict) and isinstance(rec.get("schema"), int) \
                and rec["schema"] > SCHEMA:
            raise MalformedResults(f"{p}: line {number} was written by a newer cudnn-rnn (record "
                                   f"schema {rec['schema']}; this one reads up to {SCHEMA})")
        wrong = problem(rec, check, "the line")
        if wrong:
            raise MalformedResults(f"{p}: line {number} is not a {what} ({wrong})")
        records.append(rec)
    writer = writer_lock.other_writer(p.parent) if good < len(data) else None
    if reading and not records and good < len(data):
        if writer is not None:  # its first record is being written now
            raise MalformedResults(f"{p} holds no whole record yet: another process is "
                                   f"writing it (pid {writer.get('pid', '?')}); read it later")
        raise MalformedResults(f"{p} holds no whole record: line {len(lines) + 1} is torn (the "
                               "run was cut mid-write); run it again")
    if good < len(data) and writer is None:
        print(f"cudnn-rnn: {p}: line {len(lines) + 1} is torn (the run was cut mid-write); "
              "that record is left out", file=sys.stderr)
    return records, good


def _whole(tail: bytes, check) -> bool:
    try:
        rec = json.loads(tail)
    except (ValueError, RecursionError):
        return False
    return isinstance(rec, dict) and problem(rec, check, "the line") is None


def run_file(records_path: str | Path) -> Path:
    """The ``<spec>.run.json`` beside ``<spec>.jsonl`` or its archived ``<spec>.jsonl.gz``."""
    p = Path(records_path)
    stem = p.name[:-len(".gz")] if p.name.endswith(".gz") else p.name
    return p.with_name(stem).with_suffix(".run.json")


class ResultsFile:
    """Append-only writer of records (each passes ``check`` before it is written,
    so a file never holds a line its reader would refuse), holding its folder's writer lock
    (:mod:`.writer_lock`) from before it reads or truncates anything until it is closed."""

    def __init__(self, path: str | Path, resume: bool, check=RECORD, what: str = "probe record"):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        writer_lock.hold(self.path.parent, tell=False)
        self.check, self.what = check, what
        try:
            existing, good = read_records(self.path, check, what) if resume else ([], 0)
            if resume and self.path.exists() and self.path.stat().st_size != good:
                with open(self.path, "r+b") as fh:
                    fh.truncate(good)
            self._fh = open(self.path, "a" if resume else "w", encoding="utf-8")
            if resume and good and not self._ends_in_newline():
                self._fh.write("\n")  # after a whole last record that lost its newline
            writer_lock.announce(self.path.parent)  # what a refused second writer names
        except BaseException:
            writer_lock.release(self.path.parent)
            raise
        self.existing, self._last_sync = existing, time.monotonic()

    def _ends_in_newline(self) -> bool:
        with open(self.path, "rb") as fh:
            fh.seek(-1, os.SEEK_END)
            return fh.read(1) == b"\n"

    def write(self, record: dict) -> None:
        wrong = problem(record, self.check, "the record")
        if wrong:  # a bug of this tool, never bad input: stop before the file holds it
            raise ValueError(f"not a {self.what}: {wrong}")
        self._fh.write(json.dumps(record, sort_keys=True, allow_nan=False) + "\n")
        self._fh.flush()
        if time.monotonic() - self._last_sync >= FSYNC_INTERVAL_S:
            os.fsync(self._fh.fileno())
            self._last_sync = time.monotonic()

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()
            writer_lock.release(self.path.parent)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def write_json(path: str | Path, data: dict) -> None:
    """Write a small JSON file atomically (temp file + rename)."""
    p = Path(path)
    tmp = p.with_suffix(p.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, p)
