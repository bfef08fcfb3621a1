"""The comparison with the float64 reference (cudnn_rnn.check.verify): the error measure, the
pass rule, and the tolerances against the errors a committed H200 run measured."""
import collections
from pathlib import Path

import numpy as np
import pytest

from cudnn_rnn.bindings.enums import DataType, MathType, RNNMode
from cudnn_rnn.check import reference, verify
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.matrix.record import read_records

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "results" / "nvidia-h200" / "9.19.0" / "default.jsonl.gz"


def test_the_error_is_the_relative_frobenius_norm():
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((4, 3, 5))
    assert verify.relative_error(ref, ref) == 0.0
    assert verify.relative_error(ref * 1.001, ref) == pytest.approx(1e-3, rel=1e-9)
    noise = rng.standard_normal(ref.shape)
    assert verify.relative_error(ref + noise, ref) == pytest.approx(
        np.sqrt((noise ** 2).sum() / (ref ** 2).sum()), rel=1e-12)
    assert verify.relative_error(np.full(3, 0.5), np.zeros(3)) == pytest.approx(np.sqrt(0.75))


def test_a_non_finite_output_never_passes():
    ref = np.ones((2, 3))
    for bad in (np.nan, np.inf):
        out = ref.copy()
        out[1, 2] = bad
        assert verify.relative_error(out, ref) == float("inf")
    with pytest.raises(ValueError, match="shape mismatch"):
        verify.relative_error(np.ones(3), np.ones(4))


def _pair(cfg, seed=1):
    """A reference (forward, gradients) of ``cfg`` and outputs named as readback names them."""
    rng = np.random.default_rng(seed)
    params = reference.random_params(cfg, rng)
    draw = lambda shape: rng.uniform(-1, 1, shape)  # noqa: E731
    lstm = cfg.mode == RNNMode.LSTM
    x, hx, cx = draw(cfg.x_shape()), draw(cfg.h_shape()), draw(cfg.c_shape()) if lstm else None
    fwd = reference.forward(cfg, params, x, hx, cx)
    grads = reference.backward(cfg, params, fwd, draw(cfg.y_shape()), draw(cfg.h_shape()),
                               draw(cfg.c_shape()) if lstm else None)
    outputs = {"y": fwd.y, "hy": fwd.hy, "y_inf": fwd.y, "hy_inf": fwd.hy, "dx": grads.dx,
               "dhx": grads.dhx, "dw": reference.arrays_from_params(cfg, grads.dparams)}
    if lstm:
        outputs.update(cy=fwd.cy, cy_inf=fwd.cy, dcx=grads.dcx)
    return (reference.Forward(fwd.y, fwd.hy, fwd.cy), grads), outputs


SMALL = RNNConfig(seq_length=4, num_layers=2, hidden_size=8, mini_batch=3, input_size=6,
                  mode=RNNMode.LSTM, data_type=DataType.FLOAT, math_type=MathType.FMA_MATH)


@pytest.mark.parametrize("name", ["y", "cy_inf", "dx", "dw"])
def test_one_output_beyond_its_tolerance_fails_the_check_and_is_named(name):
    pair, outputs = _pair(SMALL)
    check = verify.compare_with(SMALL, pair, outputs)
    assert check.passed and set(check.errors) == set(outputs)
    assert max(check.errors.values()) == 0.0
    tol = check.gradient_tolerance if name in verify.GRADIENT_OUTPUTS else check.tolerance
    moved = (lambda a: a * (1 + 3 * tol))
    changed = {k: moved(v) for k, v in outputs["dw"].items()} if name == "dw" else \
        moved(outputs[name])
    check = verify.compare_with(SMALL, pair, dict(outputs, **{name: changed}))
    assert not check.passed and check.failures == [name]
    assert check.errors[name] == pytest.approx(3 * tol, rel=1e-9)
    within = {k: v * (1 + tol / 3) for k, v in outputs["dw"].items()} if name == "dw" else \
        outputs[name] * (1 + tol / 3)
    assert verify.compare_with(SMALL, pair, dict(outputs, **{name: within})).passed


def _config_of(rec: dict) -> RNNConfig:
    return RNNConfig(data_type=DataType[rec["data_type"]],
                     math_prec=DataType[rec["math_prec"]],
                     math_type=MathType.parse(rec["math_type"]), mode=RNNMode[rec["cell"]])


def _largest_measured() -> dict:
    """The largest error the committed H200 run's verified cells measured under each bound of
    today's table, per arithmetic (data type, math precision, math type), side and whether
    the cell is RNN_RELU (its gradients have a bound of their own: a bound that moved the
    other cells onto it would hide among ReLU's larger errors otherwise):
    {(data type, math precision, math type, "outputs" or "gradients", relu, bound): error}."""
    records, _ = read_records(COMMITTED)
    largest = collections.defaultdict(float)
    for rec in records:
        if rec["outcome"] != "OK":
            continue
        arithmetic = (rec["data_type"], rec["math_prec"], rec["math_type"])
        bounds = dict(zip(("outputs", "gradients"), verify.tolerances(_config_of(rec))))
        for name, error in rec["errors"].items():
            side = "gradients" if name in verify.GRADIENT_OUTPUTS else "outputs"
            key = arithmetic + (side, rec["cell"] == "RNN_RELU", bounds[side])
            largest[key] = max(largest[key], error)
    return largest


def test_each_tolerance_sits_a_few_times_above_the_errors_the_h200_measured():
    """Every bound holds the errors measured on the H200 (cuDNN 9.19, the default matrix) and
    sits at most 20x above the largest of them (4-12x today): a looser bound would let a
    wrong result pass for a right one. DOUBLE's 1e-12 is a floor above rounding (the run
    measured 1e-15 to 2e-15), held to 2000x. RNN_RELU's gradients are held to their own
    bound where it is their own (TF32, FP16, BF16); where they share the other cells' (true
    FP32, DOUBLE), those set it."""
    largest = _largest_measured()
    assert {k[0] for k in largest} == {"FLOAT", "DOUBLE", "HALF", "BFLOAT16"}
    assert len(largest) >= 30, sorted(largest)
    others = {k[:4]: k[5] for k in largest if not k[4]}  # the other cells' bound, per side
    own = 0
    for (data_type, *_rest, relu, bound), error in largest.items():
        assert 0 < error <= bound, (data_type, *_rest, relu, bound, error)
        if relu and others.get((data_type, *_rest)) == bound:
            continue  # RNN_RELU under the other cells' bound (its outputs; true FP32 and
                      # DOUBLE): theirs set it (ReLU's own sit lower: FMA 5e-7 against 5e-5)
        own += relu
        assert bound <= (2000 if data_type == "DOUBLE" else 20) * error, \
            (data_type, *_rest, relu, bound, error)
    assert own >= 12  # ReLU's own gradient bounds (TF32, FP16, BF16) held to the rule too


def test_an_error_equal_to_its_bound_passes_and_the_next_float_above_does_not():
    """The bound is the largest error that passes (the tables say "within"), each side
    against its own: an output error at the gradients' looser bound fails."""
    up = lambda x: float(np.nextafter(x, np.inf))  # noqa: E731
    at = verify.Verification({"y": 5e-3, "dx": 1e-1}, tolerance=5e-3, gradient_tolerance=1e-1)
    assert at.passed and at.failures == []
    above = verify.Verification({"y": up(5e-3), "dx": up(1e-1)}, 5e-3, 1e-1)
    assert not above.passed and above.failures == ["y", "dx"]
    assert verify.Verification({"y": 1e-1}, 5e-3, 1e-1).failures == ["y"]
