"""Two workers, one GPU: what the matrix's workers tell each other across processes.

With a GPU the probe's PERSIST_DYNAMIC cells go to a worker of their own, whose builder
threads (:mod:`.ahead`) compile the next cells' kernels the whole run long, also while the
other worker verifies and times its cells: in one process the builds had to stop for every
timed call (a build beside a timed call slowed the plain, launch-bound calls, median 1.27x),
so about 100 s of builds and 60 s of timing could not overlap and kept ``make matrix``
above 180 s on the H200. The supervisor still runs one cell at a time, so the two workers'
cells never share the GPU; what can meet on it is a builder's GPU set-up (the dropout
states' initialisation, a kernel launch in the builder's context) and a cell being
verified or timed in the other process. :class:`Beside` keeps those apart, and counts the
builds compiled while a cell was measured, so a run shows what the other process's
compiles (host work only) did to the timed calls beside them. It also lets the supervisor
hold a worker's builders (:meth:`Beside.hold`: none begins a build but of that worker's next
cell) and see their builds under way, so that its next cell, which waits for them before it
is measured, runs once they are done, the other worker's cells meanwhile
(:class:`~.ahead.Order`).
"""
from __future__ import annotations

import copy
import time
import zlib
from contextlib import contextmanager

POLL_S = 0.0005  # how often a side waiting for the other looks again
LOCK_S = 5.0     # a hold of the lock is a few integer updates: one this long is a holder's
                 # that was killed inside it
SLOTS = 2        # the workers of one run: 0 the cells', 1 the PERSIST_DYNAMIC cells'


