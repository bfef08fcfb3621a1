"""Cells run in a separate worker process, so one that kills it cannot kill the matrix.

The supervisor (:class:`Worker`) sends one cell at a time over a pipe; the worker
acknowledges it (``("started", id)``), runs it and answers ``("record", record, exiting)``.
The acknowledgement ties a death to a cell: a worker that dies before it never started the
cell, which goes to a fresh worker; one that dies after it died on that cell (CRASH, with
the signal or exit status). With no record within the per-cell timeout the worker is killed
and the cell is TIMEOUT.

A worker retires after a cell whose outcome leaves its state in doubt, and says so with
``exiting``: a CRASH (a CUDA error, which may be sticky: the context is checked after every
cell on a GPU) or an ERROR (an exception of this tool's own code, recorded with its type and
message: a bug to report, not a cuDNN outcome). The supervisor then waits for that process
to end, so the next cell always starts in a live worker. Workers are started with ``spawn``:
the parent never touches CUDA, the worker owns the only context.

``("ahead", [(id, config), ...])`` (no answer) names the PERSIST_DYNAMIC cells to come,
which its :class:`~cudnn_rnn.matrix.ahead.Builder` builds beside the cells before them (the
probe's are a second worker's: :mod:`.beside`). Faults a test injects: :mod:`.faults`.
"""
from __future__ import annotations

import atexit
import multiprocessing as mp
import os
import signal
import time

from cudnn_rnn.matrix import jobs
from cudnn_rnn.matrix.faults import check_fault, fault, inject_cell_fault, inject_process_fault
from cudnn_rnn.matrix.loadable import ADVICE, library_survives, signal_name
from cudnn_rnn.matrix.spawning import sigint_ignored_by_child

ACK_TIMEOUT_S = 60.0  # an idle worker acknowledges a cell at once; longer means it is gone
TIMED_OUT, GONE = object(), object()  # what Worker._receive returns instead of a message


class WorkerStartFailed(RuntimeError):
    def __init__(self, message: str, library_missing: bool = False):
        super().__init__(message)
        self.library_missing = library_missing


