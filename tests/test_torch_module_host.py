"""The accelerated module's own logic on the CPU (cudnn_rnn.torch.module): what a call hands
a runner and gives back, the runner made per shape on first use and verified on that call's
inputs, the next candidate where one does not serve or verify, the state carried between
calls, a PackedSequence's order.

Only the GPU is stood in for: the runner (tests' :class:`HostRunner`: the float64 reference
run on the arrays a runner is given, written into the float32 outputs, or deliberately
wrong), cupy (numpy, with DLPack) and PyTorch's current CUDA stream. The verification, the
shapes, the conversions and the module are the real ones; the runners on a GPU are
tests/test_gpu_torch.py's."""
import contextlib
import types

import numpy as np
import pytest

from cudnn_rnn.charlm import network
from cudnn_rnn.engine import packing
from cudnn_rnn.lowbit import model
from cudnn_rnn.torch import modules, runners, tuning
from cudnn_rnn.torch.errors import NotAccelerated
from cudnn_rnn.torch.plan import Candidate, Plan

from .host_twin import HOST_CUPY

torch = pytest.importorskip("torch", reason="the accelerated module is a torch.nn.Module")
from cudnn_rnn.torch import module as M  # noqa: E402  (imports torch)


class HostStream:
    """A stream (cupy's and PyTorch's interface) whose work is done when enqueued."""
    ptr = cuda_stream = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def synchronize(self):
        """Host work is done when enqueued."""


class HostRunner:
    """A runner's interface with the float64 reference's arithmetic on the host; ``wrong``:
    "state" ignores the given state, "scale" returns 1 % too large outputs."""

    io_dtype = "float32"

    def __init__(self, candidate, rnn, seq, batch, lengths=None, wrong=None):
        self.rnn, self.lengths, self.wrong = rnn, lengths, wrong
        self.cfg = rnn.config(seq, batch)
        self.plan, self.stacked = None, model.stack(self.cfg, rnn.params)
        self.closed = False

    def run(self, stream, x, hx, cx, y, hy, cy):
        x = x.astype(np.float64)
        if self.lengths is not None:
            x = packing.unpack(x, self.lengths, self.cfg.seq_length)
        if self.wrong == "state":
            hx = cx = None
        out = network.reference_outputs(self.rnn, x, np, hx=hx, cx=cx, lengths=self.lengths)
        scale = 1.01 if self.wrong == "scale" or (self.wrong == "negative" and x.sum() < 0) \
            else 1.001 if self.wrong == "slightly" else 1.0
        y[...] = scale * (out["y"] if self.lengths is None else packing.pack(out["y"], self.lengths))
        hy[...] = scale * out["hy"]
        if cy is not None:
            cy[...] = scale * out["cy"]

    def check(self):
        """Nothing to check."""

    def facts(self):
        return {"runner": "host"}

    def close(self):
        self.closed = True


BEHAVIOUR = {"refuses": "refuses", "ignores the state": "state", "1% off": "scale",
             "wrong on negative sums": "negative", "0.1% off": "slightly"}


def _build(candidate, rnn, seq, batch, lengths=None):
    wrong = BEHAVIOUR.get(candidate.label)
    if wrong == "refuses" or (candidate.label == "seq 4 only" and seq != 4):
        raise runners.NotServed(f"this host runner serves {'seq 4 only' if wrong is None else 'no shape'}")
    return HostRunner(candidate, rnn, seq, batch, lengths, wrong)


@pytest.fixture
def on_the_host(monkeypatch):
    cp = types.SimpleNamespace(**vars(HOST_CUPY))
    cp.from_dlpack = np.from_dlpack
    cp.cuda = types.SimpleNamespace(**vars(HOST_CUPY.cuda), Device=lambda i: contextlib.nullcontext(),
                                    ExternalStream=lambda ptr, device: HostStream())
    monkeypatch.setattr(M, "cupy_or_raise", lambda: cp)
    monkeypatch.setattr(M.runners, "build", _build)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: HostStream())