class Beside:
    """Shared between the workers of one run (made from the ``spawn`` context before they
    start, handed to each in its options, with the worker's ``slot``). Each worker's counts
    are its own: a worker killed inside (a TIMEOUT, a crash) cannot leave the other waiting,
    since the process started in its place clears them first (:meth:`clear`). A kill inside
    the lock itself (a few integer updates) leaves it held for good: past ``lock_s`` a side
    gives up on it (:attr:`lost`, for this process from then on) and reads and writes the
    counts without it, so the run goes on instead of hanging, and each measured cell after
    says that the set-ups were no longer kept apart from it (``lock_lost``)."""

    def __init__(self, ctx, slot: int = 0, lock_s: float = LOCK_S):
        self.slot = slot
        self.lock_s = lock_s
        self.lost = False  # this process gave up on the lock (a holder was killed inside it)
        self._lock = ctx.Lock()
        self._measuring = ctx.Array("i", SLOTS, lock=False)  # cells being verified or timed
        self._preparing = ctx.Array("i", SLOTS, lock=False)  # builders setting a flow up
        self._compiling = ctx.Array("i", SLOTS, lock=False)  # builds in cudnnBuildRNNDynamic
        self._compiled = ctx.Value("i", 0, lock=False)       # builds finished, ever
        self._builds = ctx.Array("i", SLOTS, lock=False)     # builds taken up, not yet done
        self._hold = ctx.Array("q", SLOTS, lock=False)       # the supervisor's: 0, or the one
        #                                                      cell a build may begin for

    def at(self, slot: int) -> "Beside":
        """The same shared counts, as seen by the worker of ``slot``."""
        other = copy.copy(self)
        other.slot = slot
        return other

    @contextmanager
    def _held(self):
        """The lock, or nothing once it was held past ``lock_s`` (:attr:`lost`)."""
        if self.lost or not self._lock.acquire(timeout=self.lock_s):
            self.lost = True
            yield
            return
        try:
            yield
        finally:
            self._lock.release()

    def clear(self) -> None:
        """This slot's counts to zero (before its worker process starts, or starts again)."""
        with self._held():
            for counts in (self._measuring, self._preparing, self._compiling, self._builds):
                counts[self.slot] = 0

    def hold(self, cell_id: str | None) -> None:
        """(The supervisor) ``cell_id``, the worker's next cell: this slot's builders begin
        no build but of it (:meth:`held_for`) until held for another or None (go on as
        named)."""
        with self._held():
            self._hold[self.slot] = hold_key(cell_id) if cell_id is not None else 0

    def held_for(self) -> int:
        """(A builder) 0 when not held, else the :func:`hold_key` of the one cell it may
        build."""
        with self._held():
            return self._hold[self.slot]

    def begin_build(self, cell_id: str) -> bool:
        """(A builder) count a build of ``cell_id`` as under way (:meth:`builds_under_way`,
        from the moment it is taken up, its wait to set up included) unless the supervisor
        holds the builders for another cell: False then, and nothing counted. One step under
        the lock, so a supervisor that holds and then reads the count sees every build that
        began before the hold."""
        with self._held():
            key = self._hold[self.slot]
            if key and key != hold_key(cell_id):
                return False
            self._add(self._builds, 1)
            return True

    def end_build(self) -> None:
        """(A builder) a build :meth:`begin_build` counted is done, or failed."""
        with self._held():
            self._add(self._builds, -1)

    def builds_under_way(self) -> int:
        with self._held():
            return self._builds[self.slot]

    def _add(self, counts, by: int) -> None:  # under the lock
        counts[self.slot] += by

    def _until(self, ready, then) -> float:
        """Wait until ``ready()`` holds, then ``then()``, both under the lock; the seconds
        waited."""
        started = time.perf_counter()
        while True:
            with self._held():
                if ready():
                    then()
                    return time.perf_counter() - started
            time.sleep(POLL_S)

    @contextmanager
    def measuring(self):
        """Around a cell's verification and timing: no builder starts a GPU set-up inside
        (one under way is waited for: ``waited`` seconds). Yields a dict whose ``builds``
        is set on leaving: the builds that were compiling at some moment inside (finished
        inside, or under way on leaving), in any process; and ``lock_lost`` where the lock
        was given up on (:attr:`lost`): the set-ups were then not kept apart for sure."""
        counts = {}
        with self._held():
            self._add(self._measuring, 1)
        try:
            counts["waited"] = self._until(lambda: sum(self._preparing) == 0,
                                           lambda: counts.update(start=self._compiled.value))
            yield counts
        finally:
            with self._held():
                self._add(self._measuring, -1)
                if "start" in counts:  # finished inside, or still under way on leaving
                    counts["builds"] = (self._compiled.value - counts.pop("start")
                                        + sum(self._compiling))
            if self.lost:
                counts["lock_lost"] = True

    @contextmanager
    def preparing(self):
        """Around a builder's GPU set-up of a flow: begun only while no cell is measured.
        Yields the seconds it waited for one."""
        waited = self._until(lambda: sum(self._measuring) == 0,
                             lambda: self._add(self._preparing, 1))
        try:
            yield waited
        finally:
            with self._held():
                self._add(self._preparing, -1)

    @contextmanager
    def compiling(self):
        """Around a build (host work: cuDNN's NVRTC compiles), counted for :meth:`measuring`."""
        with self._held():
            self._add(self._compiling, 1)
        try:
            yield
        finally:
            with self._held():
                self._add(self._compiling, -1)
                self._compiled.value += 1


def hold_key(cell_id: str) -> int:
    """A cell id as a shared integer, never 0 (not held). Two ids of one key would only let
    a held builder begin the other's build too."""
    return zlib.crc32(cell_id.encode()) + 1


class Alone:
    """One worker: nothing to keep apart (the :class:`Beside` interface, doing nothing)."""

    def hold(self, cell_id) -> None:
        pass

    def held_for(self) -> int:
        return 0

    def begin_build(self, cell_id) -> bool:
        return True

    def end_build(self) -> None:
        pass

    def builds_under_way(self) -> int:
        return 0

    @contextmanager
    def measuring(self):
        yield {}

    @contextmanager
    def preparing(self):
        yield 0.0

    @contextmanager
    def compiling(self):
        yield
