"""cudnn_rnn.torch on a GPU (marker ``gpu``; PyTorch with CUDA needed): for every cell x
{uni, bi} x {1, 2 layers} x {fp16, bf16, int8, fp8}, the accelerated module's outputs
against the user's module run in float64 within the tolerance, its choice of the precision
asked for; a torch CUDA graph of it captured and replayed; a unidirectional sequence
streamed in chunks equal to one call; a new shape made and verified on first use; a
PackedSequence, batch_first, a projection, a half-precision module; the plan saved and
loaded without tuning. Each accelerated module is tuned once (reps and budget kept small)
and shared by the tests of its parameters, whose ids begin with its cell and end with its
precision: ``make test-gpu`` runs the tests of one cell and precision in one process
(tests/conftest.py, SPREAD), so the file is spread over the processes and nothing is tuned
twice."""
import re

import pytest

from cudnn_rnn.torch import load
from cudnn_rnn.torch.errors import NotAccelerated

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch", reason="cudnn_rnn.torch needs PyTorch")

CELLS = {"LSTM": ("LSTM", {}), "GRU": ("GRU", {}), "RNN_TANH": ("RNN", {"nonlinearity": "tanh"}),
         "RNN_RELU": ("RNN", {"nonlinearity": "relu"})}
# a tolerance each precision meets on these random modules (the engines' and cuDNN's own
# bounds: cudnn_rnn.lowbit.configs.BOUNDS, cudnn_rnn.check.verify)
TOLERANCE = {"fp16": 1e-2, "bf16": 5e-2, "int8": 6e-2, "fp8": 1.5e-1}
FAMILY = {"fp16": "fp16", "bf16": "bf16", "int8": "int8", "fp8": "e4m3"}
SEQ, BATCH, INPUT, HIDDEN = 8, 16, 32, 64
TUNING = {"reps": 3, "budget_s": 0.005}
_TUNED: dict = {}


@pytest.fixture(scope="module")
def gpu_torch(cuda):
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
    return cuda


def _module(mode, bidirectional, layers, dtype=torch.float32, **extra):
    kind, kw = CELLS[mode]
    torch.manual_seed(layers + 2 * bidirectional)
    return getattr(torch.nn, kind)(INPUT, HIDDEN, layers, bidirectional=bidirectional,
                                   **kw, **extra).cuda().to(dtype).eval()


def _accelerated(mode, bidirectional, layers, precision):
    key = (mode, bidirectional, layers, precision)
    if key not in _TUNED:
        from cudnn_rnn.torch import accelerate
        m = _module(mode, bidirectional, layers)
        _TUNED[key] = m, accelerate(m, (SEQ, BATCH), precision=precision,
                                    tolerance=TOLERANCE[precision], **TUNING)
    return _TUNED[key]


def _inputs(seq=SEQ, batch=BATCH, seed=1):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(seq, batch, INPUT, generator=g) * 2 - 1).cuda()


def _rel(a, b) -> float:
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm())


def _expected(module, x, state=None):
    """The user's module in float64: (y, [h, c] or [h])."""
    import copy
    m64 = copy.deepcopy(module).double()
    cast = None if state is None else (
        tuple(s.double() for s in state) if isinstance(state, tuple) else state.double())
    with torch.no_grad():
        y, st = m64(x.double(), cast) if cast is not None else m64(x.double())
    return y, list(st) if isinstance(st, tuple) else [st]


def _within(fast_out, want, limit):
    y, st = fast_out
    got = [y] + (list(st) if isinstance(st, tuple) else [st])
    errs = [_rel(a, b) for a, b in zip(got, [want[0]] + want[1])]
    assert max(errs) <= limit, errs


PARAMS = [(c, bi, layers, p) for c in CELLS for bi in (False, True) for layers in (1, 2)
          for p in TOLERANCE]