def _candidate(label, cudnn=False):
    return Candidate(id=label, engine="cuDNN" if cudnn else "cuBLASLt", label=label,
                     family="fp16", errors={"y": 0.0},
                     cudnn=("FLOAT", "FLOAT", "FMA_MATH", "STANDARD") if cudnn else None)


def _accelerated(m, labels=("refuses", "engine", "cudnn"), tolerance=1e-3):
    spec = modules.inspect(m)
    state = modules.state_arrays(m)
    plan = Plan(spec, modules.digest(state), (4, 3), "fp16", tolerance,
                [_candidate(n, n.startswith("cudnn")) for n in labels], {})
    return M.Accelerated(plan, modules.weights(state, spec), torch.device("cpu"))


def _close(a, b, atol=1e-6):
    pairs = zip(a, b) if isinstance(a, (tuple, list)) else [(a, b)]
    return all(torch.allclose(p, q, atol=atol) for p, q in pairs)


KINDS = [("LSTM", {}), ("LSTM", {"proj_size": 3, "batch_first": True}), ("GRU", {}),
         ("RNN", {"nonlinearity": "relu", "bidirectional": True})]


@pytest.mark.parametrize("kind,extra", KINDS, ids=str)
def test_a_call_returns_the_modules_outputs_and_state(on_the_host, kind, extra):
    torch.manual_seed(0)
    m = getattr(torch.nn, kind)(5, 7, 2, **extra)
    fast = _accelerated(m)
    x = torch.randn(3, 4, 5)
    with torch.no_grad():
        y, st = fast(x)
        y2, st2 = m(x)
    assert y.shape == y2.shape and _close(y, y2) and _close(st, st2)
    (made,) = fast.shapes()
    assert made["runs"] == "engine" and made["passed_over"] == [
        "refuses: this host runner serves no shape"]
    assert made["verified"]["runner"] == "host" and max(made["verified"]["errors"].values()) < 1e-6


def test_state_streamed_through_chunks_equals_one_call(on_the_host):
    torch.manual_seed(1)
    m = torch.nn.LSTM(5, 7, 2)
    fast = _accelerated(m)
    x = torch.randn(9, 2, 5)
    with torch.no_grad():
        whole, (h, c) = fast(x)
        first, state = fast(x[:4])
        second, (h2, c2) = fast(x[4:], state)
    assert _close(torch.cat([first, second]), whole) and _close((h2, c2), (h, c))
    assert [s["shape"] for s in fast.shapes()] == ["seq 9, batch 2", "seq 4, batch 2",
                                                   "seq 5, batch 2"]


def test_a_runner_that_verifies_wrong_is_passed_over_with_the_reason(on_the_host):
    m = torch.nn.GRU(5, 7, 1)
    fast = _accelerated(m, ("ignores the state", "1% off", "cudnn"))
    x, h0 = torch.randn(4, 3, 5), torch.randn(1, 3, 7)
    with torch.no_grad():
        y, h = fast(x, h0)
        assert _close((y, h), m(x, h0))
    (made,) = fast.shapes()
    assert made["runs"] == "cudnn"
    reasons = made["passed_over"]
    assert reasons[0].startswith("ignores the state: largest relative error")
    assert reasons[1].startswith("1% off: largest relative error 0.01")
    assert all("against the float64 reference > bound" in r for r in reasons)


def test_a_shape_no_runner_verifies_is_refused_and_never_runs_the_module(on_the_host):
    fast = _accelerated(torch.nn.GRU(5, 7, 1), ("refuses", "1% off"))
    with pytest.raises(NotAccelerated, match="no verified configuration serves seq 4, batch 3"):
        fast(torch.randn(4, 3, 5))


