"""Raw probe results on disk: JSON Lines, one record per cell, safe against kill -9.

Each record is one ``write`` of a complete line followed by ``flush``, so a killed
run leaves at most one torn last line; :func:`read_records` drops it (and
:class:`ResultsFile` truncates it away before appending). ``fsync`` runs at most
every :data:`FSYNC_INTERVAL_S` seconds and on close, which bounds what a machine
crash (not a process kill) can lose without making thousands of descriptor-only
cells wait on the disk.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from .jsontypes import (BOOL, INT, NAME, NON_NEG_INT, NUM, POS_INT, POS_NUM, STR, ANY, Dict,
                        List, Obj, Opt, problem)

FSYNC_INTERVAL_S = 0.5
RUN_SCHEMA = 2  # of <spec>.run.json; 2 added the run's identity
TIMED_KINDS = ("forward_inference", "forward_training", "backward_data", "backward_weights")


class MalformedResults(ValueError):
    """A results file whose records cannot be read (not a torn last line)."""


def _timings_complete(rec: dict, where: str) -> str | None:
    """What the probe guarantees across fields: a verified cell carries its errors, and a
    timed one all four timed calls."""
    if rec["outcome"] == "OK" and (not rec.get("errors") or None in rec["errors"].values()):
        return f"{where}: an OK cell without every verification error (a finite number each)"
    t = rec.get("timings")
    if t:
        missing = [k for k in TIMED_KINDS if k not in t]
        if missing:
            return f"{where}.timings: lacks {missing[0]!r}"
        if rec["outcome"] != "OK":
            return f"{where}: timings on a cell that is not OK"
    return None


TIMING = Obj({"median_ms": POS_NUM, "tflops": NUM, "min_ms": NUM, "max_ms": NUM, "q1_ms": NUM,
              "q3_ms": NUM, "reps": POS_INT},
             required={"median_ms", "tflops", "min_ms", "max_ms", "q1_ms", "q3_ms", "reps"})
SHAPE = Obj({"seq_length": POS_INT, "layers": POS_INT, "hidden": POS_INT, "batch": POS_INT,
             "input_size": POS_INT}, required={"seq_length", "layers", "hidden", "batch"})
RECORD = Obj({
    "id": STR, "outcome": NAME, "data_type": NAME, "math_prec": NAME, "math_type": NAME,
    "algo": NAME, "cell": NAME, "direction": Opt(NAME), "input_mode": Opt(NAME),
    "bias_mode": Opt(NAME), "layout": Opt(NAME), "proj_size": Opt(POS_INT), "shape": SHAPE,
    "block": Opt(STR), "implicit": Opt(BOOL), "failed_stage": Opt(STR), "failed_call": Opt(STR),
    "status": Opt(STR), "status_code": Opt(INT), "reason": Opt(STR),
    "stages": Opt(List(STR)), "skipped_stages": Opt(List(STR)), "skip_reason": Opt(STR),
    "notes": Opt(List(STR)), "sizes": Opt(Dict(NON_NEG_INT)), "errors": Opt(Dict(Opt(NUM))),
    "verification": Opt(Dict(ANY)), "timings": Opt(Dict(TIMING)), "flop": Opt(NON_NEG_INT),
    "cudnn_version": Opt(STR), "library_path": Opt(STR), "duration_s": Opt(NUM),
    "speedup": Opt(Dict(NUM)), "baseline_id": Opt(STR), "stage_s": Opt(Dict(NUM)),
    "phase_s": Opt(Dict(NUM)), "live_descriptors": Opt(INT), "device_memory_bytes": Opt(INT),
    "worker_pid": Opt(INT), "dropout": Opt(NUM),
}, required={"id", "outcome", "data_type", "math_prec", "math_type", "algo", "cell", "shape"},
    rule=_timings_complete)


def read_records(path: str | Path, schema=RECORD, what: str = "probe record"
                 ) -> tuple[list[dict], int]:
    """Complete records of ``path`` and the byte length they occupy.

    Every line that ends in a newline must be a record of ``schema`` (a
    :mod:`.jsontypes` check); bytes after the last newline are the torn tail of a
    killed run and are ignored.
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
    good = data.rfind(b"\n") + 1
    records = []
    for number, line in enumerate(data[:good].split(b"\n")[:-1], start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):  # not JSON or UTF-8, 4300+ digits, deep nesting
            raise MalformedResults(f"{p}: line {number} is not JSON") from None
        wrong = problem(rec, schema, "the line")
        if wrong:
            raise MalformedResults(f"{p}: line {number} is not a {what} ({wrong})")
        records.append(rec)
    return records, good


class ResultsFile:
    """Append-only writer of records."""

    def __init__(self, path: str | Path, resume: bool, schema=RECORD, what: str = "probe record"):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        existing, good = read_records(self.path, schema, what) if resume else ([], 0)
        if resume and self.path.exists() and self.path.stat().st_size != good:
            with open(self.path, "r+b") as fh:
                fh.truncate(good)
        self.existing = existing
        self._fh = open(self.path, "a" if resume else "w", encoding="utf-8")
        self._last_sync = time.monotonic()

    def write(self, record: dict) -> None:
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
