"""GPU-free stand-ins for what CuPy gives the capture check and the 8-bit engine's
candidates, so their logic runs in CPU tests.

* :class:`HostStream`: a CUDA stream's interface; work runs at once, except while capturing,
  when it is recorded instead (as ``cudaStreamBeginCapture`` records kernels), and
  :class:`HostGraph` replays what was recorded.
* :data:`HOST_CUPY`: the part of the ``cupy`` module these paths touch (``asarray``,
  ``array_equal``, events read from the host clock, CUDA's exception types).
* :class:`HostEngine`: :class:`cudnn_rnn.lowbit.engine.GemmEngine`'s interface with the engine's
  arithmetic on the host: the operands it would upload (:func:`cudnn_rnn.lowbit.operands.
  prepare`, the real host code), run through the float64 twin
  (:func:`cudnn_rnn.lowbit.model.forward`: the plan's GEMMs by the exact 8-bit rules, the
  float GEMMs on the weights they see), outputs kept in float32 as the engine keeps them.
  It does not round the float GEMMs' activations (the GPU's FP16/BF16 operands), so its
  errors for those precisions are below the GPU's.

Nothing here stands in for cuDNN or cuBLASLt: the 8-bit engine is this project's own code.
"""
from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np

from cudnn_rnn.lowbit import model, operands
from cudnn_rnn.lowbit.engine import check_supported

H200 = (9, 0)  # the compute capability the host engine claims: every precision builds


class HostStream:
    """A stream on the host: :meth:`enqueue` runs work now, or records it while capturing."""

    ptr = 0

    def __init__(self):
        self.captured: list | None = None  # the work recorded since begin_capture

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def synchronize(self) -> None:
        """Work ran when enqueued: nothing is pending."""

    def enqueue(self, work) -> None:
        if self.captured is None:
            work()
        else:
            self.captured.append(work)

    def begin_capture(self) -> None:
        self.captured = []

    def end_capture(self) -> "HostGraph":
        work, self.captured = self.captured, None
        return HostGraph(work)


class HostGraph:
    """The work a capture recorded; :meth:`launch` runs all of it on ``stream``."""

    def __init__(self, work: list):
        self.work = list(work)

    def launch(self, stream: HostStream) -> None:
        for w in self.work:
            stream.enqueue(w)


class HostCudaError(RuntimeError):
    """What CuPy raises for a CUDA error, on the host."""


class HostEvent:
    """A CUDA event that records the host clock (work runs when enqueued)."""

    def __init__(self):
        self.at = None

    def record(self, stream=None) -> None:
        self.at = time.perf_counter()


def _elapsed_ms(start: HostEvent, end: HostEvent) -> float:
    return (end.at - start.at) * 1e3


HOST_CUPY = SimpleNamespace(
    asarray=np.asarray, array_equal=np.array_equal, float32=np.float32, uint8=np.uint8,
    cuda=SimpleNamespace(Event=HostEvent, get_elapsed_time=_elapsed_ms,
                         runtime=SimpleNamespace(CUDARuntimeError=HostCudaError),
                         driver=SimpleNamespace(CUDADriverError=HostCudaError),
                         memory=SimpleNamespace(OutOfMemoryError=HostCudaError)))


class HostEngine:
    """The 8-bit engine's interface and arithmetic on the host (see the module docstring)."""

    cp = HOST_CUPY

    def __init__(self, cfg, stacked, float_precision: str, plan=None, stream=None, lt=None):
        eight_bit = operands.eight_bit_precisions(plan)
        check_supported(cfg, {float_precision} | eight_bit, H200)
        self.cfg, self.plan = cfg, plan
        self.operands = operands.prepare(stacked, float_precision, plan)
        self.weights = operands.seen_weights(stacked, self.operands)
        self.stream = stream or HostStream()
        self.closed = False
        self.x = self.hx = self.cx = None
        self.buf = {"y": np.zeros(cfg.y_shape(), np.float32),
                    "hy": np.zeros(cfg.h_shape(), np.float32)}
        if cfg.has_cell_state:
            self.buf["cy"] = np.zeros(cfg.c_shape(), np.float32)

    def set_inputs(self, x, hx, cx=None) -> None:
        as32 = lambda a: None if a is None else np.asarray(a, np.float32)  # noqa: E731
        self.x, self.hx, self.cx = as32(x), as32(hx), as32(cx)

    def forward(self) -> None:
        self.stream.enqueue(self.compute)

    def compute(self) -> None:
        """The whole forward, into the output buffers."""
        outputs = model.forward(self.cfg, self.weights, self.x, self.hx, self.cx, self.plan)
        for name, value in zip(("y", "hy", "cy"), outputs):
            if name in self.buf:
                self.buf[name][...] = value

    def outputs(self) -> dict:
        return {name: a.copy() for name, a in self.buf.items()}

    def algorithms(self) -> list[dict]:
        return [{"precision": o.precision, "K": o.codes.shape[1]}
                for ops in self.operands for o in (ops.input, ops.recurrent)]

    def close(self) -> None:
        self.closed = True
