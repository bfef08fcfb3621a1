"""One candidate at one shape on the GPU, reading and writing the caller's device memory.

Every runner has ``io_dtype`` (the data type of the arrays it takes: cuDNN's data type, or
float32 for the engines), ``run(stream, x, hx, cx, y, hy, cy)`` (cupy arrays; hx and cx may
be None for a zero state; everything enqueued on ``stream``, nothing synchronised, so a
call can be captured in a CUDA graph), ``facts()`` and ``close()``.

* :class:`CudnnRunner`: a flow of :mod:`cudnn_rnn.engine.flow` walked to its ``weights``
  stage, the module's weights placed by :func:`cudnn_rnn.engine.values.place` (as
  :func:`cudnn_rnn.charlm.rows.cudnn_row` does), then ``cudnnRNNForward`` (inference) on the
  caller's pointers: nothing is copied. What only training reads (dw, the reserve space,
  the flow's own inputs and outputs) is freed.
* :class:`EngineRunner`: the GEMM engine or the persistent kernel
  (:func:`cudnn_rnn.charlm.rows.build_engine`), 8-bit scales made for this shape from the
  candidate's calibrated thresholds (:func:`cudnn_rnn.lowbit.model.plan`, weights per output
  channel, as the precision table's rows). Both bind all six arrays (the persistent kernel
  takes the states' and outputs' addresses as launch arguments): nothing is copied.

A candidate this shape cannot have (cuDNN refusing a descriptor, an engine refusing the
shape, a partition that does not fit) is :class:`NotServed`, with the reason.
"""
from __future__ import annotations

from cudnn_rnn import bindings
from cudnn_rnn.bindings.cublaslt.errors import CublasLtError
from cudnn_rnn.bindings.driver.errors import DriverError
from cudnn_rnn.bindings.enums import DataType, ForwardMode, MathType, RNNAlgo
from cudnn_rnn.bindings.errors import CudnnError
from cudnn_rnn.charlm.rows import build_engine
from cudnn_rnn.check import reference
from cudnn_rnn.engine import values
from cudnn_rnn.engine.flow import FlowStop, RNNFlow
from cudnn_rnn.engine.gpu import cuda_errors, cupy_or_raise, follow
from cudnn_rnn.lowbit import model, persistent
from cudnn_rnn.lowbit.engine import Unsupported
from cudnn_rnn.lowbit.persistent import Stalled
from cudnn_rnn.torch.plan import ENGINE_KEYS

IO_DTYPES = {DataType.FLOAT: "float32", DataType.HALF: "float16", DataType.BFLOAT16: "bfloat16"}
KEPT = ("w", "work", "seq_lengths", "dropout_states")  # a flow's own buffers inference reads
BOUND = ("x", "hx", "cx", "y_inf", "hy_inf", "cy_inf")  # the caller's, during a call


class NotServed(Exception):
    """This candidate cannot run this shape; the message says why."""


def run_errors(cp) -> tuple:
    """What a runner's call may raise that makes its candidate not serve (not a bug here)."""
    return (CudnnError, CublasLtError, DriverError, Unsupported, Stalled, FlowStop) + \
        cuda_errors(cp)


def build(candidate, rnn, seq: int, batch: int, lengths: tuple | None = None):
    """The runner of ``candidate`` (:class:`~cudnn_rnn.torch.plan.Candidate`) for the module
    ``rnn`` at seq x batch (``lengths``: a packed batch's, non-increasing; cuDNN only)."""
    if candidate.is_cudnn:
        return CudnnRunner(candidate, rnn, seq, batch, lengths)
    if lengths is not None:
        raise NotServed("the engines run padded sequences of equal length")
    return EngineRunner(candidate, rnn, seq, batch)


