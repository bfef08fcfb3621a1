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
compiles (host work only) did to the timed calls beside them.
"""
from __future__ import annotations

import time
from contextlib import contextmanager

POLL_S = 0.0005  # how often a side waiting for the other looks again


class Beside:
    """Shared between the workers of one run (made from the ``spawn`` context before they
    start, handed to each in its options)."""

    def __init__(self, ctx):
        self._lock = ctx.Lock()
        self._measuring = ctx.Value("i", 0, lock=False)  # cells being verified or timed
        self._preparing = ctx.Value("i", 0, lock=False)  # builders setting a flow up
        self._compiling = ctx.Value("i", 0, lock=False)  # builds inside cudnnBuildRNNDynamic
        self._compiled = ctx.Value("i", 0, lock=False)   # builds finished, ever

    def _until(self, ready, then) -> None:
        """Wait until ``ready()`` holds, then ``then()``, both under the lock."""
        while True:
            with self._lock:
                if ready():
                    then()
                    return
            time.sleep(POLL_S)

    @contextmanager
    def measuring(self):
        """Around a cell's verification and timing: no builder starts a GPU set-up inside
        (one under way is waited for). Yields a dict whose ``builds`` is set on leaving: the
        builds that were compiling at some moment inside (finished inside, or under way on
        leaving), in any process."""
        counts = {}
        with self._lock:
            self._measuring.value += 1
        try:
            self._until(lambda: self._preparing.value == 0,
                        lambda: counts.update(start=self._compiled.value))
            yield counts
        finally:
            with self._lock:
                self._measuring.value -= 1
                if "start" in counts:  # finished inside, or still under way on leaving
                    counts["builds"] = (self._compiled.value - counts.pop("start")
                                        + self._compiling.value)

    @contextmanager
    def preparing(self):
        """Around a builder's GPU set-up of a flow: begun only while no cell is measured."""
        self._until(lambda: self._measuring.value == 0,
                    lambda: setattr(self._preparing, "value", self._preparing.value + 1))
        try:
            yield
        finally:
            with self._lock:
                self._preparing.value -= 1

    @contextmanager
    def compiling(self):
        """Around a build (host work: cuDNN's NVRTC compiles), counted for :meth:`measuring`."""
        with self._lock:
            self._compiling.value += 1
        try:
            yield
        finally:
            with self._lock:
                self._compiling.value -= 1
                self._compiled.value += 1


class Alone:
    """One worker: nothing to keep apart (the :class:`Beside` interface, doing nothing)."""

    @contextmanager
    def measuring(self):
        yield {}

    @contextmanager
    def preparing(self):
        yield

    @contextmanager
    def compiling(self):
        yield
