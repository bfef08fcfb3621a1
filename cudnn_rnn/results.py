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

FSYNC_INTERVAL_S = 0.5


class MalformedResults(ValueError):
    """A results file whose records cannot be read (not a torn last line)."""


def read_records(path: str | Path) -> tuple[list[dict], int]:
    """Complete records of ``path`` and the byte length they occupy.

    Every line that ends in a newline must be a record; bytes after the last newline
    are the torn tail of a killed run and are ignored.
    """
    p = Path(path)
    if not p.exists():
        return [], 0
    data = p.read_bytes()
    good = data.rfind(b"\n") + 1
    records = []
    for number, line in enumerate(data[:good].split(b"\n")[:-1], start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise MalformedResults(f"{p}: line {number} is not JSON") from None
        if not isinstance(rec, dict) or "id" not in rec or "outcome" not in rec:
            raise MalformedResults(f"{p}: line {number} is not a probe record")
        records.append(rec)
    return records, good


class ResultsFile:
    """Append-only writer of records."""

    def __init__(self, path: str | Path, resume: bool):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        existing, good = read_records(self.path) if resume else ([], 0)
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
