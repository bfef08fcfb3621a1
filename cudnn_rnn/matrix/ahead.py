"""PERSIST_DYNAMIC cells built ahead, beside the cells before them.

cudnnBuildRNNDynamic compiles a PERSIST_DYNAMIC cell's kernels (NVRTC) for its RNN
descriptor and batch: 0.1-2.8 s a cell on the H200, 87 of the 214 s the cells of
``make matrix`` took there (cuDNN 9.19; a second build of the same configuration is not
free either). The call needs the descriptor only, so a worker's :class:`Builder` threads, each
with its own cuDNN handle, set the descriptors of the next PERSIST_DYNAMIC cells the
supervisor names (:meth:`Builder.want`) exactly as the cell's flow sets its own (the flow's
handle, dropout and rnn_descriptor stages, on a flow of the cell's configuration) and build
them while the worker runs the cells before. At its build_dynamic stage the cell's flow
takes its built descriptor (:meth:`Builder.take`, waiting for a build under way) and runs
its calls on it; its notes say so and how long the build took. A cell nobody built, or whose
build ahead failed, calls cudnnBuildRNNDynamic itself, so every refusal is recorded by the
cell's own flow.

Nothing is built while a cell is timed (:meth:`Builder.quiet`). The builders' cuDNN
objects are not counted by :func:`~cudnn_rnn.engine.descriptors.live_objects` (the cells'
leak check), and their device bytes are read with the pool's count (:meth:`Builder.measured`)
for the same check. A builder that killed the process shows as the running cell's CRASH
(one worker), or, in a worker of the PERSIST_DYNAMIC cells' own, in the next such cell's
notes: either names the cells the worker had been named ahead, which then build in their
own cells.
"""
from __future__ import annotations

import bisect
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass

from cudnn_rnn.bindings.enums import RNNAlgo
from cudnn_rnn.engine.gpu import held_bytes
from cudnn_rnn.matrix.beside import Alone, hold_key

THREADS = 2  # builder threads (cuDNN's builds compile on the host). More did not build
             # faster: with 4 threads and 256 cells ahead (both changed at once) the H200
             # matrix took 257 s against 219 s (tree d641bc2), its builds 204 s of builder
             # time against 101 s (they take turns, each slower) and the cells' verify phase
             # 33 s against 22 s
DEPTH = 64   # PERSIST_DYNAMIC cells the supervisor names ahead of the running one (each
             # build holds its dropout states until its cell runs: 6.2 MiB on the H200)
HOLD_POLL_S = 0.01  # how often a held builder looks whether the supervisor let it go on
OWN_WORKER_DEPTH = 256  # the same in a worker of their own (matrix.beside), whose builders
             # work beside the other worker's cells. At 64 (H100, 97f56e6) they built 105 s in
             # a 180 s run of cells, 35 s of it their own worker's quiet, and its cells still
             # waited 26.5 s for builds: about 40 s unbuilt, for want of named cells while the
             # other worker ran long stretches without one, or waiting to set up beside a
             # measured cell (not told apart then; a build's note now says the wait). 1.6 GiB
             # Tried and not kept (H100, tree d170c59): every PERSIST_DYNAMIC cell after all
             # the others, 512 named at once. The builds' memory ran its worker out (4 cells
             # CRASH, OutOfMemoryError near 1.9 GB allocated), its cells took 123 s against 81 s
             # in spec order (where they waited 30.8 s for builds, at b126a7a), and the run
             # passed 260 s against 211 s