def test_a_packed_sequence_runs_cudnn_in_the_callers_order(on_the_host):
    torch.manual_seed(2)
    m = torch.nn.LSTM(5, 7, 2, bidirectional=True)
    fast = _accelerated(m)
    packed = torch.nn.utils.rnn.pack_sequence([torch.randn(n, 5) for n in (2, 4, 3)],
                                              enforce_sorted=False)
    state = (torch.randn(4, 3, 7), torch.randn(4, 3, 7))
    with torch.no_grad():
        y, st = fast(packed, state)
        y2, st2 = m(packed, state)
    assert isinstance(y, torch.nn.utils.rnn.PackedSequence)
    assert torch.equal(y.batch_sizes, y2.batch_sizes) and _close(y.data, y2.data)
    assert _close(st, st2)
    (made,) = fast.shapes()
    assert made["runs"] == "cudnn" and made["shape"].endswith("lengths [4, 3, 2]")
    assert "errors_held" in made["verified"]


def test_verify_judges_a_shape_already_made_on_new_inputs(on_the_host):
    """A runner that is right on the first call's inputs is caught on the first inputs where
    it is not."""
    fast = _accelerated(torch.nn.GRU(5, 7, 1), ("wrong on negative sums", "cudnn"))
    x = torch.randn(4, 3, 5).abs()
    facts = fast.verify(x)
    assert max(facts["errors"].values()) < 1e-6
    assert fast.shapes()[0]["runs"] == "wrong on negative sums"
    with pytest.raises(NotAccelerated, match="^wrong on negative sums at seq 4, batch 3: "
                                             "largest relative error"):
        fast.verify(-x, torch.randn(1, 3, 7))


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_a_runner_that_ignores_the_state_is_caught_at_a_first_call_without_one(on_the_host,
                                                                                kind):
    """A zero state proves nothing of how a runner reads a state: a shape's first call
    without one is judged again from its own final state (a stream's next chunk), so a later
    call that streams its state in does not meet a runner that ignores it."""
    fast = _accelerated(getattr(torch.nn, kind)(5, 7, 2), ("ignores the state", "cudnn"))
    with torch.no_grad():
        fast(torch.randn(4, 3, 5))
    (made,) = fast.shapes()
    assert made["runs"] == "cudnn"
    assert made["passed_over"][0].startswith("ignores the state: from the call's own final "
                                             "state, largest relative error")


def _rows(fast, statuses):
    """The plan's table rows as the tuning writes them, one per candidate."""
    fast.plan.report["rows"] = [
        {"id": c.id, "label": c.label, "engine": c.engine, "family": c.family, "status": st,
         "error": 0.0, "ms": 0.1 * (i + 1), "plain_ms": 0.2, "timed_as": "graph", "reason": None}
        for i, (c, st) in enumerate(zip(fast.plan.candidates, statuses))]


def test_a_choice_that_does_not_serve_the_example_in_the_module_is_passed_over(on_the_host):
    """The ranking's first verified in the ranking's run but not inside the module: the
    next eligible one becomes the choice, what the module shows names what runs, and the
    passed-over row says why."""
    fast = _accelerated(torch.nn.LSTM(5, 7, 1))
    _rows(fast, ("chosen", "ranked", "fallback"))
    with torch.no_grad():
        fast(torch.randn(4, 3, 5))
    tuning.settle(fast, 2, "fp16")
    assert fast.plan.choice.label == "engine" == fast.shapes()[0]["runs"]
    assert fast.choice.label == "engine"
    assert [c.label for c in fast.plan.candidates] == ["engine", "cudnn"]
    rows = {r["label"]: r for r in fast.plan.report["rows"]}
    assert rows["engine"]["status"] == "chosen" and rows["refuses"]["status"] == "passed"
    assert "this host runner serves no shape" in fast.table()
    with torch.no_grad():  # a new shape no longer tries the one passed over
        fast(torch.randn(6, 3, 5))
    assert fast.shapes()[1]["passed_over"] == []


