"""One call of an accelerated module as tensors (cudnn_rnn.torch.calls), on the CPU with
PyTorch: the layouts and states a runner is given and the outputs a user gets back are the
module's own (batch_first, unbatched, a PackedSequence's order), and what the module does
not take is refused in one line. Compared with what torch.nn's own modules do."""
import re

import pytest

from cudnn_rnn.torch import modules
from cudnn_rnn.torch.errors import BadCall

torch = pytest.importorskip("torch", reason="the calls' tensors are PyTorch's")
from cudnn_rnn.torch import calls  # noqa: E402  (imports torch)

CPU = torch.device("cpu")


def _spec(kind="LSTM", **kw):
    return modules.inspect(getattr(torch.nn, kind)(5, 7, 2, **kw))


def _run_as_the_module(m, spec, x, hx=None, packed=None):
    """The module's own forward, through calls' conversions: what a runner would be given
    and what the user gets back."""
    x_sm, unbatched = calls.sequence_major(x, spec, CPU)
    h0, c0 = calls.state(hx, spec, x_sm.shape[1], CPU, unbatched)
    y, st = m(x_sm, (h0, c0) if spec.cell == "LSTM" else h0) if h0 is not None else m(x_sm)
    h, c = st if spec.cell == "LSTM" else (st, None)
    return calls.as_module_returns(spec, y, h, c, unbatched)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("unbatched", [False, True])
def test_a_call_returns_what_the_module_returns(kind, batch_first, unbatched):
    torch.manual_seed(0)
    m = getattr(torch.nn, kind)(5, 7, 2, bidirectional=True, batch_first=batch_first)
    ref = getattr(torch.nn, kind)(5, 7, 2, bidirectional=True)  # sequence-major twin
    ref.load_state_dict(m.state_dict())
    spec = modules.inspect(m)
    shape = (6, 5) if unbatched else ((3, 6, 5) if batch_first else (6, 3, 5))
    x = torch.randn(*shape)
    hshape = (4, 7) if unbatched else (4, 3, 7)
    hx = (torch.randn(hshape), torch.randn(hshape)) if kind == "LSTM" else torch.randn(hshape)
    got_y, got_state = _run_as_the_module(ref, spec, x, hx)
    want_y, want_state = m(x, hx)
    assert got_y.shape == want_y.shape and torch.allclose(got_y, want_y, atol=1e-6)
    for a, b in zip(got_state if kind == "LSTM" else [got_state],
                    want_state if kind == "LSTM" else [want_state]):
        assert a.shape == b.shape and torch.allclose(a, b, atol=1e-6)


def test_a_packed_batchs_state_is_taken_and_given_back_in_the_callers_order():
    spec = _spec("GRU")
    pack = torch.nn.utils.rnn.pack_sequence([torch.randn(n, 5) for n in (2, 4, 3)],
                                            enforce_sorted=False)
    h0 = torch.arange(2 * 3 * 7, dtype=torch.float32).reshape(2, 3, 7)
    sorted_h, _ = calls.state(h0, spec, 3, CPU, order=pack.sorted_indices)
    assert torch.equal(sorted_h, h0[:, pack.sorted_indices])
    _, back = calls.as_module_returns(spec, torch.zeros(9, 7), sorted_h, None,
                                      restore=pack.unsorted_indices)
    assert torch.equal(back, h0)


def test_outputs_come_back_in_the_modules_data_type_from_a_runners():
    spec = modules.inspect(torch.nn.LSTM(5, 7, 2).half())
    y, hy, cy = calls.empty_outputs(spec, (4, 3), 3, torch.float32, CPU)
    assert (y.shape, hy.shape, cy.shape) == ((4, 3, 7), (2, 3, 7), (2, 3, 7))
    y2, (h2, c2) = calls.as_module_returns(spec, y, hy, cy)
    assert y2.dtype == h2.dtype == c2.dtype == torch.float16


@pytest.mark.parametrize("x,hx,needle", [
    (lambda: [1.0], None, "the input must be a torch.Tensor, got list"),
    (lambda: torch.randn(4, 3, 5).double(), None, "the input is torch.float64; the module takes float32"),
    (lambda: torch.randn(4, 3, 6), None, "the input has shape (4, 3, 6); the module takes (seq, batch, 5)"),
    (lambda: torch.randn(4, 3, 5), lambda: torch.zeros(2, 3, 7), "an LSTM's state is a tuple"),
    (lambda: torch.randn(4, 3, 5), lambda: (torch.zeros(2, 2, 7), torch.zeros(2, 3, 7)),
     "h_0 has shape (2, 2, 7); expected (2, 3, 7)"),
    (lambda: torch.randn(0, 3, 5), None, "the input has no steps (sequence length 0)"),
    (lambda: torch.randn(4, 5), lambda: (torch.zeros(2, 1, 7), torch.zeros(2, 1, 7)),
     "for an unbatched (2-D) input, h_0 is 2-D too"),
])
def test_what_the_module_does_not_take_is_refused_in_one_line(x, hx, needle):
    spec = _spec("LSTM")
    with pytest.raises(BadCall, match=re.escape(needle)):
        xs, unbatched = calls.sequence_major(x(), spec, CPU)
        calls.state(hx() if hx else None, spec, xs.shape[1], CPU, unbatched)


def test_a_tensor_on_another_device_is_refused():
    with pytest.raises(BadCall, match=re.escape("the input is on cpu; the module is on cuda:0")):
        calls.sequence_major(torch.randn(4, 3, 5), _spec(), torch.device("cuda:0"))


def test_a_bfloat16_tensor_reaches_a_runner_as_its_bits():
    import numpy as np
    t = torch.tensor([1.0, -2.5, 3.0], dtype=torch.bfloat16)
    bits = calls.device_array(t, np)
    assert bits.dtype == np.int16
    assert np.array_equal((bits.astype(np.uint16).astype(np.uint32) << 16).view(np.float32),
                          [1.0, -2.5, 3.0])
    assert calls.device_array(None, np) is None