@pytest.mark.parametrize("mode,bidirectional,layers,precision", PARAMS)
def test_outputs_match_the_module_in_float64_within_the_tolerance(
        gpu_torch, mode, bidirectional, layers, precision):
    module, fast = _accelerated(mode, bidirectional, layers, precision)
    assert fast.plan.choice.family == FAMILY[precision]
    assert fast.plan.choice.max_error <= TOLERANCE[precision]
    x = _inputs(seed=5)
    with torch.no_grad():
        _within(fast(x), _expected(module, x), TOLERANCE[precision])
    shapes = fast.shapes()
    assert shapes and all(max(s["verified"]["errors"].values()) <= TOLERANCE[precision]
                          for s in shapes)
    assert shapes[0]["runs"] == fast.choice.label  # the example's shape runs the choice,
    # the ranking's first: what verified in the ranking's run verifies in the module too
    assert not [r for r in fast.plan.report["rows"] if r["status"] == "passed"], fast.table()


@pytest.mark.parametrize("mode,bidirectional,layers,precision", PARAMS)
def test_a_cuda_graph_of_it_replays_what_the_eager_call_computes(
        gpu_torch, mode, bidirectional, layers, precision):
    _, fast = _accelerated(mode, bidirectional, layers, precision)
    static = _inputs(seed=2)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(3):
            fast(static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.no_grad():
        y_static, _ = fast(static)
    fresh = _inputs(seed=3)
    static.copy_(fresh)
    graph.replay()
    torch.cuda.synchronize()
    with torch.no_grad():
        y_eager, _ = fast(fresh)
    assert torch.equal(y_static, y_eager)


@pytest.mark.parametrize("mode,layers,precision",
                         [(c, layers, p) for c in CELLS for layers in (1, 2) for p in TOLERANCE])
def test_a_sequence_streamed_in_chunks_equals_one_call(gpu_torch, mode, layers, precision):
    module, fast = _accelerated(mode, False, layers, precision)
    x = _inputs(seq=3 * SEQ, seed=4)
    want = _expected(module, x)
    with torch.no_grad():
        y1, st = fast(x[:SEQ])
        y2, st = fast(x[SEQ:], st)
        whole = fast(x)
    _within((torch.cat([y1, y2]), st), want, TOLERANCE[precision])
    _within(whole, want, TOLERANCE[precision])
    made = [s["shape"] for s in fast.shapes()]
    assert f"seq {2 * SEQ}, batch {BATCH}" in made and f"seq {3 * SEQ}, batch {BATCH}" in made


@pytest.mark.parametrize("mode,precision", [("LSTM", p) for p in sorted(TOLERANCE)])
def test_a_new_shape_is_made_and_verified_on_first_use(gpu_torch, mode, precision):
    module, fast = _accelerated(mode, True, 2, precision)
    before = len(fast.shapes())
    x = _inputs(seq=5, batch=3, seed=6)
    with torch.no_grad():
        out = fast(x)
    _within(out, _expected(module, x), TOLERANCE[precision])
    new = fast.shapes()[before:]
    assert [s["shape"] for s in new] == ["seq 5, batch 3"]
    assert max(new[0]["verified"]["errors"].values()) <= TOLERANCE[precision]
    with torch.no_grad():
        again = fast(x)
    assert len(fast.shapes()) == before + 1 and torch.equal(again[0], out[0])


@pytest.mark.parametrize("mode,precision", [("GRU", "fp16"), ("GRU", "int8")])
def test_a_packed_sequence_runs_a_cudnn_configuration(gpu_torch, mode, precision):
    module, fast = _accelerated(mode, True, 2, precision)
    g = torch.Generator().manual_seed(10)  # its own inputs, whatever ran before in the process
    seqs = [torch.rand(n, INPUT, generator=g).cuda() * 2 - 1 for n in (5, 8, 3)]
    packed = torch.nn.utils.rnn.pack_sequence(seqs, enforce_sorted=False)
    h0 = torch.rand(4, 3, HIDDEN, generator=g).cuda()
    import copy
    with torch.no_grad():
        y, h = fast(packed, h0)
        y64, h64 = copy.deepcopy(module).double()(
            torch.nn.utils.rnn.pack_sequence([s.double() for s in seqs], enforce_sorted=False),
            h0.double())
    assert _rel(y.data, y64.data) <= TOLERANCE[precision] and _rel(h, h64) <= TOLERANCE[precision]
    last = fast.shapes()[-1]
    assert "PackedSequence" in last["shape"] and "/" in last["runs"]  # cuDNN's DATA/PREC/...


def test_batch_first_and_a_projection_run_cudnn_in_fp16(gpu_torch):
    from cudnn_rnn.torch import accelerate
    m = _module("LSTM", True, 2, batch_first=True, proj_size=16)
    fast = accelerate(m, (SEQ, BATCH), precision="fp16", tolerance=1e-2, **TUNING)
    assert fast.plan.choice.is_cudnn  # the engines build no projection
    x = _inputs(seed=7).transpose(0, 1).contiguous()  # (batch, seq, input)
    with torch.no_grad():
        y, (h, c) = fast(x)
        y64, (h64, c64) = m.double()(x.double())
    assert y.shape == (BATCH, SEQ, 32) and h.shape == (4, BATCH, 16)
    assert max(_rel(y, y64), _rel(h, h64), _rel(c, c64)) <= 1e-2


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_half_precision_module_is_accelerated_in_its_own_data_type(gpu_torch, dtype):
    from cudnn_rnn.torch import accelerate
    m = _module("LSTM", False, 2, dtype=dtype)
    fast = accelerate(m, (SEQ, BATCH), precision="auto", tolerance=5e-2, **TUNING)
    x = _inputs(seed=8).to(dtype)
    with torch.no_grad():
        y, (h, c) = fast(x)
    assert y.dtype == h.dtype == c.dtype == dtype
    _within((y, (h, c)), _expected(m, x), 5e-2)


@pytest.mark.parametrize("mode,precision", [("LSTM", "int8")])
def test_a_saved_plan_loads_without_tuning_and_computes_the_same(gpu_torch, tmp_path, mode,
                                                                 precision):
    module, fast = _accelerated(mode, False, 2, precision)
    path = fast.save(tmp_path / "plan.json")
    again = load(path, module)
    assert again.plan.as_dict() == fast.plan.as_dict()
    x = _inputs(seed=9)
    with torch.no_grad():
        assert torch.equal(again(x)[0], fast(x)[0])
    assert fast.table() == again.table()


@pytest.mark.parametrize("mode,precision", [("LSTM", "fp16")])
def test_the_table_shows_the_modules_own_times_measured_beside_the_ranking(gpu_torch, mode,
                                                                           precision):
    _, fast = _accelerated(mode, False, 2, precision)
    times = fast.plan.report["times"]
    assert times["module"]["eager"]["ms"] > 0 and times["accelerated"]["eager"]["ms"] > 0
    # the timed calls checked again afterwards (a stall among them, or a wrong output, fails)
    after = fast.plan.report["checked_after_timing"]
    assert after and max(after.values()) <= fast.plan.tolerance, after
    text = fast.table()
    assert "the module itself: eager" in text and fast.plan.choice.label in text
    assert re.search(r"this module: eager [0-9.]+ ms, graph [0-9.]+ ms", text)  # ours captures
    assert str(fast.choice).startswith(fast.plan.choice.label)


def test_a_module_on_the_cpu_is_refused_in_one_line(gpu_torch):
    from cudnn_rnn.torch import accelerate
    with pytest.raises(NotAccelerated, match=re.escape("the module is on the CPU; move it")):
        accelerate(torch.nn.GRU(4, 8), (3, 2))


def test_a_tolerance_no_candidate_meets_is_refused_naming_the_nearest(gpu_torch):
    from cudnn_rnn.torch import accelerate
    m = _module("GRU", False, 1)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    with pytest.raises(NotAccelerated, match=r"no fp8 configuration of \d+ verified within "
                                             r"tolerance 1e-06 .* the most accurate, .* is off by"):
        accelerate(m, (SEQ, BATCH), precision="fp8", tolerance=1e-6, **TUNING)
    after = m.state_dict()  # the module is left as it was: its weights, place and mode
    assert sorted(after) == sorted(before) and not m.training
    assert all(torch.equal(after[k], v) and after[k].device == v.device
               for k, v in before.items())