@dataclass
class Built:
    """What a builder made of one cell: its flow (stopped after rnn_descriptor, the RNN
    descriptor built) or why not (``error``), and the build's seconds."""
    flow: object | None
    seconds: float
    error: str | None = None
    waited: float = 0.0  # of ``seconds``, before its set-up, for another worker's cell

    def note(self) -> str:
        if self.flow is not None:
            waited = (f", {self.waited:.3f} s of it waiting to set up beside a cell measured "
                      "in the other worker" if self.waited >= 0.001 else "")
            return (f"cudnnBuildRNNDynamic called ahead ({self.seconds:.3f} s{waited}, a "
                    "builder thread's handle) on a descriptor set as this cell's; the cell's "
                    "calls ran on it")
        return f"the build ahead failed ({self.error}); cudnnBuildRNNDynamic called here"


class Builder:
    """Builds the descriptors of the cells :meth:`want` names, ``threads`` at a time."""

    def __init__(self, lib, threads: int = THREADS, beside=None):
        self.lib = lib
        self.beside = beside if beside is not None else Alone()  # the other worker's cells
        self._device = _current_device()  # the builders' GPU: the caller's, not device 0
        self._cond = threading.Condition()
        self._wanted: list = []        # (cell id, config), in the order they will run
        self._done: dict = {}          # cell id -> Built
        self._building: dict = {}      # cell id -> its flow once set up (None before)
        self._taking: set = set()      # cells the worker waits for
        self._quiet = self._closed = False
        self._threads = [threading.Thread(target=self._serve, daemon=True,
                                          name=f"cudnn-rnn-builder-{i}") for i in range(threads)]
        for t in self._threads:
            t.start()

    # ------------------------------------------------------------------ the worker's side
    def want(self, cells) -> None:
        """The cells to have built, ``(id, config)`` in running order; built ones no longer
        named are destroyed."""
        with self._cond:
            self._wanted = list(cells)
            names = {cid for cid, _cfg in self._wanted} | self._taking
            for cid in [c for c in self._done if c not in names]:
                _close(self._done.pop(cid))
            self._cond.notify_all()

    def take(self, cell_id: str) -> Built | None:
        """The cell's build (waiting for one under way), now the caller's; None when none
        was begun."""
        with self._cond:
            self._taking.add(cell_id)
            while cell_id in self._building:
                self._cond.wait()
            self._taking.discard(cell_id)
            self._wanted = [w for w in self._wanted if w[0] != cell_id]
            return self._done.pop(cell_id, None)

    def adopt(self, flow, cell_id: str) -> Built | None:
        """The cell's build (:meth:`take`), which ``flow`` goes on with when it succeeded
        (:meth:`~cudnn_rnn.engine.flow.RNNFlow.adopt`); returned either way, for the
        caller's record (``error`` says why a build ahead failed: the flow then builds its
        own). None when none was begun."""
        built = self.take(cell_id)
        if built is not None and built.flow is not None:
            flow.adopt(built)
        return built

    @contextmanager
    def quiet(self):
        """No build runs inside (one under way is waited for), e.g. while a cell is timed."""
        with self._cond:
            self._quiet = True
            self._cond.wait_for(lambda: not self._building)
        try:
            yield
        finally:
            with self._cond:
                self._quiet = False
                self._cond.notify_all()

    def close(self, wait_s: float = 5.0) -> None:
        """Begin no build, wait up to ``wait_s`` for those under way (less than the
        supervisor gives a worker to end), destroy the built; one finishing later is
        destroyed as it finishes."""
        with self._cond:
            self._closed = True
            self._cond.wait_for(lambda: not self._building, wait_s)
            for cid in list(self._done):
                _close(self._done.pop(cid))
            self._cond.notify_all()

    def measured(self, used_bytes) -> tuple[int, int]:
        """(``used_bytes()``, the bytes of GPU memory the builders hold: their flows' dropout
        states), read together, while no builder allocates or frees."""
        with self._cond:
            flows = [b.flow for b in self._done.values() if b.flow is not None]
            flows += [f for f in self._building.values() if f is not None]
            return int(used_bytes()), held_bytes(a for f in flows for a in f.buf.values())

    # ------------------------------------------------------------------ the threads
    def _next(self):
        """(the first wanted cell nobody has built or is building, or None; the hold read):
        under the lock; while the supervisor holds the builders (:meth:`~.beside.Beside.hold`)
        only the cell it holds them for, the worker's next, is a candidate."""
        if self._quiet or self._closed:
            return None, 0
        key = self.beside.held_for()
        return next(((cid, cfg) for cid, cfg in self._wanted
                     if cid not in self._done and cid not in self._building
                     and (not key or hold_key(cid) == key)), None), key

    def _serve(self) -> None:
        handle = self._open()
        try:
            self._loop(handle)
        finally:
            self._shut(handle)

    def _loop(self, handle) -> None:
        while True:
            with self._cond:
                while True:
                    job, key = self._next()
                    # counted as under way, unless held for another cell since the look
                    if job is not None and self.beside.begin_build(job[0]):
                        break
                    if self._closed:
                        return
                    # held: look again soon (the supervisor's release sends no message)
                    self._cond.wait(HOLD_POLL_S if key or job is not None else None)
                cid, cfg = job
                self._building[cid] = None
            built, flow, started = None, None, time.perf_counter()
            try:
                # what allocates, under the lock (see measured); GPU work: not beside a
                with self.beside.preparing() as waited, self._cond:  # cell measured elsewhere
                    flow = self._building[cid] = self._prepare(handle, cfg)
                with self.beside.compiling():
                    self._compile(handle, flow, cfg)
                built = Built(flow, time.perf_counter() - started, waited=waited)
            except Exception as exc:  # said in the cell's notes; the cell then builds itself
                built = Built(None, time.perf_counter() - started, f"{type(exc).__name__}: {exc}")
            finally:  # whatever happened, nobody waits for this cell any longer
                with self._cond:
                    self.beside.end_build()
                    if flow is not None and (built is None or built.flow is None):
                        flow.close()  # set up, then its build failed
                    self._building.pop(cid, None)
                    if built is not None and not self._closed and (
                            cid in self._taking or any(c == cid for c, _ in self._wanted)):
                        self._done[cid] = built
                    elif built is not None:
                        _close(built)
                    self._cond.notify_all()

    def _open(self):  # pragma: no cover - a GPU thread
        """The thread's cuDNN handle, on the GPU current where the builder was made (a new
        thread starts on device 0); its objects are not the cells' (leak check)."""
        # numpy, through descriptors: the probe's parent imports this module
        from cudnn_rnn.engine.descriptors import Handle, uncounted
        if self._device is not None:
            import cupy
            cupy.cuda.Device(self._device).use()
        uncounted()
        return Handle(self.lib)

    def _shut(self, handle) -> None:  # pragma: no cover - a GPU thread
        """The thread's handle destroyed as it ends (a process may make many builders)."""
        handle.close()

    def _prepare(self, handle, cfg):  # pragma: no cover - a GPU thread
        """A flow of ``cfg`` on the thread's handle, set up as the cell's own is up to its
        RNN descriptor (RuntimeError naming the call where it was refused)."""
        from cudnn_rnn.engine.flow import RNNFlow  # numpy: see _open
        flow = RNNFlow(cfg, self.lib, device=True, init="random", handle=handle)
        result = flow.run(until="rnn_descriptor")
        if result.failure is not None:
            flow.close()
            raise RuntimeError(f"{result.failure.call} returned {result.failure.status}")
        return flow

    def _compile(self, handle, flow, cfg) -> None:  # pragma: no cover - a GPU thread
        self.lib.cudnnBuildRNNDynamic(handle, flow.rnn, cfg.mini_batch)
        flow.stream.synchronize()  # the dropout states are set on the builder's stream
        handle.set_stream(0)  # not left on the flow's stream, which the cell will destroy


