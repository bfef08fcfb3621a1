"""What an accelerated module does between and at its calls, checked without a GPU:

* state: the float64 reference (and the 8-bit engines' quantized twin) run in two chunks,
  the second from the first's final state, equals one run (unidirectional modules; a
  bidirectional one's reverse direction starts at each chunk's end, so it does not);
* verification at a new shape (cudnn_rnn.torch.verify.judge) on the host: an engine's
  arithmetic (tests/host_twin's, the real operands and plan) passes, outputs that skipped
  the quantization, ignored the state or miss the tolerance fail with the reason;
* the runners by shape (cudnn_rnn.torch.shapes.Plans): tried in order, the first that
  serves kept, a PackedSequence given cuDNN's only, none serving refused in one line."""
import re
from types import SimpleNamespace

import numpy as np
import pytest

from cudnn_rnn.bindings.enums import DataType, DirectionMode, RNNMode
from cudnn_rnn.charlm import network, statedict, table
from cudnn_rnn.check import reference
from cudnn_rnn.check.verify import tolerances
from cudnn_rnn.engine import dtypes
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.lowbit import model
from cudnn_rnn.torch import verify
from cudnn_rnn.torch.errors import NotAccelerated
from cudnn_rnn.torch.shapes import Attempt, Plans, describe, packed_lengths

from .host_twin import HostEngine

CELLS = (RNNMode.LSTM, RNNMode.GRU, RNNMode.RNN_TANH, RNNMode.RNN_RELU)


def _module(mode, bidirectional=False, layers=2, proj=None, seed=0):
    cfg = RNNConfig(seq_length=1, num_layers=layers, hidden_size=8, mini_batch=1,
                    input_size=5, proj_size=proj, mode=mode,
                    direction=DirectionMode.BIDIRECTIONAL if bidirectional
                    else DirectionMode.UNIDIRECTIONAL)
    params = reference.random_params(cfg, np.random.default_rng(seed), scale=0.5)
    return statedict.RNNWeights(mode, layers, 8, 5, cfg.proj_size, bidirectional, params)


def _io(rnn, seq=12, batch=3, seed=1):
    rng = np.random.default_rng(seed)
    cfg = rnn.config(seq, batch)
    x = rng.uniform(-1, 1, cfg.x_shape())
    hx = rng.uniform(-1, 1, cfg.h_shape())
    cx = rng.uniform(-1, 1, cfg.c_shape()) if cfg.has_cell_state else None
    return x, hx, cx


def _in_two_chunks(run, x, hx, cx, at=5):
    first = run(x[:at], hx, cx)
    second = run(x[at:], first["hy"], first["cy"])
    return {"y": np.concatenate([first["y"], second["y"]]), "hy": second["hy"],
            "cy": second["cy"]}


def _same(a: dict, b: dict, atol: float) -> bool:
    return all(np.allclose(a[n], b[n], rtol=0, atol=atol) for n in ("y", "hy", "cy")
               if a[n] is not None)


@pytest.mark.parametrize("mode,proj", [(c, None) for c in CELLS] + [(RNNMode.LSTM, 6)],
                         ids=lambda v: getattr(v, "name", str(v)))
def test_the_reference_streamed_in_chunks_with_its_state_equals_one_run(mode, proj):
    rnn = _module(mode, proj=proj)
    x, hx, cx = _io(rnn)
    run = lambda x, hx, cx: network.reference_outputs(rnn, x, hx=hx, cx=cx)  # noqa: E731
    whole = run(x, hx, cx)
    assert _same(_in_two_chunks(run, x, hx, cx), whole, 1e-13)
    assert not _same(_in_two_chunks(lambda x, h, c: run(x, None, None), x, hx, cx), whole, 1e-3)


@pytest.mark.parametrize("mode", CELLS, ids=lambda c: c.name)
def test_a_bidirectional_module_streamed_in_chunks_is_not_one_run(mode):
    """As in PyTorch's own module: the reverse direction of each chunk starts at its end."""
    rnn = _module(mode, bidirectional=True)
    x, hx, cx = _io(rnn)
    run = lambda x, hx, cx: network.reference_outputs(rnn, x, hx=hx, cx=cx)  # noqa: E731
    assert not _same(_in_two_chunks(run, x, hx, cx), run(x, hx, cx), 1e-3)