def _context_error(cupy) -> str | None:
    """The CUDA context's sticky error, if the last cell left one (None when healthy)."""
    from cudnn_rnn.engine.gpu import cuda_errors
    try:
        cupy.cuda.runtime.deviceSynchronize()
    except cuda_errors(cupy) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _worker_main(conn, cudnn_path, options, generation: int = 1) -> None:  # pragma: no cover - runs in the child
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor decides when to stop
    try:  # imports too: a spawned worker reports a broken install over the pipe, in one line
        from cudnn_rnn import bindings
        from cudnn_rnn.engine import gpu
        from cudnn_rnn.engine.descriptors import Handle, live_objects
        from cudnn_rnn.engine.values import ValuesCache
        from cudnn_rnn.matrix.ahead import Builder
        from cudnn_rnn.matrix.execute import kept_handle, run_cell
        from cudnn_rnn.matrix.references import ReferenceCache
        from cudnn_rnn.matrix.record import Record
        from cudnn_rnn.matrix.seed_replay import replay
        lib = bindings.load(cudnn_path)
        device = gpu.available() and not options.get("no_device")
        conn.send(("ready", {"library": lib.describe(), "device": gpu.device_info(),
                             "symbols": lib.symbol_report(), "pid": os.getpid(),
                             "device_stages": device, "seed_replay": replay(lib, device)}))
    except Exception as exc:
        missing = type(exc).__name__ == "LibraryNotFound"
        conn.send(("failed", f"{exc}" if missing else f"{type(exc).__name__}: {exc}", missing))
        return
    cache = ReferenceCache.for_worker(options)
    values = (ValuesCache(size=options.get("values_cache_size", 2))
              if options.get("reuse_values") else None)
    cupy = pool = handle = builder = None
    if device:
        import cupy  # only where there is a GPU
        gpu.plain_reductions_here()  # CuPy's CUB block reductions compile slowly
        pool = cupy.get_default_memory_pool()
    cuda_errors = gpu.cuda_errors(cupy)
    info = {"cudnn_version": lib.version_string, "library_path": lib.describe()["library_path"]}
    while True:
        try:
            cell = conn.recv()
        except (EOFError, OSError):
            return
        if cell is None:
            return
        if isinstance(cell, tuple) and cell[0] == "ahead":
            if device and (builder is not None or cell[1]):
                if builder is None:
                    builder = Builder(lib, beside=options.get("beside"))
                    atexit.register(builder.close)  # no build left inside cuDNN at exit
                builder.want(cell[1])
            continue
        if isinstance(cell, tuple) and cell[0] == "job":
            _, name, params = cell
            try:
                call = jobs.called(name, params)
            except (LookupError, TypeError) as exc:  # asked wrongly: this tool's mistake
                result = {"error": f"{_short(name)}: {type(exc).__name__}: {exc}"}
            else:
                try:
                    result = call()
                except Exception as exc:  # a device or library refusing: the run goes on;
                    what = f"{_short(name)}: {type(exc).__name__}: {exc}"  # else a bug, raised
                    result = {"skipped": f"{what.replace(':', ' failed:', 1)}"} \
                        if isinstance(exc, jobs.refusals(cupy)) else {"error": what}
            broken = _context_error(cupy) if cupy is not None else None
            if broken is not None:  # the next cell must not inherit a broken context
                result = {"skipped": f"{_short(name)} left the CUDA context in error: {broken}"}
            conn.send(("job", result, broken is not None))
            if broken is not None:
                return
            continue
        kind, _arg = fault(cell.id)
        if kind == "exit" and generation == 1:
            os._exit(0)  # gone before acknowledging: the cell was never started
        conn.send(("started", cell.id))
        inject_process_fault(kind)
        try:
            inject_cell_fault(kind, cupy)
            if device and handle is None:  # one cuDNN handle per worker, as applications keep
                try:
                    handle = Handle(lib)
                except bindings.errors.CudnnError:
                    handle = None  # each flow then calls cudnnCreate and records what it says
            reps, kinds = options.get("reps", 20), options.get("kinds")
            if cell.base is not None:  # a variant: read against its base, timed lighter
                reps = options.get("variant_reps", reps)
                kinds = options.get("variant_kinds", kinds)
            rec = run_cell(cell, lib, device=device, reps=reps, handle=handle,
                           time_it=options.get("time", True), cache=cache, values=values,
                           kinds=kinds, budget_s=options.get("budget_s"),
                           graphs=options.get("graphs", True), builder=builder,
                           beside=options.get("beside"))
        except cuda_errors as exc:  # outside a stage (timing, verification): still CUDA's
            rec = Record.unfinished(cell, info, "CRASH", "CUDA_ERROR", f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # an error of this tool's own code
            rec = Record.tool_error(cell, info, exc)
        if cupy is not None:
            broken = _context_error(cupy)
            if broken is not None:
                rec.context_lost(f"the CUDA context is in error after this cell: {broken}")
        exiting = rec.outcome in ("CRASH", "ERROR")
        handle = kept_handle(handle, rec, exiting, bindings.errors.CudnnError)
        # what the cell left alive (not the worker's handle, weights and references kept)
        # (and not the builders': read with the pool's count while none allocates)
        kept, used = cache.on_device() + (values.on_device() if values is not None else 0), None
        if pool is not None and not exiting:
            used, built = (builder.measured(pool.used_bytes) if builder is not None
                           else (int(pool.used_bytes()), 0))
            used -= kept + built
        rec.add_worker(live_objects() - (handle is not None), used, os.getpid())
        conn.send(("record", rec, exiting))
        if exiting:
            return  # the next cell gets a fresh process


def _short(job_name: str) -> str:  # a job's function name, as its failures say it
    return job_name.rpartition(":")[2]


class Worker:
    """A supervised worker process; :meth:`run` always returns a record of that cell.

    ``started`` counts the processes started, ``lost`` those that ended other than by
    :meth:`close` (a crash, a kill after a timeout, or retirement after a CRASH or ERROR
    record), ``restarts`` the processes started to replace a lost one. Every replacement
    must report the same library and device stages as the first worker, or the run stops:
    its records would otherwise mix two setups."""

    def __init__(self, cudnn_path: str | None, options: dict, start_timeout: float = 300.0):
        self.cudnn_path = cudnn_path
        self.options = options
        self.start_timeout = start_timeout
        self.proc = None
        self.conn = None
        self.info: dict | None = None
        self.started = 0
        self.lost = 0
        self._named = None  # (workers started, cell ids) last named ahead

    @property
    def restarts(self) -> int:
        return max(self.started - 1, 0)

    def start(self) -> dict:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self.started += 1
        if self.options.get("beside") is not None:  # what a process before left counted
            self.options["beside"].clear()
        self.proc = ctx.Process(target=_worker_main,
                                args=(child, self.cudnn_path, self.options, self.started),
                                daemon=True, name="cudnn-rnn-worker")
        with sigint_ignored_by_child():
            self.proc.start()
        child.close()
        self.conn = parent
        if not parent.poll(self.start_timeout):
            self._drop(counted=False)
            raise WorkerStartFailed(f"the worker did not start within {self.start_timeout:.0f} s")
        try:
            kind, *payload = parent.recv()
        except (EOFError, OSError):
            self.proc.join(5)
            status = signal_name(self.proc.exitcode)
            self._drop(counted=False)
            named = self.cudnn_path or os.environ.get("CUDNN_LIBRARY")
            raise WorkerStartFailed(f"the worker died while starting ({status})" + (
                f"; if loading {named} ended it: {ADVICE}" if named else "")) from None
        if kind == "failed":
            self._drop(counted=False)
            raise WorkerStartFailed(payload[0], payload[1])
        info = payload[0]
        if self.info is not None and not same_setup(info, self.info):
            self._drop(counted=False)
            raise WorkerStartFailed(f"a fresh worker found another setup ({_setup(info)}) than "
                                    f"the first ({_setup(self.info)}); the run stops here")
        self.info = info
        return info

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.is_alive()

    def revive(self) -> str | None:
        """A fresh process where this one ended on its own since its last cell (counted
        lost): how it ended; None where it is alive, or was never started or was closed."""
        if self.conn is None or self.proc is None or self.proc.is_alive():
            return None
        status = signal_name(self.proc.exitcode)
        self._ensure()
        return status

    def _drop(self, counted: bool = True, wait_s: float = 5.0) -> None:
        """Be done with the current process: wait up to ``wait_s`` for it to end, kill it if
        it has not, and forget its pipe; ``counted`` adds it to the lost workers."""
        if self.proc is not None:
            self.proc.join(wait_s)
            if self.proc.is_alive():
                self.proc.kill()
                self.proc.join(5)
        if counted:
            self.lost += 1
        self.conn = None
        if self.options.get("beside") is not None:  # the counts of a process now gone
            self.options["beside"].clear()

    def _ensure(self) -> None:
        """A live worker with a pipe; one that ended on its own is counted lost and replaced."""
        if self.conn is not None and self.alive:
            return
        if self.conn is not None:  # it ended between cells, not on any cell of ours
            self._drop()
        elif self.proc is not None and self.proc.is_alive():  # dropped but not yet reaped
            self._drop(counted=False, wait_s=0)
        self.start()

    def _receive(self, timeout: float):
        """The next message within ``timeout`` seconds, or :data:`TIMED_OUT`, or :data:`GONE`
        (the worker ended). A message already in the pipe is read even if the worker has
        since exited, so nothing it sent before ending is lost."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            alive = self.proc.is_alive()  # asked first: what a dead worker sent is in the pipe
            if self.conn.poll(max(0.0, min(remaining, 0.2)) if alive else 0):
                try:
                    return self.conn.recv()
                except (EOFError, OSError):
                    return GONE
            if not alive:
                return GONE
            if remaining <= 0:
                return TIMED_OUT

    def _acknowledged(self, cell) -> bool:
        """Send ``cell`` and wait for the worker to start it; False if the worker was gone
        (it never started the cell)."""
        try:
            self.conn.send(cell)
        except (BrokenPipeError, OSError):
            self._drop()
            return False
        message = self._receive(ACK_TIMEOUT_S)
        if message == ("started", cell.id):
            return True
        self._drop(wait_s=0 if message is TIMED_OUT else 5)
        return False

    def run(self, cell, timeout: float):
        """The :class:`~cudnn_rnn.matrix.record.Record` of ``cell``: the worker's, or one
        this side makes of a timeout or a crash."""
        from cudnn_rnn.matrix.record import Record
        for _attempt in range(3):
            self._ensure()
            if self._acknowledged(cell):
                break
        else:
            raise WorkerStartFailed(f"three fresh workers ended before starting cell {cell.id}")
        ident = {"cudnn_version": self.info["library"]["cudnn_version"],
                 "library_path": self.info["library"]["library_path"]}
        message = self._receive(timeout)
        if message is TIMED_OUT:
            self._drop(wait_s=0)
            return Record.unfinished(cell, ident, "TIMEOUT", "TIMEOUT", f"no result within the "
                                     f"{timeout:g} s per-cell timeout; the worker was killed")
        if message is not GONE:
            _kind, rec, exiting = message
            if exiting:
                self._drop(wait_s=30)  # it retires after this cell: wait until it has
            return rec
        self.proc.join(5)
        status = signal_name(self.proc.exitcode)
        self._drop()
        return Record.unfinished(cell, ident, "CRASH", status,
                                 f"the worker process died ({status}) while running this cell")

    def ahead(self, cells: list) -> None:
        """Name the PERSIST_DYNAMIC cells to come (``(id, config)``) to a live worker, which
        builds them beside the cells before them (no answer; sent when the cells or the
        worker changed; a dead worker is left to :meth:`run`)."""
        if self.alive and self.conn is not None:
            named = (self.started, tuple(cid for cid, _cfg in cells))  # this worker's
            if named == self._named:
                return
            try:
                self.conn.send(("ahead", cells))
                self._named = named
            except (BrokenPipeError, OSError):
                pass

    def job(self, name: str, params: dict, timeout: float = 600.0) -> dict:
        """Run the job ``name`` (:mod:`.jobs`) in the worker; a dict with ``skipped`` when
        it could not be done."""
        self._ensure()
        try:
            self.conn.send(("job", name, params))
        except (BrokenPipeError, OSError):
            self._drop()
            return {"skipped": f"the worker was gone before {name} started"}
        message = self._receive(timeout)
        if message is TIMED_OUT or message is GONE:
            self._drop(wait_s=0 if message is TIMED_OUT else 5)
            return {"skipped": f"{name} did not finish within {timeout:g} s"
                    if message is TIMED_OUT else f"the worker died while running {name}"}
        _kind, result, exiting = message
        if exiting:
            self._drop(wait_s=30)
        if "error" in result:  # the job was asked wrongly: raised here, never recorded
            raise jobs.JobFailed(result["error"])
        return result

    def close(self, wait_s: float = 10.0) -> None:
        """Ask the worker to end, and kill it if it has not within ``wait_s`` (busy on a cell)."""
        if self.alive and self.conn is not None:
            try:
                self.conn.send(None)
            except (OSError, BrokenPipeError):
                pass
        if self.proc is not None:
            self._drop(counted=False, wait_s=wait_s)


def _setup(info: dict) -> tuple:
    """What every worker of one run must agree on (:func:`same_setup`)."""
    return (info["library"].get("library_path"), info["library"].get("cudnn_version"),
            info["device_stages"], info["device"].get("gpu"))


def same_setup(info: dict, other: dict) -> bool:
    return _setup(info) == _setup(other)


def start_worker(cudnn_path: str | None, options: dict) -> tuple[Worker, dict]:
    """A started :class:`Worker` and its ready message; a missing libcudnn becomes
    :class:`cudnn_rnn.bindings.errors.LibraryNotFound` (one line, exit 2 at the command line),
    a named one that ends its loader :class:`BadInput` (:func:`library_survives`)."""
    check_fault()
    library_survives(cudnn_path)
    worker = Worker(cudnn_path, options)
    try:
        return worker, worker.start()
    except WorkerStartFailed as exc:
        if exc.library_missing:
            from cudnn_rnn.bindings.errors import LibraryNotFound
            raise LibraryNotFound(str(exc)) from None
        raise
