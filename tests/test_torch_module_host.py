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
from cudnn_rnn.torch import modules, runners
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
        scale = 1.01 if self.wrong == "scale" else 1.0
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


BEHAVIOUR = {"refuses": "refuses", "ignores the state": "state", "1% off": "scale"}


def _build(candidate, rnn, seq, batch, lengths=None):
    wrong = BEHAVIOUR.get(candidate.label)
    if wrong == "refuses":
        raise runners.NotServed("this host runner serves no shape")
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


def _accelerated(m, labels=("refuses", "engine", "cudnn")):
    spec = modules.inspect(m)
    state = modules.state_arrays(m)
    plan = Plan(spec, modules.digest(state), (4, 3), "fp16", 1e-3,
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
    """A runner that ignores the state passes at a zero state (ignoring it changes nothing)
    and is caught on the first inputs where it matters."""
    fast = _accelerated(torch.nn.GRU(5, 7, 1), ("ignores the state", "cudnn"))
    x = torch.randn(4, 3, 5)
    facts = fast.verify(x)
    assert max(facts["errors"].values()) < 1e-6 and fast.shapes()[0]["runs"] == "ignores the state"
    with pytest.raises(NotAccelerated, match="^ignores the state at seq 4, batch 3: largest "
                                             "relative error"):
        fast.verify(x, torch.randn(1, 3, 7))