def _eight_bit(rnn, fmt="int8", parts="both"):
    x, hx, cx = _io(rnn)
    cfg = rnn.config(*x.shape[:2])
    stacked = model.stack(cfg, rnn.params)
    plan = model.plan(cfg, stacked, model.calibrate(cfg, stacked, x, hx, cx), fmt, parts,
                      channel=True)
    return cfg, stacked, plan, (x, hx, cx)


@pytest.mark.parametrize("fmt", model.FORMATS)
@pytest.mark.parametrize("mode", CELLS, ids=lambda c: c.name)
def test_the_quantized_twin_streamed_in_chunks_equals_one_run(mode, fmt):
    """The 8-bit engines' function carries its state like the reference: the scales are
    the calibration's, the same for every chunk."""
    rnn = _module(mode)
    cfg, stacked, plan, (x, hx, cx) = _eight_bit(rnn, fmt)

    def run(x, hx, cx):
        y, hy, cy = model.forward(cfg, stacked, x, hx, cx, plan)
        return {"y": y, "hy": hy, "cy": cy}
    assert _same(_in_two_chunks(run, x, hx, cx), run(x, hx, cx), 1e-12)


# ---------------------------------------------------------------------------- verification
def _host_outputs(cfg, stacked, plan, io, precision="fp16"):
    engine = HostEngine(cfg, stacked, precision, plan)
    engine.set_inputs(*io)
    engine.compute()
    return {n: a.astype(np.float64) for n, a in engine.outputs().items()}


def _judge_engine(rnn, cfg, stacked, plan, io, out, tolerance=1.0, fmt="int8"):
    x, hx, cx = io
    given = {"x": x, "hx": hx, "cx": cx}
    runner = SimpleNamespace(cfg=cfg, plan=plan, stacked=stacked)
    candidate = SimpleNamespace(is_cudnn=False, fmt=None if plan is None else fmt)
    return verify.judge(candidate, runner, rnn, tolerance, given, given, out)


@pytest.mark.parametrize("mode", CELLS, ids=lambda c: c.name)
def test_an_8bit_engines_arithmetic_passes_and_its_unquantized_network_does_not(mode):
    rnn = _module(mode)
    cfg, stacked, plan, io = _eight_bit(rnn)
    facts, why = _judge_engine(rnn, cfg, stacked, plan, io, _host_outputs(cfg, stacked, plan, io))
    assert why is None, why
    assert all(facts["errors_twin"][n] < facts["errors"][n] for n in facts["errors"])
    ref = network.reference_outputs(rnn, io[0], hx=io[1], cx=io[2])
    _, why = _judge_engine(rnn, cfg, stacked, plan, io, ref)
    assert why and "as near the unquantized reference" in why


def test_outputs_that_ignored_the_given_state_fail():
    rnn = _module(RNNMode.LSTM)
    cfg, stacked, plan, (x, hx, cx) = _eight_bit(rnn)
    zero = (x, np.zeros_like(hx), np.zeros_like(cx))
    _, why = _judge_engine(rnn, cfg, stacked, plan, (x, hx, cx),
                           _host_outputs(cfg, stacked, plan, zero))
    assert why and "against the float64 twin > bound" in why


def test_an_engine_within_its_bound_but_outside_the_users_tolerance_fails_saying_so():
    rnn = _module(RNNMode.GRU)
    cfg, stacked, plan, io = _eight_bit(rnn)
    out = _host_outputs(cfg, stacked, plan, io)
    facts, why = _judge_engine(rnn, cfg, stacked, plan, io, out, tolerance=1e-9)
    worst = max(facts["errors"].values())
    assert why == (f"largest relative error {worst:.3g} against the module in float64 > "
                   f"tolerance 1e-09")


@pytest.mark.parametrize("dt", [DataType.HALF, DataType.BFLOAT16])
def test_cudnn_is_judged_on_the_values_its_data_type_holds(dt):
    rnn = _module(RNNMode.LSTM)
    x, hx, cx = _io(rnn)
    cfg = rnn.config(*x.shape[:2], data_type=dt)
    held = table.held_weights(rnn, dt)
    q = lambda a: None if a is None else dtypes.quantize(a, dt)  # noqa: E731
    held_in = {"x": q(x), "hx": q(hx), "cx": q(cx)}
    exact = network.reference_outputs(held, held_in["x"], hx=held_in["hx"], cx=held_in["cx"])
    runner = SimpleNamespace(cfg=cfg)
    candidate = SimpleNamespace(is_cudnn=True)
    given = {"x": x, "hx": hx, "cx": cx}
    facts, why = verify.judge(candidate, runner, rnn, 1e-1, given, held_in, exact)
    assert why is None and max(facts["errors_held"].values()) < 1e-12
    assert max(facts["errors"].values()) > 1e-4  # the data type's own rounding, against the module
    bound = tolerances(cfg)[0]
    noisy = {n: a * (1 + 2 * bound) for n, a in exact.items()}
    _, why = verify.judge(candidate, runner, rnn, 1.0, given, held_in, noisy)
    assert why and "against the reference on the values held > bound" in why


