"""The ReLU kink recheck (cudnn_rnn.check.kinks), against gradients made with one ReLU
derivative on the other side of zero, as cuDNN's rounding can put it (no GPU needed)."""
import numpy as np
import pytest

from cudnn_rnn.bindings.enums import DataType, DirectionMode, MathType, RNNMode
from cudnn_rnn.check import kinks, reference
from cudnn_rnn.check.verify import compare_with
from cudnn_rnn.engine.config import RNNConfig

CFG = RNNConfig(seq_length=5, num_layers=2, hidden_size=16, mini_batch=4, input_size=8,
                mode=RNNMode.RNN_RELU, direction=DirectionMode.BIDIRECTIONAL,
                data_type=DataType.FLOAT, math_prec=DataType.FLOAT,
                math_type=MathType.FMA_MATH)  # true FP32: gradient tolerance 5e-5


SWITCHED = {0: {2: [(1, 5)]}}  # first layer, forward: step 2, batch 1, unit 5


def _host(seed=3, at=(1, 5, 2)):
    """Inputs and weights where the pre-activation of unit ``at`` = (batch, unit, step) of
    the first layer's forward direction is zero up to float64 rounding (its input bias
    moved to cancel it), so either side of zero is a correct rounding of it."""
    rng = np.random.default_rng(seed)
    params = reference.random_params(CFG, rng)
    x = rng.uniform(-1, 1, CFG.x_shape())
    hx = rng.uniform(-1, 1, CFG.h_shape())
    b, u, t = at
    fwd = reference.forward(CFG, params, x, hx)
    a = fwd.caches[0]["steps"][t]["a"][b, u]
    params[0].bW[0][u] -= a  # every batch's unit u moves; batch b's lands on zero
    fwd = reference.forward(CFG, params, x, hx)
    assert abs(fwd.caches[0]["steps"][t]["a"][b, u]) < 1e-14
    return {"weights": reference.arrays_from_params(CFG, params), "x": x, "hx": hx,
            "dy": rng.uniform(-1, 1, CFG.y_shape()), "dhy": rng.uniform(-1, 1, CFG.h_shape())}


def _outputs(host, switched=None, noise=1e-8, seed=0):
    """What a device would return: the reference (with ``switched`` derivatives), each
    value moved by a relative ``noise``."""
    rng = np.random.default_rng(seed)
    params = reference.params_from_arrays(CFG, host["weights"])
    fwd = reference.forward(CFG, params, host["x"], host["hx"])
    grads = reference.backward(CFG, params, fwd, host["dy"], host["dhy"], switched=switched)
    moved = lambda a: a * (1 + noise * rng.standard_normal(a.shape))  # noqa: E731
    return {"y": moved(fwd.y), "hy": moved(fwd.hy), "dx": moved(grads.dx),
            "dhx": moved(grads.dhx),
            "dw": {k: moved(v) for k, v in
                   reference.arrays_from_params(CFG, grads.dparams).items()}}


def _check(host, outputs):
    params = reference.params_from_arrays(CFG, host["weights"])
    fwd = reference.forward(CFG, params, host["x"], host["hx"])
    grads = reference.backward(CFG, params, fwd, host["dy"], host["dhy"])
    return compare_with(CFG, (reference.Forward(fwd.y, fwd.hy, fwd.cy), grads), outputs)


def test_a_derivative_on_the_other_side_of_zero_fails_the_plain_check_and_passes_the_recheck():
    host = _host()
    outputs = _outputs(host, switched=SWITCHED)
    check = _check(host, outputs)
    assert not check.passed and kinks.applies(CFG, check), check.errors
    again = kinks.recheck(CFG, host, outputs, check)
    assert again.passed, again.errors
    record = again.as_record()["relu_kinks"]
    assert [(s["direction_index"], s["step"], s["batch"], s["unit"])
            for s in record["switched"]] == [(0, 2, 1, 5)]
    assert record["candidates"] >= 1 and record["errors_before"]["dx"] > 5e-5


def test_an_error_that_no_switch_explains_still_fails():
    host = _host()
    outputs = _outputs(host)
    outputs["dx"] = outputs["dx"] * (1 + 1e-3 * np.random.default_rng(9).standard_normal(
        outputs["dx"].shape))  # spread over every element, as a wrong kernel would be
    check = _check(host, outputs)
    assert kinks.applies(CFG, check)
    again = kinks.recheck(CFG, host, outputs, check)
    assert not again.passed and again.errors["dx"] == pytest.approx(check.errors["dx"])
    assert again.as_record()["relu_kinks"]["switched"] == []


def test_only_relu_cells_with_good_outputs_are_rechecked():
    host = _host()
    check = _check(host, _outputs(host, switched=SWITCHED))
    assert kinks.applies(CFG, check)
    assert not kinks.applies(CFG.replace(mode=RNNMode.RNN_TANH), check)
    bad_outputs = _outputs(host, switched=SWITCHED)
    bad_outputs["y"] = bad_outputs["y"] * 1.01
    assert not kinks.applies(CFG, _check(host, bad_outputs))
