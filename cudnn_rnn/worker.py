"""Cells run in a separate worker process, so one that kills it cannot kill the matrix.

The supervisor (:class:`Worker`) sends one cell at a time over a pipe and waits for
its record. If the worker dies (segfault, abort, a sticky CUDA error it reported
before exiting) the cell is recorded as CRASH with the signal or exit status and a
fresh worker takes the next cell; if no record arrives within the per-cell timeout
the worker is killed and the cell recorded as TIMEOUT. Workers are started with
``spawn``: the parent never touches CUDA, the worker owns the only context.

``CUDNN_RNN_FAULT`` is a test hook that injects faults into the worker:
``crash:TEXT`` (SIGSEGV before a cell whose id contains TEXT), ``abort:TEXT``,
``hang:TEXT`` (sleep forever), ``slow:SECONDS`` (sleep before every cell).
"""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time

FAULT_ENV = "CUDNN_RNN_FAULT"


class WorkerStartFailed(RuntimeError):
    def __init__(self, message: str, library_missing: bool = False):
        super().__init__(message)
        self.library_missing = library_missing


def _inject_fault(cell_id: str) -> None:
    spec = os.environ.get(FAULT_ENV, "")
    kind, _, arg = spec.partition(":")
    if kind == "slow" and arg:
        time.sleep(float(arg))
    elif arg and arg in cell_id:
        if kind == "crash":
            os.kill(os.getpid(), signal.SIGSEGV)
        elif kind == "abort":
            os.abort()
        elif kind == "hang":
            while True:
                time.sleep(60)


def _worker_main(conn, cudnn_path, options) -> None:  # pragma: no cover - runs in the child
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor decides when to stop
    try:
        import bindings
        from . import gpu
        from .cell import ReferenceCache, crash_record, run_cell
        from .flow import HostValues
        from .descriptors import live_objects
        from .seed_replay import replay
        lib = bindings.load(cudnn_path)
        device = gpu.available() and not options.get("no_device")
        conn.send(("ready", {"library": lib.describe(), "device": gpu.device_info(),
                             "symbols": lib.symbol_report(), "pid": os.getpid(),
                             "device_stages": device, "seed_replay": replay(lib, device)}))
    except Exception as exc:
        missing = type(exc).__name__ == "LibraryNotFound"
        conn.send(("failed", f"{exc}", missing))
        return
    cache = ReferenceCache(device_bytes=int(options.get("reference_device_bytes", 0)))
    values = HostValues() if options.get("reuse_values") else None
    pool = None
    if device:
        import cupy
        pool = cupy.get_default_memory_pool()
    info = {"cudnn_version": lib.version_string, "library_path": lib.describe()["library_path"]}
    while True:
        try:
            cell = conn.recv()
        except (EOFError, OSError):
            return
        if cell is None:
            return
        if isinstance(cell, tuple) and cell[0] == "job":
            _, name, params = cell
            try:
                conn.send(("job", _run_job(name, lib, params)))
            except Exception as exc:
                conn.send(("job", {"skipped": f"{name} failed: {type(exc).__name__}: {exc}"}))
            continue
        _inject_fault(cell.id)
        try:
            rec = run_cell(cell, lib, device=device, reps=options.get("reps", 20),
                           time_it=options.get("time", True), cache=cache, values=values,
                           kinds=options.get("kinds"), budget_s=options.get("budget_s"))
        except Exception as exc:  # not a cuDNN status: an error of ours or of CUDA
            rec = crash_record(cell, info, f"{type(exc).__name__}: {exc}", "EXCEPTION")
        rec["live_descriptors"] = live_objects()
        rec["device_memory_bytes"] = int(pool.used_bytes()) if pool is not None else None
        rec["worker_pid"] = os.getpid()
        conn.send(("record", rec))
        if rec["outcome"] == "CRASH":
            return  # a CUDA error may be sticky: the next cell gets a fresh process


def _run_job(name: str, lib, params: dict) -> dict:  # pragma: no cover - runs in the child
    """Work beside the cells, in the same process and CUDA context: PyTorch's timing
    (``torch``), the dense GEMM rate (``gemm``), the overhead pair (``overhead``)."""
    if name == "torch":
        from .torch_compare import time_torch
        return time_torch(**params)
    if name == "gemm":
        from .gemm import gemm_rates
        return gemm_rates(**params)
    if name == "overhead":
        from .overhead import measure_pair
        return measure_pair(lib, **params)
    raise ValueError(f"unknown job {name!r}")