def test_only_a_fallback_serving_the_example_is_refused(on_the_host):
    fast = _accelerated(torch.nn.GRU(5, 7, 1), ("refuses", "1% off", "cudnn"))
    with torch.no_grad():
        fast(torch.randn(4, 3, 5))
    assert fast.shapes()[0]["runs"] == "cudnn"
    with pytest.raises(NotAccelerated, match=r"none of the 2 int8 configurations verified in "
                                             r"the ranking served the module at seq 4, batch 3 "
                                             r"\(refuses: this host runner serves no shape; 1% off"):
        tuning.settle(fast, 2, "int8")


def test_the_calibration_batches_are_verified_by_the_choice_itself(on_the_host):
    """verify_calibration judges the choice itself: a calibration batch of another shape
    that the choice does not serve is not passed by a later candidate that does (the
    tuning then makes that candidate the choice: hold_on_calibration, below)."""
    fast = _accelerated(torch.nn.GRU(5, 7, 1), ("seq 4 only", "cudnn"))
    spec = fast.plan.module
    with torch.no_grad():
        fast(torch.randn(4, 3, 5))
        assert tuning.verify_calibration(fast, [torch.randn(4, 3, 5)], spec)[0] < 1e-6
        with pytest.raises(NotAccelerated, match="not on calibration batch 0: no verified "
                                                 "configuration serves seq 6, batch 3: seq 4 "
                                                 "only: this host runner serves seq 4 only"):
            tuning.verify_calibration(fast, [torch.randn(6, 3, 5)], spec)
        fast(torch.randn(6, 3, 5))  # a user's call at that shape may run what serves it
        assert fast.shapes()[1]["runs"] == "cudnn"
        with pytest.raises(NotAccelerated, match="seq 6, batch 3 is run by cudnn, not by the "
                                                 "choice, seq 4 only"):
            fast.verify(torch.randn(6, 3, 5), choice_only=True)


def test_a_choice_that_does_not_hold_on_calibration_gives_way_to_the_next_that_does(
        on_the_host):
    """The fastest eligible row serves only seq 4 and a calibration batch is seq 6: the next
    eligible row becomes the choice (the example's shape made again with it), is verified on
    every batch, and the table says why the first was passed over; a fallback (cuDNN in
    another precision) never is, and with nothing left the refusal names each one's reason."""
    fast = _accelerated(torch.nn.GRU(5, 7, 1), ("seq 4 only", "0.1% off", "cudnn"),
                        tolerance=0.01)
    fast.plan.report["rows"] = [
        {"id": c.id, "label": c.label, "status": "ranked" if i else "chosen", "reason": None,
         "ms": 1.0 + i, "error": 0.0}
        for i, c in enumerate(fast.plan.candidates)]
    x, spec = torch.randn(4, 3, 5), fast.plan.module
    with torch.no_grad():
        fast(x)
        assert fast.shapes()[0]["runs"] == "seq 4 only"
        errors = tuning.hold_on_calibration(fast, x, [torch.randn(4, 3, 5),
                                                      torch.randn(6, 3, 5)], spec, 2, "fp16")
    assert fast.plan.choice.label == "0.1% off" and len(errors) == 2
    assert [s["runs"] for s in fast.shapes()] == ["0.1% off", "0.1% off"]
    rows = {r["label"]: r for r in fast.plan.report["rows"]}
    assert rows["0.1% off"]["status"] == "chosen" and rows["seq 4 only"]["status"] == "passed"
    assert "not on calibration batch 1" in rows["seq 4 only"]["reason"]

    only = _accelerated(torch.nn.GRU(5, 7, 1), ("seq 4 only", "cudnn"))
    with torch.no_grad():
        only(x)
        with pytest.raises(NotAccelerated, match=r"none of the fp16 configurations that "
                                                 r"verified on the example held on every "
                                                 r"calibration batch \(seq 4 only: verified on "
                                                 r"the example but not on calibration batch 0"):
            tuning.hold_on_calibration(only, x, [torch.randn(6, 3, 5)], spec, 1, "fp16")
        assert tuning.hold_on_calibration(only, x, None, spec, 1, "fp16") is None

    # the next eligible row does not serve the example in the module: its refusal, and the
    # first one's calibration failure with it
    then = _accelerated(torch.nn.GRU(5, 7, 1), ("seq 4 only", "1% off", "cudnn"),
                        tolerance=0.001)
    with torch.no_grad():
        then(x)
        with pytest.raises(NotAccelerated, match=r"none of the 1 fp16 configurations .*; "
                                                 r"before them, on the calibration batches: "
                                                 r"seq 4 only: verified on the example but "
                                                 r"not on calibration batch 0"):
            tuning.hold_on_calibration(then, x, [torch.randn(6, 3, 5)], spec, 2, "fp16")