def _current_device() -> int | None:
    """The CUDA device current in this thread, or None without CuPy or a GPU."""
    try:
        import cupy
        return cupy.cuda.runtime.getDevice()
    except Exception:  # noqa: BLE001 - no CuPy, no driver, no device: the builders fail alone
        return None


def _close(built: Built) -> None:
    if built.flow is not None:
        built.flow.close()


class Schedule:
    """The supervisor's side: which PERSIST_DYNAMIC cells of ``cells`` (in running order)
    come from a given one on."""

    def __init__(self, cells, depth: int = DEPTH):
        self.depth = depth
        self._dynamic = [(i, c) for i, c in enumerate(cells)
                         if c.config.algo == RNNAlgo.PERSIST_DYNAMIC]
        self._index = [i for i, _c in self._dynamic]

    def starting(self, index: int, leave_out=lambda cell: False) -> list:
        """``(id, config)`` of the first ``depth`` PERSIST_DYNAMIC cells from
        ``cells[index]`` on that ``leave_out`` keeps: what a worker should have built when
        it runs that one."""
        found = []
        for _i, cell in self._dynamic[bisect.bisect_left(self._index, index):]:
            if len(found) == self.depth:
                break
            if not leave_out(cell):
                found.append((cell.id, cell.config))
        return found


