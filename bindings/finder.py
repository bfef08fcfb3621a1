"""Where a shared library of NVIDIA's comes from: the candidates every loader here walks.

One order for every library the bindings load (cuDNN in :mod:`.library`, cuBLASLt in
:mod:`.cublaslt.library`): an explicit path or its environment variable; cuda-pathfinder
(``load_nvidia_dynamic_lib``, which knows the wheels' and the toolkit's layouts); the PyPI
wheels' own folders under any ``sys.path`` entry; the system's sonames. A loader keeps
which candidate it took and why each one before it failed, so "which libcublasLt did this
process use, and why not the other" has an answer.
"""
from __future__ import annotations

import glob
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Candidate:
    path: str  # a file path, or a soname the dynamic linker resolves
    source: str  # how it was found, for provenance ("explicit", "sys.path wheel", ...)


def as_path(name: str) -> str:
    """A name that exists here is a file path (made absolute, so the dynamic linker does not
    search its library path for it); anything else stays a soname (``libcudnn.so.9``)."""
    return os.path.abspath(name) if os.path.exists(name) else name


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def explicit(path: str | None, env: str) -> Candidate | None:
    """``path`` if given, else ``$env`` if set: the one candidate then tried."""
    if path:
        return Candidate(as_path(path), "explicit")
    value = os.environ.get(env)
    return Candidate(as_path(value), f"env {env}") if value else None


def wheel_candidates(patterns: tuple[str, ...]) -> list[Candidate]:
    """Files matching ``patterns`` (relative globs such as
    ``nvidia/cublas/lib/libcublasLt.so.*``) under each ``sys.path`` entry, highest version
    first; only the ``lib<name>.so.<major>`` soname files, not their fully versioned twins."""
    found = []
    for entry in sys.path:
        if not entry:
            continue
        for pattern in patterns:
            for so in sorted(glob.glob(os.path.join(entry, pattern)), reverse=True):
                if Path(so).name.count(".") == 2:  # libX.so.9, not libX.so.9.1.0
                    found.append(Candidate(so, "sys.path wheel"))
    return found


def pathfinder_candidate(libname: str) -> Candidate | None:
    """cuda-pathfinder's answer for ``libname`` ("cudnn", "cublasLt"), if it is installed
    and finds one (it loads the library into the process as it looks)."""
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib  # optional: may not be installed
    except Exception:
        return None
    try:
        loaded = load_nvidia_dynamic_lib(libname)
    except Exception:
        return None
    if not loaded.abs_path:
        return None
    return Candidate(loaded.abs_path, f"cuda-pathfinder ({loaded.found_via})")


def search(libname: str | None, patterns: tuple[str, ...],
           sonames: tuple[str, ...]) -> list[Candidate]:
    """The walk after an explicit candidate: cuda-pathfinder (unless ``libname`` is None),
    the wheels, the sonames."""
    pf = pathfinder_candidate(libname) if libname else None
    return ([pf] if pf else []) + wheel_candidates(patterns) + [
        Candidate(name, "system soname") for name in sonames]


def first_that_opens(candidates: list[Candidate], open_, not_found: type, what: str, hint: str):
    """``open_`` of the first candidate it accepts, with ``rejected`` set to why each one
    before it failed (``open_`` raises ``not_found`` for a candidate it refuses); when none
    opens, ``not_found`` listing every failure and ``hint``."""
    failures = []  # why each candidate failed, in the order tried
    for candidate in candidates:
        try:
            lib = open_(candidate)
        except not_found as exc:
            failures.append(str(exc))
            continue
        lib.rejected = tuple(failures)
        return lib
    raise not_found(f"no {what} found (tried: " + "; ".join(failures) + f"); {hint}")


def check_file(candidate: Candidate, not_found: type, filename: str) -> None:
    """A candidate given as a path must name an existing file that is not a directory
    (a soname is left to the dynamic linker); else ``not_found`` saying which."""
    if "/" not in candidate.path:
        return
    if not os.path.exists(candidate.path):
        raise not_found(f"{candidate.path} ({candidate.source}) does not exist")
    if os.path.isdir(candidate.path):
        raise not_found(f"{candidate.path} ({candidate.source}) is a directory, not the "
                        f"{filename} file")


class OnePerProcess:
    """Loads one library lazily, once per process, under a lock: the explicit candidate
    (the ``path`` argument, else ``$env``) is the only one tried when given; otherwise
    :func:`search` in order, keeping why each candidate failed. Asking again returns the
    same library; asking for another file is refused, since a second copy of the library
    in one process would be a second copy of its global state."""

    def __init__(self, what: str, env: str, libname: str | None, patterns: tuple, sonames: tuple,
                 open_, not_found: type, hint: str):
        self.what, self.env, self.libname = what, env, libname
        self.patterns, self.sonames, self.open_ = patterns, sonames, open_
        self.not_found, self.hint = not_found, hint
        self.lock = threading.RLock()
        self.asked = None  # the explicit candidate the library was opened from, as given
        self.lib = None

    def load(self, path: str | None = None):
        with self.lock:
            wanted = path or os.environ.get(self.env) or None
            if self.lib is not None:
                if wanted and not self._same(wanted):
                    raise self.not_found(f"{self.lib.path} is already loaded in this process; a "
                                         f"second {self.what} ({wanted}) needs a new process")
                return self.lib
            chosen = explicit(path, self.env)
            self.asked = chosen.path if chosen else None
            self.lib = self.open_(chosen) if chosen else first_that_opens(
                search(self.libname, self.patterns, self.sonames), self.open_, self.not_found,
                self.what, self.hint)
            return self.lib


    def _same(self, wanted: str) -> bool:
        """Whether ``wanted`` names the library loaded: a path as the same file, a soname
        (no '/', the dynamic linker's to resolve) as the one it was opened from or the
        loaded file's name."""
        if "/" not in wanted:
            return wanted in (self.asked, Path(self.lib.path).name)
        return Path(wanted).resolve() == Path(self.lib.path).resolve()


def mapped_paths(prefix: str) -> list[str]:
    """Files whose name starts with ``prefix`` mapped into this process, from
    /proc/self/maps (the dynamic linker's truth, whoever loaded them), in the order of the
    map; one name at two paths means two copies of that library in one process."""
    found: dict[str, None] = {}
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                parts = line.split(None, 5)
                if len(parts) == 6 and Path(parts[5].strip()).name.startswith(prefix):
                    found.setdefault(parts[5].strip())
    except OSError:
        pass
    return list(found)
