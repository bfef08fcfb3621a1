"""CuPy's kernels compiled before the first timed call, by rehearsals in parallel processes.

On a fresh machine CuPy's kernel cache (``$CUPY_CACHE_DIR``, else ``~/.cupy/kernel_cache``)
is empty: every elementwise and reduction kernel that drawing the values, the float64
reference, the comparison and the graph checks use is compiled by NVRTC the first time it
runs, one after another inside the first cells (on the H200, 8-10 s at the start of a
matrix session, more for the precision table's 8-bit engine). NVRTC compiles on the host,
which has cores to spare: rehearsing a few small pieces of the same work in several spawned
processes at once (:func:`warm`) fills the cache in a fraction of that time, before any
measurement (their GPU work overlaps none); the worker then loads each kernel from the
cache. A marker file in the cache folder, per GPU, CuPy and project version, skips the
rehearsal on the next run. A rehearsal that fails or runs late costs its time only: the run
goes on, compiling what is missing as before.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import time
from pathlib import Path

from cudnn_rnn import __version__
from cudnn_rnn.bindings.enums import RNNAlgo
from cudnn_rnn.matrix.jobs import job, name_of
from cudnn_rnn.matrix.runs import content_key
from cudnn_rnn.matrix.spawning import sigint_ignored_by_child

DEFAULT_CACHE = Path("~/.cupy/kernel_cache")
MAX_PROCESSES = 8
TIMEOUT_S = 300.0


def cache_dir() -> Path:
    """Where CuPy keeps its compiled kernels (the folder its marker goes into)."""
    return Path(os.environ.get("CUPY_CACHE_DIR") or DEFAULT_CACHE).expanduser()


def marker(what: str, device: dict) -> Path:
    """The file that says ``what`` was rehearsed on this GPU with this CuPy and project."""
    key = content_key([what, __version__, device.get("gpu"), device.get("compute_capability"),
                       device.get("cupy"), device.get("cuda_runtime_cupy")])[:12]
    return cache_dir() / f".cudnn-rnn-warm-{what}-{key}"


def processes(tasks: int) -> int:
    """How many rehearsals run at once: half the host's cores, at most :data:`MAX_PROCESSES`."""
    return max(1, min(MAX_PROCESSES, (os.cpu_count() or 2) // 2, tasks))


def warm(what: str, device: dict, tasks: list, timeout_s: float = TIMEOUT_S) -> str | None:
    """Run the jobs ``tasks`` ((name, params) of :mod:`.jobs`) in parallel spawned processes,
    unless ``what`` was rehearsed here before; a line saying what was done (None: nothing)."""
    done = marker(what, device)
    if not tasks or done.exists():
        return None
    started = time.monotonic()
    n = processes(len(tasks))
    ran = rehearse(tasks, n, timeout_s)
    if ran is None:
        return (f"CuPy's kernels: the rehearsal was cut after {timeout_s:.0f} s; the rest "
                "compile as they are needed")
    failed = [why for _pid, why, _s in ran if why]
    wall = time.monotonic() - started
    if failed:
        return f"CuPy's kernels: {len(failed)} of {len(tasks)} rehearsals failed ({failed[0]})"
    try:
        done.parent.mkdir(parents=True, exist_ok=True)
        done.write_text(f"{len(tasks)} rehearsals, {wall:.1f} s\n")
    except OSError:
        pass
    return (f"CuPy's kernels compiled ahead: {len(tasks)} rehearsals in {n} processes, "
            f"{wall:.1f} s (the slowest {max(s for _p, _w, s in ran):.1f} s; cache "
            f"{cache_dir()})")


def rehearse(tasks: list, n: int, timeout_s: float) -> list | None:
    """Run ``tasks`` in a pool of ``n`` spawned processes: (the process's pid, why it failed
    or None, its seconds) of each, or None where they did not finish within ``timeout_s``."""
    with sigint_ignored_by_child():  # a Ctrl-C in the terminal is the supervisor's to take
        pool = mp.get_context("spawn").Pool(n)
    with pool:
        pending = pool.map_async(_rehearse, tasks, chunksize=1)
        try:
            return pending.get(timeout_s)
        except mp.TimeoutError:
            pool.terminate()
            return None


def _rehearse(task: tuple) -> tuple:  # pragma: no cover - runs in a spawned process
    """One rehearsal: its job run in this process (and its own CUDA context); this process's
    pid, why it failed (None: it did not) and the job's seconds."""
    from cudnn_rnn.engine import gpu
    from cudnn_rnn.matrix import jobs
    name, params = task
    started = time.monotonic()
    try:
        gpu.plain_reductions_here()  # as the worker that loads these kernels
        jobs.run(name, params)
    except Exception as exc:
        return os.getpid(), f"{type(exc).__name__}: {exc}", time.monotonic() - started
    return os.getpid(), None, time.monotonic() - started


def cell_tasks(cells: list, cudnn_path: str | None, graphs: bool, limit: int = 48) -> list:
    """The probe's rehearsals: one cell of each data type and cell mode, and of each varied
    axis value, STANDARD algorithm first (the others add no kernel of CuPy's), spread over
    the processes (:func:`rehearse_cells` runs each share)."""
    chosen, seen = [], set()
    for c in sorted(cells, key=lambda c: c.config.algo != RNNAlgo.STANDARD):
        cfg = c.config
        key = (cfg.data_type, cfg.mode, c.axis, c.id.split("/", 5)[-1] if c.axis else None)
        if key not in seen:
            seen.add(key)
            chosen.append(c)
    chosen = chosen[:limit]
    n = processes(len(chosen))
    return [(name_of(rehearse_cells), {"cells": chosen[i::n], "cudnn_path": cudnn_path,
                                       "graphs": graphs}) for i in range(n) if chosen[i::n]]


@job
def rehearse_cells(cells: list, cudnn_path: str | None, graphs: bool) -> int:
    """Run ``cells`` as the probe does, briefly timed (a job for :func:`warm`)."""
    from cudnn_rnn import bindings
    from cudnn_rnn.matrix.execute import run_cell
    lib = bindings.load(cudnn_path)
    for cell in cells:
        run_cell(cell, lib, device=True, reps=2, warmup=1, budget_s=0.01, graphs=graphs)
    return len(cells)
