"""Where a result came from: GPU, driver, CUDA, cuDNN (version and path), commit, command, date."""
from __future__ import annotations

import datetime as _dt
import os
import platform
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout


def commit() -> str:
    """``$CUDNN_RNN_COMMIT`` (for copies of the tree without .git), else ``git rev-parse``,
    with ``-dirty`` when a tracked file outside ``results/`` differs from that commit (the
    committed results are outputs: a command that regenerates them, as ``make precision``
    does for its second table, leaves the code as committed)."""
    env = os.environ.get("CUDNN_RNN_COMMIT")
    if env:
        return env
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                             text=True, timeout=10)
        if out.returncode == 0:
            sha = out.stdout.strip()
            # --no-optional-locks: a status that refreshes the index would write
            # .git/index.lock, outside the output folder (and in the way of a user's commit)
            dirty = subprocess.run(["git", "--no-optional-locks", "status", "--porcelain",
                                    "--untracked-files=no", "--", ".", ":(exclude)results"],
                                   cwd=ROOT, capture_output=True, text=True, timeout=10)
            return sha + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"


def command(prog: str, args: list | None = None) -> str:
    """The command line that does this again: ``python -m PROG ARGS``, where ``prog`` is the
    command's module (``cudnn_rnn.probe``; ``cudnn-rnn probe`` is the same command) and
    ``args`` its arguments (``sys.argv[1:]`` when None)."""
    args = sys.argv[1:] if args is None else args
    return " ".join(["python -m " + prog] + [shlex.quote(str(a)) for a in args])


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def slug(text: str | None) -> str:
    if not text:
        return "no-gpu"
    return re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-") or "unnamed"


def version_name(version) -> str:
    """A cuDNN version as a path component: dotted digits as they are, anything else
    slugged, so that no name read from a file can be ``..`` or hold a separator."""
    version = str(version)
    return version if re.fullmatch(r"[0-9]+(\.[0-9]+){0,3}", version) else slug(version)


def results_path(gpu: str | None, version) -> Path:
    """``nvidia-h200/9.19.0``: where under a results folder a GPU's (or no-gpu's) results
    with a cuDNN version go, as a relative path (:func:`slug`, :func:`version_name`)."""
    return Path(slug(gpu)) / version_name(version)


def folder_name(gpu: str | None, version) -> str:
    """``nvidia-h200-9.19.0``: a result set's GPU (or no-gpu) and cuDNN version as one folder
    name (:func:`version_name`)."""
    return f"{slug(gpu)}-{version_name(version)}"


def collect(library: dict, device: dict, command_line: str) -> dict:
    """One provenance block from the worker's library and device descriptions and the
    command line (:func:`command`)."""
    try:
        import numpy  # here: the probe's parent loads numpy only to name its version
        numpy_version = numpy.__version__
    except Exception:  # pragma: no cover
        numpy_version = None
    return {
        "gpu": device.get("gpu"),
        "compute_capability": device.get("compute_capability"),
        "driver_version": device.get("driver_version"),
        "cuda_driver_api": device.get("cuda_driver"),
        "cuda_runtime_cudnn": library.get("cudart_version"),
        "cuda_runtime_cupy": device.get("cuda_runtime_cupy"),
        "cupy": device.get("cupy"),
        "no_gpu_reason": device.get("reason"),
        "cudnn_version": library.get("cudnn_version"),
        "library_path": library.get("library_path"),
        "library_source": library.get("library_source"),
        # why each candidate before it failed, "; "-joined (a record's fields are scalars)
        "library_rejected": "; ".join(library.get("library_rejected") or ()) or None,
        "cublaslt": library.get("cublaslt"),
        "python": platform.python_version(),
        "numpy": numpy_version,
        "host": platform.node(),
        "commit": commit(),
        "command": command_line,
        "date": now(),
    }