class Order:
    """The cells in running order: the order of ``cells``, except that a PERSIST_DYNAMIC cell
    that would wait for builds under way (``waits(cell)``: its worker's own cells are measured
    only once they are done, :meth:`Builder.quiet`) lets the other cells after it run first,
    until those builds are done or none of the others is left. While such a cell is the next
    in the cells' order and others are left, ``hold(cell)`` keeps its worker's builders from
    beginning any other build (``hold(None)`` lets them go on). Each kind keeps its own
    order, so a variant still runs after the cell it varies (both have one algorithm); a cell
    ``skip`` names (a variant whose base was refused, which will not run) is yielded as it
    comes.

    Measured before it (H100, tree 2550073): the PERSIST_DYNAMIC cells waited 21.7 s for
    builds of later cells under way in a 152 s run of cells (27.2 s at da68c26), while the
    other worker's cells could have run; with it (H200, tree 84f7136, a fresh machine) 0.0 s
    in a 125.9 s run of cells, ``make matrix VENV=`` 156 s from start to report.

    Iterating yields ``(index in cells, cell)``; :meth:`dynamic_head` is where the
    PERSIST_DYNAMIC cells go on from (the one yielded last, while it runs);
    :attr:`let_first` counts the cells run ahead of a waiting one (not those skipped)."""

    def __init__(self, cells, waits=lambda cell: False, hold=lambda cell: None,
                 skip=lambda cell: False):
        self._cells = list(cells)
        self._waits, self._hold, self._skip = waits, hold, skip
        dynamic = [c.config.algo == RNNAlgo.PERSIST_DYNAMIC for c in self._cells]
        self._dyn = [i for i, d in enumerate(dynamic) if d]
        self._other = [i for i, d in enumerate(dynamic) if not d]
        self._d = self._o = 0
        self.let_first = 0

    def dynamic_head(self) -> int:
        """The index of the PERSIST_DYNAMIC cell running, or else the next to run (the
        cells' count when none is left)."""
        return self._dyn[self._d] if self._d < len(self._dyn) else len(self._cells)

    def __iter__(self):
        while self._d < len(self._dyn) or self._o < len(self._other):
            d = self._dyn[self._d] if self._d < len(self._dyn) else None
            o = self._other[self._o] if self._o < len(self._other) else None
            if d is not None and (o is None or d < o):
                cell = self._cells[d]
                skipped = self._skip(cell)
                if not skipped:  # none to run first: the builders go on ahead meanwhile
                    self._hold(cell if o is not None else None)
                if skipped or o is None or not self._waits(cell):
                    yield d, cell
                    self._d += 1
                    continue
                self.let_first += not self._skip(self._cells[o])  # one that runs
            else:
                self._hold(None)
            yield o, self._cells[o]
            self._o += 1
