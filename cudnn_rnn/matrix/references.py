"""The float64 reference, evaluated once per distinct values and kept for every cell of them.

A cell's reference depends on the values its flow draws and on the mathematics its
configuration asks for, and on nothing else. :func:`reference_key` is that dependence: the
data type (the rounding of every value), the seed and initialisation, the structural axes
(cell, sizes, projection, direction, input mode, bias mode, sequence lengths) and the
weight entries cuDNN reported (:func:`cudnn_rnn.engine.values.values_key`). Not in it: the
math type, the math precision and the algorithm (how cuDNN computes, which the tolerance
judges, not what), and the layout (where the buffers put each step; read back into the
reference's order before the comparison). So the cells of one data type that differ only in
those share one evaluation; a cell that differs in anything else gets its own.

:class:`ReferenceCache` keeps each evaluation ready for comparison
(:class:`~cudnn_rnn.check.verify.Expected`: outputs, flattened weight gradients, norms) on
the GPU where it ran, within a byte budget, least recently used going first. With a GPU,
a cell whose reference is not kept has it computed in a thread on its own CUDA stream, from
when the cell's values are on the device, while the cell's device stages run
(:meth:`ReferenceCache.start`; never during the timed calls, which come after it is
finished).
"""
from __future__ import annotations

from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from cudnn_rnn.check.verify import Expected, expected, prepare
from cudnn_rnn.engine.gpu import held_bytes
from cudnn_rnn.engine.values import values_key

AUTO = "auto"  # a device budget of the smaller of 8 GiB and an eighth of the GPU's memory


def reference_key(cfg, entries: list, init: str, seed: int) -> tuple:
    """What a cell's float64 reference depends on (see the module docstring)."""
    return values_key(cfg, entries, init, seed)


class ReferenceCache:
    """Evaluated references by :func:`reference_key`: at most ``size`` of them, those on the
    GPU within ``device_bytes`` (or :data:`AUTO`), those on the host (no GPU, or over the
    device budget) each within ``max_bytes``."""

    def __init__(self, size: int = 16, max_bytes: int = 64 << 20, device_bytes: int | str = 0):
        self.size = size
        self.max_bytes = max_bytes
        self.device_bytes = device_bytes
        self._items: OrderedDict = OrderedDict()  # key -> (Expected, bytes held on the GPU)
        self._pending = None  # (key, Future) of the reference a thread computes now
        self._threads = None
        self._stream = None
        self.hits = self.misses = 0

    @classmethod
    def for_worker(cls, options: dict) -> "ReferenceCache":
        """The cache a worker keeps, from its options (``reference_cache_size``,
        ``reference_device_bytes``)."""
        return cls(size=int(options.get("reference_cache_size", 16)),
                   device_bytes=options.get("reference_device_bytes", 0))

    @staticmethod
    def key(flow) -> tuple:
        return reference_key(flow.cfg, flow.entries, flow.init, flow.seed)

    def start(self, flow, xp) -> None:
        """Begin the reference of ``flow``'s values in a thread unless it is kept; call once
        the flow's values are drawn (its ``weights`` stage), before its device stages."""
        self.finish()
        k = self.key(flow)
        if k in self._items:
            return
        if self._threads is None:
            self._threads = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reference")
        ready = flow.stream.record() if xp is not np else None  # the values, drawn
        self._pending = (k, self._threads.submit(self._evaluate, flow, xp, ready))

    def get(self, flow, xp=np) -> Expected:
        """The reference of ``flow``'s values: kept, begun by :meth:`start`, or evaluated now."""
        k = self.key(flow)
        if k in self._items:
            self.hits += 1
            self._items.move_to_end(k)
            return self._items[k][0]
        self.misses += 1
        pending = self._pending
        if pending is not None and pending[0] == k:
            self._pending = None
            return self._keep(k, pending[1].result(), xp)
        self.finish()
        return self._keep(k, self._evaluate(flow, xp), xp)

    def finish(self) -> None:
        """Wait for a reference begun by :meth:`start` that no :meth:`get` took (its cell
        failed after drawing its values) and drop it: nothing computes beside the next cell."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending[1].exception()  # waits; what went wrong is the failed cell's business

    def on_device(self) -> int:
        """Bytes of GPU memory the kept references hold, as CuPy's pool counts them."""
        return held_bytes(a for value, _n in self._items.values() for a in value.arrays())

    def _evaluate(self, flow, xp, ready=None) -> Expected:
        if xp is np:
            return prepare(flow.cfg, expected(flow.cfg, flow.drawn, np))
        if self._stream is None:
            self._stream = xp.cuda.Stream(non_blocking=True)
        with self._stream:  # in a thread: beside the flow's stream, after its values
            if ready is not None:
                self._stream.wait_event(ready)
            value = prepare(flow.cfg, expected(flow.cfg, flow.drawn, xp, keep_on_device=True))
        self._stream.synchronize()
        return value

    def _keep(self, k, value: Expected, xp) -> Expected:
        on_gpu = xp is not np
        if on_gpu and self.device_bytes == AUTO:
            self.device_bytes = min(8 << 30, int(xp.cuda.runtime.memGetInfo()[1]) // 8)
        budget = self.device_bytes if isinstance(self.device_bytes, int) else 0
        nbytes = value.nbytes
        if on_gpu and nbytes <= budget:
            self._items[k] = (value, nbytes)
        elif nbytes <= self.max_bytes:
            value = _on_host(value) if on_gpu else value
            self._items[k] = (value, 0)
        while self._items and (len(self._items) > self.size
                               or sum(n for _v, n in self._items.values()) > budget):
            self._items.popitem(last=False)
        return value


def _on_host(value: Expected) -> Expected:
    """``value`` with every array copied to the host (a reference over the device budget)."""
    back = {id(a): a.get() for a in value.arrays()}
    return Expected({n: back[id(a)] for n, a in value.outputs.items()}, value.dw_keys,
                    None if value.dw is None else back[id(value.dw)], dict(value.norms))
