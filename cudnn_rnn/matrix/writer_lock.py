"""One writer per run folder: an OS file lock (``flock``) that dies with its process.

A command that writes a run (the probe, the benchmark, the precision table) holds the lock
of the run's folder (``flock`` on the folder itself: no lock file to create or clean up)
from before its first write until it ends; a second writer is refused
(:class:`RunLocked`: one line, exit 2) before it writes anything, naming the first by what
the holder wrote into :data:`INFO_FILE` when it began writing: its pid, command and start
time. The lock is the kernel's, so a killed writer leaves nothing to clean up (the info
file stays, naming the last writer; without the lock it means nothing, and a refusal
names nobody rather than a process that has ended: the next holder says who it is only
when it begins writing).

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

INFO_FILE = ".writer"  # who holds the lock: pid, command, start time (JSON)
GRACE_S = 0.5  # a reader's check holds the lock for microseconds: a writer retries this long

_held: dict = {}  # resolved folder -> [its open descriptor, how many holds, what it announced]


class RunLocked(BadInput):
    """Another process writes this run folder (one line, exit 2)."""


def this_command() -> str:
    """How this process was started, as a user would type it again."""
    main = sys.modules.get("__main__")
    name = getattr(getattr(main, "__spec__", None), "name", None)
    if name and name != "__main__":
        return " ".join(["python -m " + name] + [shlex.quote(a) for a in sys.argv[1:]])
    return " ".join(shlex.quote(a) for a in sys.argv) or "python"


def hold(folder: str | Path, command: str | None = None, tell: bool = True) -> None:
    """Take the writer lock of ``folder`` (which must exist) for this process, or raise
    :class:`RunLocked` naming the process that has it; nothing is written either way unless
    ``tell`` (then :func:`announce` at once, with ``command``). Holding it again is counted (each hold
    wants its :func:`release`); it goes anyway when the process ends."""
    key = Path(folder).resolve()
    if key not in _held:
        try:
            fd = os.open(key, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as exc:
            raise BadInput(f"cannot open the folder {folder}: {exc.strerror or exc}") from None
        deadline = time.monotonic() + GRACE_S
        while not _try(fd, fcntl.LOCK_EX):
            if time.monotonic() >= deadline:
                os.close(fd)
                raise RunLocked(f"{folder} is being written by another process "
                                f"({describe(_info(key))}); nothing was written here: wait "
                                "for it to end, or give another --out")
            time.sleep(0.01)
        _held[key] = [fd, 0, None]
    _held[key][1] += 1
    if tell:
        announce(key, command)


def announce(folder: str | Path, command: str | None = None) -> None:
    """Say who writes ``folder`` (held by this process) in its :data:`INFO_FILE`, once: what
    a refused second writer names."""
    entry = _held[Path(folder).resolve()]
    if entry[2] is None:
        entry[2] = {"pid": os.getpid(), "command": command or this_command(), "started": _now()}
        path = Path(folder) / INFO_FILE
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(entry[2]) + "\n")
        os.replace(tmp, path)


def release(folder: str | Path) -> None:
    """Give back one hold of ``folder``'s lock (the last one unlocks it)."""
    key = Path(folder).resolve()
    entry = _held.get(key)
    if entry is None:
        return
    entry[1] -= 1
    if entry[1] <= 0:
        del _held[key]
        os.close(entry[0])  # closing the descriptor drops the flock


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
    if holds(folder):
        return None
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        if _try(fd, fcntl.LOCK_SH):
            return None
        return _info(Path(folder))
    finally:
        os.close(fd)  # drops the shared lock, if taken


def describe(info: dict | None) -> str:
    """A writer as the refusal names it: ``pid 123, `python -m ...`, started 2026-...``."""
    if not info:
        return "a process that has not yet said who it is"
    return f"pid {info.get('pid')}, `{info.get('command')}`, started {info.get('started')}"


def _try(fd: int, kind: int) -> bool:
    """Whether the lock is now this process's: False only when another process has it (a
    file system that cannot lock a folder at all, such as some network mounts, excludes
    nobody rather than refusing every run)."""
    try:
        fcntl.flock(fd, kind | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:
        pass
    return True


def _info(folder: Path) -> dict:
    """What the holder wrote about itself; empty where nothing is written, or where it names
    a process that has ended (a last writer's info, before the holder has said who it is)."""
    try:
        data = json.loads((folder / INFO_FILE).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return data if _alive(data.get("pid")) else {}


def _alive(pid) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)  # no signal sent: whether the process exists
    except ProcessLookupError:
        return False
    except OSError:  # it exists, and is another user's
        return True
    return True


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")
