"""PyTorch's variants in the benchmark are checked before they are timed
(cudnn_rnn/compare/peer_errors.py): one call's outputs, and a training step's gradients,
against the same module in float64, within the project's bound for the data type. On the
CPU with real torch modules; on a GPU, every variant of a shape verified and timed."""
import pytest

from cudnn_rnn.bindings.enums import DataType, MathType
from cudnn_rnn.check.verify import TOLERANCE
from cudnn_rnn.compare import peer_errors, pytorch

torch = pytest.importorskip("torch", reason="PyTorch's peers are PyTorch code")


def _module(cell="LSTM", layers=2, bidirectional=True):
    name, extra = pytorch.MODULES[cell]
    torch.manual_seed(0)
    model = getattr(torch.nn, name)(6, 5, layers, bidirectional=bidirectional, **extra)
    x = torch.rand(4, 3, 6) * 2 - 1
    return model, x


@pytest.mark.parametrize("cell", list(pytorch.MODULES))
def test_a_float32_modules_own_inference_passes_and_a_changed_output_does_not(cell):
    model, x = _module(cell)
    got = pytorch.step_fn(model, x, None, training=False, pass_state=False, backward=False)()
    err = peer_errors.errors(model, (x,), got, training=False)
    assert set(err) == ({"y", "hy", "cy"} if cell == "LSTM" else {"y", "hy"})
    assert max(err.values()) < 1e-6 and peer_errors.judged(cell, "float32", err) is None
    out, state = got
    err = peer_errors.errors(model, (x,), (out * 1.1, state), training=False)
    assert err["y"] == pytest.approx(0.1, rel=1e-3)
    assert peer_errors.judged(cell, "float32", err).startswith(
        "not verified: y off the float64 module by 0.1 (bound 0.005 for float32)")


def test_a_training_steps_gradients_are_checked_and_a_wrong_one_is_caught():
    model, x = _module("GRU")
    step = pytorch.step_fn(model, x, None, training=True, pass_state=False, backward=True)
    got = step()
    err = peer_errors.errors(model, (x,), got, training=True)
    assert set(err) == {"y", "hy", "dx", "dw"} and max(err.values()) < 1e-6
    next(model.parameters()).grad.mul_(3.0)  # one parameter's gradient wrong
    err = peer_errors.errors(model, (x,), got, training=True)
    assert err["dw"] > 1e-2 and err["dx"] < 1e-6
    assert "dw off the float64 module" in peer_errors.judged("GRU", "float32", err)


def test_a_nan_in_a_variants_output_never_passes():
    model, x = _module("RNN_TANH", layers=1, bidirectional=False)
    out, h = pytorch.step_fn(model, x, None, False, False, False)()
    out = out.clone()
    out[0, 0, 0] = float("nan")
    err = peer_errors.errors(model, (x,), (out, h), training=False)
    assert err["y"] == float("inf") and peer_errors.judged("RNN_TANH", "float32", err)


def test_each_dtypes_bound_is_the_projects_own_for_that_pairing():
    pairs = {"float32": (DataType.FLOAT, DataType.FLOAT, None),
             "float16": (DataType.HALF, DataType.HALF, None),
             "bfloat16": (DataType.BFLOAT16, DataType.FLOAT, None)}
    for dtype, key in pairs.items():
        out, grad, relu = TOLERANCE[key]
        assert peer_errors.bounds("LSTM", dtype) == (out, grad)
        assert peer_errors.bounds("RNN_RELU", dtype) == (out, relu)
    # float32 is held to TF32's bound (PyTorch permits it), not true FP32's
    assert peer_errors.bounds("GRU", "float32") != TOLERANCE[
        (DataType.FLOAT, DataType.FLOAT, MathType.FMA_MATH)][:2]


def test_a_variant_is_timed_only_once_it_verified_and_a_wrong_one_is_recorded_untimed(
        monkeypatch):
    """pytorch._variant's wiring, on the CPU: the module as built is timed with its errors;
    one whose outputs are wrong (NaN in one element) is recorded with its errors in strict
    JSON instead of a time, and never timed."""
    import json
    timed = []
    monkeypatch.setattr(pytorch, "build", lambda *a, dtype, seed=0: (*_module("GRU"), None))
    monkeypatch.setattr(pytorch, "time_step",
                        lambda step, *a: timed.append(step) or {"median_ms": 1.0})
    shape = ("GRU", 4, 2, 5, 3, 6, True)
    for training in (False, True):
        got = pytorch._variant(*shape, training, "float32", False, 3, 1, 0.01)
        assert got["ms"] == 1.0 and max(got["errors"].values()) < 1e-6, got
        assert ("dw" in got["errors"]) == training
    plain = pytorch.step_fn

    def broken(*args, **kw):
        step = plain(*args, **kw)

        def wrong():
            out, h = step()
            out = out.clone()
            out[0, 0, 0] = float("nan")
            return out, h
        return wrong
    monkeypatch.setattr(pytorch, "step_fn", broken)
    timed.clear()
    got = pytorch._variant(*shape, False, "float32", False, 3, 1, 0.01)
    assert timed == [] and "ms" not in got
    assert got["skipped"].startswith("not verified: y off the float64 module by inf")
    assert json.loads(json.dumps(got, allow_nan=False))["errors"]["y"] == "nonfinite"


@pytest.mark.gpu
def test_every_variant_of_a_shape_is_verified_before_it_is_timed(cuda):
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
    got = pytorch.time_torch("LSTM", 8, 2, 128, 16, 128, True, training=False, reps=3,
                             budget_s=0.05)
    for name, v in got["variants"].items():
        assert "ms" in v and max(v["errors"].values()) <= 3e-2, (name, v)
    train = pytorch.time_torch("GRU", 8, 1, 128, 16, 128, False, training=True, reps=3,
                               budget_s=0.05)
    assert {"dx", "dw"} <= set(train["errors"]), train