def _signal_name(code: int | None) -> str:
    if code is None:
        return "no exit status"
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


class Worker:
    """A supervised worker process; :meth:`run` always returns a record."""

    def __init__(self, cudnn_path: str | None, options: dict, start_timeout: float = 300.0):
        self.cudnn_path = cudnn_path
        self.options = options
        self.start_timeout = start_timeout
        self.proc = None
        self.conn = None
        self.info: dict | None = None
        self.restarts = 0

    def start(self) -> dict:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, self.cudnn_path, self.options),
                                daemon=True, name="cudnn-rnn-worker")
        self.proc.start()
        child.close()
        self.conn = parent
        if not parent.poll(self.start_timeout):
            self.kill()
            raise WorkerStartFailed(f"the worker did not start within {self.start_timeout:.0f} s")
        try:
            kind, *payload = parent.recv()
        except EOFError:
            code = self.proc.exitcode if self.proc.join(5) is None else None
            raise WorkerStartFailed(f"the worker died while starting ({_signal_name(code)})") from None
        if kind == "failed":
            self.kill()
            raise WorkerStartFailed(payload[0], payload[1])
        self.info = payload[0]
        return self.info

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.is_alive()

    def run(self, cell, timeout: float) -> dict:
        from .cell import crash_record
        if not self.alive:
            if self.proc is not None:
                self.restarts += 1
            self.start()
        ident = {"cudnn_version": self.info["library"]["cudnn_version"],
                 "library_path": self.info["library"]["library_path"]}
        self.conn.send(cell)
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                rec = crash_record(cell, ident, f"no result within the {timeout:g} s per-cell "
                                   "timeout; the worker was killed", "TIMEOUT")
                rec["outcome"] = "TIMEOUT"
                return rec
            if self.conn.poll(min(remaining, 0.5)):
                try:
                    kind, rec = self.conn.recv()
                    return rec
                except (EOFError, OSError):
                    break
            if not self.proc.is_alive():
                break
        self.proc.join(5)
        status = _signal_name(self.proc.exitcode)
        self.conn = None
        return crash_record(cell, ident, f"the worker process died ({status}) while running "
                            "this cell", status)

    def job(self, name: str, params: dict, timeout: float = 600.0) -> dict:
        """Run a named job (see ``_run_job``) in the worker; a dict with ``skipped`` when
        it could not be done."""
        if not self.alive:
            self.start()
        self.conn.send(("job", name, params))
        if not self.conn.poll(timeout):
            self.kill()
            return {"skipped": f"{name} did not finish within {timeout:g} s"}
        try:
            _kind, result = self.conn.recv()
        except (EOFError, OSError):
            return {"skipped": f"the worker died while running {name}"}
        return result

    def torch_timing(self, shape, training: bool, reps: int, timeout: float = 600.0) -> dict:
        """PyTorch's default module on ``shape``, timed inside the worker (same process as the
        cuDNN cells); a dict with ``skipped`` when that cannot be done."""
        return self.job("torch", torch_params(shape, training, reps), timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)

    def close(self) -> None:
        if self.alive:
            try:
                self.conn.send(None)
                self.proc.join(10)
            except (OSError, BrokenPipeError):
                pass
        self.kill()


def torch_params(shape, training: bool, reps: int) -> dict:
    return {"cell": shape.cell.name, "seq": shape.seq_length, "layers": shape.num_layers,
            "hidden": shape.hidden_size, "batch": shape.mini_batch, "input_size": shape.input,
            "bidirectional": shape.bidirectional, "training": training, "reps": reps}


def start_worker(cudnn_path: str | None, options: dict) -> tuple[Worker, dict]:
    """A started :class:`Worker` and its ready message; a missing libcudnn becomes
    :class:`bindings.errors.LibraryNotFound` (one line, exit 2 at the command line)."""
    worker = Worker(cudnn_path, options)
    try:
        return worker, worker.start()
    except WorkerStartFailed as exc:
        if exc.library_missing:
            from bindings.errors import LibraryNotFound
            raise LibraryNotFound(str(exc)) from None
        raise
