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


def _host(seed=3, at=(1, 5, 2), k=0, cfg=CFG):
    """Inputs and weights where the pre-activation of unit ``at`` = (batch, unit, step in
    processing order) of direction index ``k`` is zero up to float64 rounding (its input
    bias moved to cancel it), so either side of zero is a correct rounding of it."""
    rng = np.random.default_rng(seed)
    params = reference.random_params(cfg, rng)
    x = rng.uniform(-1, 1, cfg.x_shape())
    hx = rng.uniform(-1, 1, cfg.h_shape())
    lengths = None if cfg.equal_lengths else np.asarray(cfg.seq_lengths)
    b, u, t = at
    for _ in range(100):  # the bias also moves earlier steps, hence the state: iterate
        fwd = reference.forward(cfg, params, x, hx, lengths=lengths)
        a = fwd.caches[k]["steps"][t]["a"][b, u]
        if abs(a) < 1e-15:
            break
        params[k].bW[0][u] -= a  # every batch's unit u moves; batch b's lands on zero
    assert abs(a) < 1e-15
    return {"weights": reference.arrays_from_params(cfg, params), "x": x, "hx": hx,
            "dy": rng.uniform(-1, 1, cfg.y_shape()), "dhy": rng.uniform(-1, 1, cfg.h_shape())}


def _outputs(host, switched=None, noise=1e-8, seed=0, cfg=CFG):
    """What a device would return: the reference (with ``switched`` derivatives), each
    value moved by a relative ``noise``."""
    rng = np.random.default_rng(seed)
    params = reference.params_from_arrays(cfg, host["weights"])
    lengths = None if cfg.equal_lengths else np.asarray(cfg.seq_lengths)
    fwd = reference.forward(cfg, params, host["x"], host["hx"], lengths=lengths)
    grads = reference.backward(cfg, params, fwd, host["dy"], host["dhy"], switched=switched)
    moved = lambda a: a * (1 + noise * rng.standard_normal(a.shape))  # noqa: E731
    return {"y": moved(fwd.y), "hy": moved(fwd.hy), "dx": moved(grads.dx),
            "dhx": moved(grads.dhx),
            "dw": {k: moved(v) for k, v in
                   reference.arrays_from_params(cfg, grads.dparams).items()}}


def _check(host, outputs, cfg=CFG):
    params = reference.params_from_arrays(cfg, host["weights"])
    lengths = None if cfg.equal_lengths else np.asarray(cfg.seq_lengths)
    fwd = reference.forward(cfg, params, host["x"], host["hx"], lengths=lengths)
    grads = reference.backward(cfg, params, fwd, host["dy"], host["dhy"])
    return compare_with(cfg, (reference.Forward(fwd.y, fwd.hy, fwd.cy), grads), outputs)


def test_a_derivative_on_the_other_side_of_zero_fails_the_plain_check_and_passes_the_recheck():
    host = _host()
    outputs = _outputs(host, switched=SWITCHED)
    check = _check(host, outputs)
    assert not check.passed and kinks.applies(CFG, check), check.errors
    again = kinks.recheck(CFG, host, outputs, check)
    assert again.passed, again.errors
    record = again.as_record()["relu_kinks"]
    assert [(s["direction_index"], s["step"], s["time"], s["batch"], s["unit"])
            for s in record["switched"]] == [(0, 2, 2, 1, 5)]
    assert record["passed"] and record["within_bound"] >= 1
    assert record["errors_before"]["dx"] > 5e-5 and again.errors["dx"] < 5e-5


def test_an_error_that_no_switch_explains_still_fails():
    host = _host()
    outputs = _outputs(host)
    outputs["dx"] = outputs["dx"] * (1 + 1e-3 * np.random.default_rng(9).standard_normal(
        outputs["dx"].shape))  # spread over every element, as a wrong kernel would be
    check = _check(host, outputs)
    assert kinks.applies(CFG, check)
    again = kinks.recheck(CFG, host, outputs, check)
    # the record keeps the errors against the plain reference
    assert not again.passed and again.errors == check.errors
    assert again.as_record()["relu_kinks"]["switched"] == []


def test_only_relu_cells_with_good_outputs_are_rechecked():
    host = _host()
    check = _check(host, _outputs(host, switched=SWITCHED))
    assert kinks.applies(CFG, check)
    assert not kinks.applies(CFG.replace(mode=RNNMode.RNN_TANH), check)
    bad_outputs = _outputs(host, switched=SWITCHED)
    bad_outputs["y"] = bad_outputs["y"] * 1.01
    assert not kinks.applies(CFG, _check(host, bad_outputs))


@pytest.mark.parametrize("lengths", ["equal", "list:5:4:3:2"])
def test_a_switch_in_the_reverse_direction_of_the_second_layer(lengths):
    """Direction index 3 (layer 1, reverse): the step is in processing order, the time is
    counted from the start; with unequal lengths the reverse direction starts at each
    sequence's own end."""
    cfg = CFG.replace(lengths=lengths)
    at, k = (0, 7, 1), 3  # batch 0 runs all five steps
    host = _host(at=at, k=k, cfg=cfg)
    switched = {k: {at[2]: [(at[0], at[1])]}}
    outputs = _outputs(host, switched=switched, cfg=cfg)
    check = _check(host, outputs, cfg=cfg)
    assert not check.passed and kinks.applies(cfg, check), check.errors
    again = kinks.recheck(cfg, host, outputs, check)
    assert again.passed, again.kinks
    (s,) = again.kinks["switched"]
    assert (s["direction_index"], s["step"], s["time"], s["batch"], s["unit"]) == (3, 1, 3, 0, 7)