# ---------------------------------------------------------------------------- shapes
def _candidates():
    return [SimpleNamespace(label=name, is_cudnn=name.startswith("cudnn"))
            for name in ("engine-a", "cudnn-b", "engine-c", "cudnn-d")]


class _Runner:
    def __init__(self, label):
        self.label, self.closed = label, False

    def close(self):
        self.closed = True


def _attempts(serves: set, log: list):
    def attempt(c):
        log.append(c.label)
        if c.label in serves:
            return Attempt(_Runner(c.label), ("outputs of", c.label), {"errors": {"y": 0.0}})
        return Attempt(why=f"{c.label} does not serve")
    return attempt


def test_a_shape_keeps_the_first_candidate_that_serves_and_says_what_it_passed_over():
    plans, log = Plans(_candidates()), []
    entry, outputs = plans.make((20, 64), _attempts({"engine-c", "cudnn-d"}, log))
    assert log == ["engine-a", "cudnn-b", "engine-c"] and outputs == ("outputs of", "engine-c")
    assert entry.candidate.label == "engine-c" and plans.cached((20, 64)) is entry
    assert entry.passed_over == ["engine-a: engine-a does not serve",
                                 "cudnn-b: cudnn-b does not serve"]
    assert plans.cached((20, 32)) is None


def test_a_packed_batch_tries_cudnns_candidates_only():
    plans, log = Plans(_candidates()), []
    key = (5, 3, (5, 4, 2))
    entry, _ = plans.make(key, _attempts({"engine-a", "cudnn-d"}, log))
    assert log == ["cudnn-b", "cudnn-d"] and entry.candidate.label == "cudnn-d"
    assert describe(key) == "seq 5, batch 3, a PackedSequence of lengths [5, 4, 2]"


def test_a_shape_no_candidate_serves_is_refused_in_one_line_with_each_reason():
    plans = Plans(_candidates())
    with pytest.raises(NotAccelerated) as exc:
        plans.make((7, 2), _attempts(set(), []))
    text = str(exc.value)
    assert "\n" not in text and text.startswith("no verified configuration serves seq 7, batch 2")
    assert all(f"{c.label}: {c.label} does not serve" in text for c in _candidates())
    engines_only = Plans([c for c in _candidates() if not c.is_cudnn])
    with pytest.raises(NotAccelerated, match=re.escape("a PackedSequence runs cuDNN's")):
        engines_only.make((5, 2, (5, 3)), _attempts({"engine-a"}, []))


def test_packed_shapes_beyond_the_most_recent_are_closed_padded_ones_kept():
    plans = Plans(_candidates(), keep_packed=2)
    made = [plans.make(k, _attempts({"cudnn-b"}, []))[0]
            for k in ((4, 2, (4, 1)), (4, 2, (4, 2)), (9, 9))]
    assert plans.cached((4, 2, (4, 1))) is made[0]  # used again: now the most recent
    plans.make((4, 2, (3, 3)), _attempts({"cudnn-b"}, []))
    assert made[1].runner.closed and not made[0].runner.closed
    assert plans.cached((4, 2, (4, 2))) is None and plans.cached((9, 9)) is made[2]
    plans.close()
    assert all(e.runner.closed for e in made) and plans.entries() == []


@pytest.mark.parametrize("sizes,lengths", [([3, 3, 2, 1], (4, 3, 2)), ([1], (1,)),
                                           ([2, 2], (2, 2)), ([], ())])
def test_a_packed_batchs_lengths_come_from_its_batch_sizes(sizes, lengths):
    assert packed_lengths(sizes) == lengths
    if lengths:  # and back: at step t, the sequences longer than t
        assert [sum(n > t for n in lengths) for t in range(lengths[0])] == sizes