def test_the_calibration_errors_are_the_choices_own_on_each_batch(on_the_host):
    """A choice 0.1 % off (inside its engine's FP16 bound and the 1 % tolerance): each
    calibration batch's error is its 0.1 %."""
    fast = _accelerated(torch.nn.GRU(5, 7, 1), ("0.1% off", "cudnn"), tolerance=0.01)
    with torch.no_grad():
        fast(torch.randn(4, 3, 5))
        errors = tuning.verify_calibration(fast, [torch.randn(4, 3, 5), torch.randn(4, 3, 5)],
                                           fast.plan.module)
    assert fast.shapes()[0]["runs"] == "0.1% off"
    assert len(errors) == 2 and all(e == pytest.approx(0.001, rel=1e-3) for e in errors)


def test_an_empty_batch_gives_empty_outputs_as_the_module_does(on_the_host):
    m = torch.nn.LSTM(5, 7, 2)
    fast = _accelerated(m)
    x, state = torch.randn(4, 0, 5), (torch.zeros(2, 0, 7), torch.zeros(2, 0, 7))
    with torch.no_grad():
        y, (h, c) = fast(x, state)
        y2, (h2, c2) = m(x, state)
    assert (y.shape, h.shape, c.shape) == (y2.shape, h2.shape, c2.shape)
    assert fast.shapes() == []  # no runner made for it


@pytest.mark.parametrize("settings,want", [("b2t512", "b2t512"), ("b1t256r", "b1t256r"),
                                           (None, "b1t256")])
def test_a_persistent_runner_builds_the_launch_shape_its_plan_names(monkeypatch, settings, want):
    """The candidate's settings reach the engine as parsed (not the default shape): here the
    engine's build is stood in for and only what it is asked is looked at."""
    asked = []

    def build_engine(cfg, stacked, plan, engine, shape):
        asked.append((engine, shape))
        raise runners.Unsupported("stood in for")
    monkeypatch.setattr(runners, "cupy_or_raise", lambda: HOST_CUPY)
    monkeypatch.setattr(runners, "build_engine", build_engine)
    m = torch.nn.GRU(5, 7, 1)
    spec = modules.inspect(m)
    rnn = modules.weights(modules.state_arrays(m), spec)
    candidate = Candidate(id="p", engine="persistent", label="p", family="fp16",
                          errors={"y": 0.0}, settings=settings)
    with pytest.raises(runners.NotServed, match="stood in for"):
        runners.EngineRunner(candidate, rnn, 4, 3)
    assert [(e, s.name) for e, s in asked] == [("persistent", want)]


def test_a_persistent_runner_clears_the_kernels_status_after_a_stall_is_said():
    """EngineRunner.check: a launch that gave up a wait raises Stalled, and the status is
    cleared on the engine's stream either way, so the next call is judged on its own."""
    filled = []
    status = types.SimpleNamespace(fill=filled.append)

    def stalled():
        raise runners.Stalled("a wait gave up")
    engine = types.SimpleNamespace(check=stalled, status=status,
                                   stream=contextlib.nullcontext())
    runner = runners.EngineRunner.__new__(runners.EngineRunner)
    runner.engine, runner.persistent = engine, True
    with pytest.raises(runners.Stalled):
        runner.check()
    engine.check = lambda: None
    runner.check()
    assert filled == [0, 0]
