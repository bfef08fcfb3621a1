"""One cuDNN call (or the GEMM engine's forward) captured in a CUDA graph, checked against
the plain call, then timed.

What users deploy often runs a graph: the host enqueues one graph launch instead of the
call's dozens of kernel launches, so a call whose GPU work is short is no longer timed
with the host's launch gaps in it. The call is captured on the flow's stream with CuPy's
stream capture (cudaStreamBeginCapture, relaxed mode: cuDNN's own host calls stay
allowed). cuDNN does not document which RNN calls survive capture; a call that fails
while capturing, or whose capture CUDA invalidates (a synchronising call inside it), is
*refused* with the reason, and keeps its plain timing only.

A captured graph counts only if one replay writes exactly the bytes the plain call writes:
each output is first filled with 0xFF (NaN in every floating type), ``dw`` with zeros
(backward weights adds into it), then the plain call and the replay run from the same
state and every output byte is compared.

A "flow" here is anything with ``cp`` (cupy), ``stream`` and ``buf`` (output name -> device
array): :class:`cudnn_rnn.engine.flow.RNNFlow`, or :class:`cudnn_rnn.lowbit.engine.GemmEngine`.
"""
from __future__ import annotations

from cudnn_rnn.bindings.cublaslt.errors import CublasLtError
from cudnn_rnn.bindings.errors import CudnnError
from cudnn_rnn.engine import timing
from cudnn_rnn.engine.gpu import cuda_errors

ZEROED = ("dw",)  # outputs the call accumulates into (CUDNN_WGRAD_MODE_ADD)
# State a call reads and may also write: cudnnRNNBackwardData_v8 writes into the reserve
# space that forward training filled (for backward weights to read), so a second call reads
# what the first one left there. Measured on the H200 (cuDNN 9.19): without restoring it,
# two plain backward-data calls wrote different dx/dhx in every configuration, DOUBLE/FMA
# included. Each run of the check starts from the same copy of it.
RESTORED = ("reserve",)
FORWARD_OUTPUTS = ("y", "hy", "cy", "y_inf", "hy_inf", "cy_inf")  # of either forward mode


class CaptureRefused(RuntimeError):
    """The call could not be captured, or its replay did not write what the plain call does."""


class PlainCallFailed(RuntimeError):
    """The plain call itself failed while its replay was checked (``cause``, the library's
    or CUDA's error): not a refused capture, a failure of the call being timed."""

    def __init__(self, cause: BaseException):
        super().__init__(str(cause))
        self.cause = cause


def prepare(flow, outputs) -> None:
    """Poison ``outputs`` before a call: 0xFF bytes (NaN in every floating type), so an
    output the call leaves unwritten cannot pass for a result; zeros for those it adds into."""
    with flow.stream:
        for name in outputs:
            if name in flow.buf:
                _bytes(flow, flow.buf[name]).fill(0 if name in ZEROED else 0xFF)


def capture(flow, call):
    """A CUDA graph of ``call(flow)`` on the flow's stream, or :class:`CaptureRefused`."""
    stream = flow.stream
    stream.synchronize()
    stream.begin_capture()
    try:
        call(flow)
    except BaseException as exc:  # the capture is ended either way, then:
        try:
            stream.end_capture()
        except cuda_errors(flow.cp):  # the capture was invalidated as well
            pass
        # a library's status (cuDNN's, cuBLASLt's) or CUDA refusing an operation while
        # capturing: a refusal
        if isinstance(exc, (CudnnError, CublasLtError) + cuda_errors(flow.cp)):
            raise CaptureRefused(
                f"the call failed while captured: {type(exc).__name__}: {exc}") from None
        raise  # anything else is this tool's own error
    try:
        graph = stream.end_capture()
    except cuda_errors(flow.cp) as exc:  # CUDA invalidated the capture (a synchronising call)
        raise CaptureRefused(f"CUDA ended the capture: {type(exc).__name__}: {exc}") from None
    return graph


def _written(flow, run, present, state: dict) -> dict:
    """Copies of what ``run`` wrote, starting from ``state`` (copies of :data:`RESTORED`),
    every step on the flow's stream (a copy on another stream could still be reading when
    the next fill starts)."""
    with flow.stream:
        for name, saved in state.items():
            flow.buf[name][...] = saved
    prepare(flow, present)
    run()
    with flow.stream:
        out = {n: flow.buf[n].copy() for n in present}
    flow.stream.synchronize()
    return out


def _bytes(flow, a):
    """``a``'s bytes (cuDNN's buffers are bytes already; the 8-bit engines' are float32,
    where filling with 0xFF would write the value 255 and comparing values would call a NaN
    unequal to itself)."""
    return a.view(flow.cp.uint8)


def _differ(flow, a: dict, b: dict) -> list:
    with flow.stream:
        return [n for n in a
                if not bool(flow.cp.array_equal(_bytes(flow, a[n]), _bytes(flow, b[n])))]


def check_replay(flow, call, graph, outputs) -> None:
    """:class:`CaptureRefused` unless one replay writes the plain call's bytes, all of them.
    The plain call runs twice first: one that is not bitwise reproducible itself (atomics)
    cannot be held to a bitwise check, and is refused with that reason."""
    present = [n for n in outputs if n in flow.buf]
    with flow.stream:
        state = {n: flow.buf[n].copy() for n in RESTORED if n in flow.buf}
    try:
        plain = _written(flow, lambda: call(flow), present, state)
        again = _differ(flow, plain, _written(flow, lambda: call(flow), present, state))
    except (CudnnError, CublasLtError) + cuda_errors(flow.cp) as exc:
        raise PlainCallFailed(exc) from exc
    if again:
        raise CaptureRefused(f"two plain calls wrote different bytes in {', '.join(again)} "
                             "from the same inputs and reserve space: not bitwise reproducible, "
                             "so a replay cannot be checked bit for bit")
    differ = _differ(flow, plain, _written(flow, lambda: graph.launch(flow.stream), present,
                                           state))
    if differ:
        raise CaptureRefused(f"a replay wrote other bytes than the plain call in "
                             f"{', '.join(differ)}")


def time_captured(flow, call, outputs, reps: int, warmup: int,
                  budget_s: float | None = None) -> timing.Timing:
    """Capture ``call``, check one replay bit for bit (:func:`check_replay`), then time
    replays (:func:`cudnn_rnn.engine.timing.time_call` on ``graph.launch``)."""
    graph = capture(flow, call)
    check_replay(flow, call, graph, outputs)
    return timing.time_call(flow.cp, flow.stream, lambda: graph.launch(flow.stream), reps,
                            warmup, budget_s)
