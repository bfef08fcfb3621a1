"""One writer per run folder: an OS file lock (``flock``) that dies with its process.

A command that writes a run (the probe, the benchmark, the precision table) holds the lock
of the run's folder, its :data:`LOCK_FILE`, from before its first write until it ends; a
second writer is refused (:class:`RunLocked`: one line, exit 2) before it writes anything,
naming the first by what the holder wrote into the lock file: its pid, command and start
time. The lock is the kernel's, so a killed writer leaves nothing to clean up (the file
stays, empty of meaning; the lock goes with the process).

Readers take no lock. :func:`other_writer` tells them whether another process writes a
folder now (a shared lock tried and dropped at once), so the unfinished last line of a run
being written is not mistaken for the torn line of a run cut mid-write.
"""
from __future__ import annotations

import fcntl
import json
import os
import shlex
import sys
import time
from pathlib import Path

from cudnn_rnn.matrix.errors import BadInput

LOCK_FILE = ".writer.lock"
GRACE_S = 0.5  # a reader's check holds the lock for microseconds: a writer retries this long

_held: dict = {}  # resolved folder -> [its open lock file, how many holds]


class RunLocked(BadInput):
    """Another process writes this run folder (one line, exit 2)."""


def this_command() -> str:
    """How this process was started, as a user would type it again."""
    main = sys.modules.get("__main__")
    name = getattr(getattr(main, "__spec__", None), "name", None)
    if name and name != "__main__":
        return " ".join(["python -m " + name] + [shlex.quote(a) for a in sys.argv[1:]])
    return " ".join(shlex.quote(a) for a in sys.argv) or "python"


def hold(folder: str | Path, command: str | None = None) -> None:
    """Take the writer lock of ``folder`` (which must exist) for this process, or raise
    :class:`RunLocked` naming the process that has it. Holding it again is counted (each
    hold wants its :func:`release`); it goes anyway when the process ends."""
    key = Path(folder).resolve()
    if key in _held:
        _held[key][1] += 1
        return
    try:
        fh = open(key / LOCK_FILE, "a+", encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"cannot write {key / LOCK_FILE}: {exc.strerror or exc}") from None
    deadline = time.monotonic() + GRACE_S
    while not _try(fh, fcntl.LOCK_EX):
        if time.monotonic() >= deadline:
            first = describe(_read(fh))
            fh.close()
            raise RunLocked(f"{folder} is being written by another process ({first}); nothing "
                            "was written here: wait for it to end, or give another --out")
        time.sleep(0.01)
    fh.seek(0)
    fh.truncate()
    fh.write(json.dumps({"pid": os.getpid(), "command": command or this_command(),
                         "started": _now()}) + "\n")
    fh.flush()
    _held[key] = [fh, 1]


def release(folder: str | Path) -> None:
    """Give back one hold of ``folder``'s lock (the last one unlocks it)."""
    key = Path(folder).resolve()
    entry = _held.get(key)
    if entry is None:
        return
    entry[1] -= 1
    if entry[1] <= 0:
        del _held[key]
        entry[0].close()  # closing the file drops the flock


def release_all() -> None:
    """Give back every lock this process holds (a command's end)."""
    for key in list(_held):
        _held[key][1] = 0
        release(key)


def holds(folder: str | Path) -> bool:
    """Whether this process holds ``folder``'s lock."""
    return Path(folder).resolve() in _held


def other_writer(folder: str | Path) -> dict | None:
    """What another process writing ``folder`` now said about itself (``pid``, ``command``,
    ``started``; an empty dict if it has not said yet), or None when no other process
    writes it."""
    path = Path(folder) / LOCK_FILE
    if holds(folder) or not path.is_file():
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            if _try(fh, fcntl.LOCK_SH):
                fcntl.flock(fh, fcntl.LOCK_UN)
                return None
            return _read(fh)
    except OSError:
        return None


def describe(info: dict | None) -> str:
    """A writer as the refusal names it: ``pid 123, `python -m ...`, started 2026-...``."""
    if not info:
        return "a process that has not yet written who it is"
    return f"pid {info.get('pid')}, `{info.get('command')}`, started {info.get('started')}"


def _try(fh, kind: int) -> bool:
    try:
        fcntl.flock(fh, kind | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _read(fh) -> dict:
    fh.seek(0)
    try:
        data = json.loads(fh.read() or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")