class CudnnRunner:
    """cuDNN's configuration ``candidate.cudnn`` at one shape (see the module docstring)."""

    def __init__(self, candidate, rnn, seq: int, batch: int, lengths: tuple | None = None):
        dt, prec, math, algo = (DataType[candidate.cudnn[0]], DataType[candidate.cudnn[1]],
                                MathType[candidate.cudnn[2]], RNNAlgo[candidate.cudnn[3]])
        if dt not in IO_DTYPES:
            raise NotServed(f"{dt.name} data is not a PyTorch tensor's")
        form = "equal" if lengths is None else "list:" + ":".join(str(n) for n in lengths)
        self.cfg = rnn.config(seq, batch, data_type=dt, math_prec=prec, math_type=math,
                              algo=algo, lengths=form)
        self.io_dtype = IO_DTYPES[dt]
        self.stream_ptr = None
        self.flow = RNNFlow(self.cfg, bindings.load(), init="random")
        try:
            self._prepare(rnn)
        except BaseException:
            self.flow.close()
            raise

    def _prepare(self, rnn) -> None:
        flow = self.flow
        result = flow.run(until="weights")
        if result.failure is not None:
            f = result.failure
            raise NotServed(f"{f.call} -> {f.status}" + (f": {f.reason}" if f.reason else ""))
        values.place(flow, reference.arrays_from_params(self.cfg, rnn.params), {})
        if self.cfg.algo == RNNAlgo.PERSIST_DYNAMIC:
            try:
                flow.run_stage("build_dynamic")
            except FlowStop as stop:
                f = stop.failure
                raise NotServed(f"{f.call} -> {f.status}: {f.reason}") from None
        flow.stream.synchronize()
        for name in [n for n in flow.buf if n not in KEPT]:
            del flow.buf[name]
        flow.drawn.clear()  # the float64 copies of what it holds: the reference's, not needed

    def run(self, stream, x, hx, cx, y, hy, cy) -> None:
        flow = self.flow
        if stream.ptr != self.stream_ptr:  # after the old stream's calls: one workspace
            follow(stream, flow.stream)
            flow.handle.set_stream(stream.ptr)
            flow.stream, self.stream_ptr = stream, stream.ptr
        flow.buf.update(x=x, hx=hx, cx=cx, y_inf=y, hy_inf=hy, cy_inf=cy)
        try:
            flow.forward(ForwardMode.INFERENCE)
        finally:
            for name in BOUND:
                flow.buf.pop(name, None)

    def check(self) -> None:
        """Nothing to check after a call (a failing call raised)."""

    def facts(self) -> dict:
        return {"config": self.cfg.as_record(), "sizes": dict(self.flow.sizes)}

    def close(self) -> None:
        self.flow.close()  # synchronises the stream it last ran on


class EngineRunner:
    """The GEMM engine or the persistent kernel at one shape (see the module docstring)."""

    io_dtype = "float32"

    def __init__(self, candidate, rnn, seq: int, batch: int):
        cp = self.cp = cupy_or_raise()
        self.cfg = rnn.config(seq, batch)
        self.stacked = model.stack(self.cfg, rnn.params)
        self.plan = None if candidate.fmt is None else model.plan(
            self.cfg, self.stacked, candidate.thresholds, candidate.fmt, candidate.parts,
            channel=True)
        self.persistent = ENGINE_KEYS[candidate.engine] == "persistent"
        settings = None
        if self.persistent:  # the launch shape the plan names
            settings = (persistent.Settings.parse(candidate.settings) if candidate.settings
                        else persistent.Settings())
        try:
            self.engine = build_engine(self.cfg, self.stacked, self.plan,
                                       ENGINE_KEYS[candidate.engine], settings)
        except (Unsupported, CublasLtError) as exc:
            raise NotServed(str(exc)) from None
        with self.engine.stream:  # filled where the forwards are ordered after (Forward.bind)
            self.zero_h = cp.zeros(self.cfg.h_shape(), cp.float32)
            self.zero_c = cp.zeros(self.cfg.c_shape(), cp.float32) \
                if self.cfg.has_cell_state else None
        self.stream = self.engine.stream

    def run(self, stream, x, hx, cx, y, hy, cy) -> None:
        self.stream = stream
        cells = {} if cy is None else {"cx": self.zero_c if cx is None else cx, "cy": cy}
        self.engine.bind(stream, x=x, hx=self.zero_h if hx is None else hx, y=y, hy=hy,
                         **cells)
        self.engine.forward()

    def check(self) -> None:
        """:class:`~cudnn_rnn.lowbit.persistent.Stalled` if a launch of the persistent kernel
        gave up a wait (its status is then reset)."""
        if self.persistent:
            try:
                self.engine.check()
            finally:
                if self.engine.status is not None:  # (the resident kernel has none)
                    with self.engine.stream:  # the stream the next launch reads it on
                        self.engine.status.fill(0)

    def facts(self) -> dict:
        return {"algorithms": self.engine.algorithms(),
                "scales": None if self.plan is None else {
                    name: [None if s is None else s.act for s in getattr(self.plan, name)]
                    for name in ("input", "recurrent")}}

    def close(self) -> None:
        self.stream.synchronize()
        self.engine.close()