def test_a_finished_sequence_has_no_candidates():
    """Past a sequence's end the step is not computed: a zero there is not a candidate."""
    cfg = CFG.replace(lengths="list:5:4:3:2")
    host = _host(at=(3, 4, 4), cfg=cfg)  # batch 3 ends after 2 steps; step 4 is padding
    params = reference.params_from_arrays(cfg, host["weights"])
    fwd = reference.forward(cfg, params, host["x"], host["hx"],
                            lengths=np.asarray(cfg.seq_lengths))
    near, _within, _bound = kinks.candidates(fwd, 1e-8)
    assert all(not (k == 0 and t == 4 and b == 3) for _d, k, t, b, _u in near)
    host = _host(at=(0, 4, 4), cfg=cfg)  # batch 0 runs all 5 steps: a candidate
    params = reference.params_from_arrays(cfg, host["weights"])
    fwd = reference.forward(cfg, params, host["x"], host["hx"],
                            lengths=np.asarray(cfg.seq_lengths))
    near, _within, _bound = kinks.candidates(fwd, 1e-8)
    assert (0, 4, 0, 4) in [(k, t, b, u) for _d, k, t, b, u in near]


def test_non_finite_gradients_and_loose_precisions_are_not_rechecked():
    host = _host()
    outputs = _outputs(host, switched=SWITCHED)
    outputs["dx"] = outputs["dx"].copy()
    outputs["dx"][0, 0, 0] = np.nan
    assert not kinks.applies(CFG, _check(host, outputs))
    outputs = _outputs(host, switched=SWITCHED)
    for math_type in (MathType.DEFAULT_MATH, MathType.TENSOR_OP_MATH):
        assert not kinks.applies(CFG.replace(math_type=math_type), _check(host, outputs))


def test_a_switch_that_does_not_lower_every_gradient_error_is_not_kept():
    """A decoy: the unit at zero is not the one the device switched (its switch is far
    from zero), so switching the decoy explains nothing and nothing is kept."""
    host = _host()
    far = {0: {4: [(2, 9)]}}  # switched on the device, but not near zero in the reference
    outputs = _outputs(host, switched=far)
    check = _check(host, outputs)
    assert kinks.applies(CFG, check)
    again = kinks.recheck(CFG, host, outputs, check)
    assert not again.passed and again.kinks["switched"] == []


def _errors_with(host, outputs, switched, cfg=CFG):
    """The gradient errors of ``outputs`` against the reference with ``switched``."""
    params = reference.params_from_arrays(cfg, host["weights"])
    fwd = reference.forward(cfg, params, host["x"], host["hx"])
    grads = reference.backward(cfg, params, fwd, host["dy"], host["dhy"], switched=switched)
    check = compare_with(cfg, (reference.Forward(fwd.y, fwd.hy, fwd.cy), grads), outputs)
    return {n: check.errors[n] for n in ("dx", "dhx", "dw")}


def test_a_switch_is_kept_only_where_it_lowers_every_gradient_error():
    """dx and dh_x as the device that switched the unit at zero gives them, dW as the plain
    reference's: the switch lowers two errors and raises the third, so it explains nothing
    and is not kept (keeping it where any error fell would hide a wrong dW)."""
    host = _host()
    outputs = _outputs(host, switched=SWITCHED)
    outputs["dw"] = _outputs(host)["dw"]
    check = _check(host, outputs)
    assert not check.passed and kinks.applies(CFG, check)
    after = _errors_with(host, outputs, SWITCHED)
    assert after["dx"] < check.errors["dx"] and after["dw"] > check.errors["dw"]
    again = kinks.recheck(CFG, host, outputs, check)
    assert not again.passed and again.kinks["switched"] == []


def test_a_switch_that_gains_less_than_the_minimum_on_one_error_is_not_kept():
    """The device switched the unit at zero, and dx carries a spread error three times the
    kink's besides: the switch lowers dx by only about 5 %, under the 10 % a switch must
    gain on every gradient (kinks.MIN_GAIN), so it is not kept."""
    host = _host()
    outputs = _outputs(host, switched=SWITCHED)
    outputs["dx"] = outputs["dx"] * (1 + 0.25 * np.random.default_rng(9).standard_normal(
        outputs["dx"].shape))
    check = _check(host, outputs)
    after = _errors_with(host, outputs, SWITCHED)
    gain = {n: 1 - after[n] / check.errors[n] for n in after}
    assert 0 < gain["dx"] < kinks.MIN_GAIN < min(gain["dhx"], gain["dw"]), gain
    again = kinks.recheck(CFG, host, outputs, check)
    assert not again.passed and again.kinks["switched"] == []


def test_a_kept_switch_that_does_not_pass_reports_the_plain_errors_and_the_gain():
    """A real kink and a spread dx error besides (a wrong kernel as well): the switch is
    kept (it lowers every gradient error by far), the recheck still fails on dx, and the
    record keeps the errors against the plain reference, with the errors after the switch
    beside them."""
    host = _host()
    outputs = _outputs(host, switched=SWITCHED)
    outputs["dx"] = outputs["dx"] * (1 + 1e-2 * np.random.default_rng(9).standard_normal(
        outputs["dx"].shape))
    check = _check(host, outputs)
    assert kinks.applies(CFG, check)
    again = kinks.recheck(CFG, host, outputs, check)
    assert [(s["direction_index"], s["step"], s["batch"], s["unit"])
            for s in again.kinks["switched"]] == [(0, 2, 1, 5)]
    assert not again.passed and again.failures == check.failures
    assert again.errors == check.errors
    after = again.kinks["errors_after"]
    assert after["dx"] < check.errors["dx"] and after["dhx"] < 1e-6 and after["dw"] < 1e-6
