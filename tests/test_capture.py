"""The CUDA-graph check (cudnn_rnn.engine.capture) on the host: a replay counts only if it
writes the plain call's bytes. Driven with a stream that records work while capturing and
a graph that replays it (tests/host_twin.py); what cuDNN's calls do under capture is
tests/test_gpu_capture.py's."""
import numpy as np
import pytest

from cudnn_rnn.bindings.errors import CudnnError
from cudnn_rnn.engine import capture

from .host_twin import HOST_CUPY, HostCudaError, HostGraph, HostStream

OUTPUTS = ("y", "hy", "dw")


class Flow:
    """What capture needs of a flow: ``cp``, ``stream`` and ``buf`` (output name -> array)."""

    cp = HOST_CUPY

    def __init__(self):
        self.stream = HostStream()
        self.buf = {"y": np.zeros(6, np.uint8), "hy": np.zeros(3, np.uint8),
                    "dw": np.zeros(4, np.float32), "reserve": np.zeros(2, np.float32)}


def write(flow, y=1, hy=2):
    """The plain call: enqueue writes of every output (dw is added into, as backward
    weights does)."""
    def work():
        flow.buf["y"][...] = y
        flow.buf["hy"][...] = hy
        flow.buf["dw"] += 0.5
    flow.stream.enqueue(work)


def test_a_replay_that_writes_the_plain_calls_bytes_is_timed(monkeypatch):
    """What is timed is the graph's replays: the call itself runs only where the check needs
    it (captured once, then twice plain), and the graph is launched once for the check,
    then for each warm-up and repeat."""
    flow = Flow()
    calls, launches = [], []
    launch = HostGraph.launch
    monkeypatch.setattr(HostGraph, "launch",
                        lambda self, stream: (launches.append(1), launch(self, stream)))
    t = capture.time_captured(flow, lambda f: (calls.append(1), write(f)), OUTPUTS, reps=4,
                              warmup=1)
    assert t.reps == 4 and 0 <= t.min_ms <= t.q1_ms <= t.median_ms <= t.q3_ms <= t.max_ms
    assert (len(calls), len(launches)) == (3, 1 + 1 + 4)
    assert flow.buf["y"].tolist() == [1] * 6


def test_the_capture_records_the_call_instead_of_running_it():
    flow = Flow()
    graph = capture.capture(flow, write)
    assert flow.buf["y"].tolist() == [0] * 6 and len(graph.work) == 1
    assert flow.stream.captured is None  # the capture ended
    graph.launch(flow.stream)
    assert flow.buf["y"].tolist() == [1] * 6


def test_a_replay_that_writes_other_bytes_is_refused():
    flow = Flow()
    other = HostGraph([lambda: write(flow, y=7)])  # one byte value off, in y only
    with pytest.raises(capture.CaptureRefused, match="other bytes than the plain call in y$"):
        capture.check_replay(flow, write, other, OUTPUTS)


def test_an_output_the_replay_leaves_unwritten_is_refused():
    """Every output is poisoned before each run, so an output the replay does not write
    cannot keep the plain call's bytes from the run before."""
    flow = Flow()

    def y_only():
        flow.buf["y"][...] = 1
        flow.buf["dw"] += 0.5

    with pytest.raises(capture.CaptureRefused, match="in hy$"):
        capture.check_replay(flow, write, HostGraph([y_only]), OUTPUTS)


def test_outputs_are_poisoned_and_accumulated_ones_zeroed():
    flow = Flow()
    flow.buf["dw"][...] = 3.0
    capture.prepare(flow, OUTPUTS + ("absent",))
    assert flow.buf["y"].tolist() == [0xFF] * 6 and flow.buf["hy"].tolist() == [0xFF] * 3
    assert flow.buf["dw"].tolist() == [0.0] * 4 and flow.buf["reserve"].tolist() == [0.0] * 2


def test_a_call_that_is_not_bitwise_reproducible_is_refused():
    flow, draws = Flow(), iter(range(1, 100))

    def atomics(f):
        f.stream.enqueue(lambda: f.buf["y"].__setitem__(..., next(draws)))

    refused = "two plain calls wrote different bytes in y"
    with pytest.raises(capture.CaptureRefused, match=refused):
        capture.check_replay(flow, atomics, HostGraph([]), ("y",))


def test_each_run_starts_from_the_same_reserve_space():
    """Backward data reads and writes the reserve space: restored before each run, the plain
    calls and the replay agree."""
    flow = Flow()

    def reads_and_writes_reserve(f):
        def work():
            f.buf["y"][...] = f.buf["reserve"][0] + 1
            f.buf["reserve"] += 1
        f.stream.enqueue(work)

    graph = capture.capture(flow, reads_and_writes_reserve)
    capture.check_replay(flow, reads_and_writes_reserve, graph, ("y",))
    assert flow.buf["y"].tolist() == [1] * 6


def test_a_call_that_fails_while_captured_is_refused_and_the_capture_ended():
    flow = Flow()

    def refused(f):
        raise CudnnError("cudnnRNNForward", 3000, "NOT_SUPPORTED", "not while capturing")

    with pytest.raises(capture.CaptureRefused, match="failed while captured: CudnnError"):
        capture.capture(flow, refused)
    assert flow.stream.captured is None


def test_this_tools_own_error_while_captured_is_not_a_refusal():
    flow = Flow()

    def broken(f):
        raise KeyError("a bug")

    with pytest.raises(KeyError):
        capture.capture(flow, broken)
    assert flow.stream.captured is None


def test_a_capture_cuda_invalidates_is_refused():
    flow = Flow()

    def invalidate():
        raise HostCudaError("cudaErrorStreamCaptureInvalidated")

    flow.stream.end_capture = invalidate
    with pytest.raises(capture.CaptureRefused, match="CUDA ended the capture"):
        capture.capture(flow, write)


def test_prepare_poisons_float_outputs_with_nan_bytes_and_replays_compare_bytes():
    """The 8-bit engines' outputs are float32: the poison is NaN (0xFF bytes), not the value
    255, and a replay that writes the same bytes, NaN included, equals the plain call."""
    from cudnn_rnn.engine import capture
    from tests.host_twin import HOST_CUPY, HostStream

    class Flow:
        cp, stream = HOST_CUPY, HostStream()
        buf = {"y": np.zeros(4, np.float32), "dw": np.ones(2, np.float32)}
    flow = Flow()
    capture.prepare(flow, ["y", "dw"])
    assert np.isnan(flow.buf["y"]).all() and (flow.buf["y"].view(np.uint8) == 0xFF).all()
    assert (flow.buf["dw"] == 0).all()
    same = {"y": flow.buf["y"].copy()}
    assert capture._differ(flow, same, {"y": flow.buf["y"].copy()}) == []
    other = flow.buf["y"].copy()
    other[0] = 0.0
    assert capture._differ(flow, same, {"y": other}) == ["y"]


def test_a_plain_call_that_fails_while_its_replay_is_checked_is_its_failure_not_a_refusal():
    """The call timed failed itself (cuDNN's status, as the real error classes give it):
    the check says so as PlainCallFailed with that error, which the probe records as the
    call's failure (its status, no times), not as a graph it could not capture."""
    from cudnn_rnn.bindings import errors
    flow = Flow()
    refused = errors.error_for("cudnnRNNForward", 3000, 91900, "mathPrec == HALF")

    def fails(f):
        raise refused
    with pytest.raises(capture.PlainCallFailed) as info:
        capture.check_replay(flow, fails, HostGraph([]), OUTPUTS)
    assert info.value.cause is refused and info.value.cause.status_name == "NOT_SUPPORTED"
