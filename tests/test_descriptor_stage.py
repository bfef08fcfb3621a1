"""What the real libcudnn answers at the descriptor stage, which needs no GPU."""
import pytest

from cudnn_rnn.bindings import errors
from cudnn_rnn.bindings.enums import DataType, DirectionMode, MathType, RNNAlgo, RNNMode
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.engine.descriptors import DropoutDescriptor, RNNDescriptor
from cudnn_rnn.engine.flow import DESCRIPTOR_STAGES, STAGES, RNNFlow

SAMPLE = RNNConfig()  # 20 2 512 64, as the sample


def set_descriptor(lib, cfg):
    with DropoutDescriptor(lib) as dropout, RNNDescriptor(lib) as rnn:
        rnn.set_v8(cfg, dropout)


def test_float_lstm_is_accepted(lib):
    set_descriptor(lib, SAMPLE.replace(mode=RNNMode.LSTM))


def test_int8_is_rejected_at_set_rnn_descriptor_as_not_supported(lib):
    with pytest.raises(errors.NotSupported) as info:
        set_descriptor(lib, SAMPLE.replace(data_type=DataType.INT8, math_prec=DataType.INT8))
    assert info.value.call == "cudnnSetRNNDescriptor_v8"


def test_half_with_half_precision_on_a_persistent_algo_is_refused_with_a_reason(lib):
    cfg = SAMPLE.replace(data_type=DataType.HALF, math_prec=DataType.HALF,
                         algo=RNNAlgo.PERSIST_STATIC)
    with pytest.raises(errors.NotSupported) as info:
        set_descriptor(lib, cfg)
    assert info.value.reason and "CUDNN_DATA_HALF" in info.value.reason


def test_bfloat16_with_float_precision_passes_the_descriptor_stage(lib):
    set_descriptor(lib, SAMPLE.replace(data_type=DataType.BFLOAT16, math_prec=DataType.FLOAT))


def test_zero_layers_is_a_bad_param(lib):
    """cuDNN's own answer, asked directly: RNNConfig refuses 0 layers before any C call."""
    c = SAMPLE
    with DropoutDescriptor(lib) as dropout, RNNDescriptor(lib) as rnn:
        with pytest.raises(errors.BadParam):
            lib.cudnnSetRNNDescriptor_v8(
                rnn, int(c.algo), int(c.mode), int(c.bias_mode), int(c.direction),
                int(c.input_mode), int(c.data_type), int(c.math_prec), int(c.math_type),
                c.input_size, c.hidden_size, c.proj_size, 0, dropout, 0)
    with pytest.raises(ValueError, match="num_layers must be a positive integer"):
        SAMPLE.replace(num_layers=0)


@pytest.mark.parametrize("change,named", [
    ({"hidden_size": 2 ** 32 + 512}, "hidden_size = 4294967808"),
    ({"mini_batch": 2 ** 31}, "mini_batch = 2147483648"),
    ({"input_size": 2 ** 31}, "input_size"),
    ({"proj_size": 2 ** 40}, "proj_size"),
    ({"mini_batch": 2 ** 16, "hidden_size": 2 ** 16, "proj_size": 8}, "cell-state stride"),
    ({"mini_batch": 2 ** 16, "hidden_size": 2 ** 16}, "hidden-state stride"),
    ({"hidden_size": 2 ** 30, "direction": DirectionMode.BIDIRECTIONAL}, "output vector size"),
])
def test_sizes_that_do_not_fit_a_c_int_are_refused_before_any_call(change, named):
    """ctypes would pass 2**32 + 512 as 512: every size cuDNN takes as an int is checked."""
    with pytest.raises(ValueError, match="does not fit the C int") as info:
        SAMPLE.replace(**change)
    assert named in str(info.value)


def test_the_largest_c_int_passes_the_check():
    cfg = SAMPLE.replace(seq_length=2 ** 31 - 1, num_layers=2 ** 31 - 1)
    assert max(cfg.c_ints().values()) == 2 ** 31 - 1


def test_flow_without_device_runs_descriptor_stages_and_skips_the_rest(lib):
    with RNNFlow(SAMPLE.replace(mode=RNNMode.GRU), lib, device=False) as flow:
        result = flow.run()
    assert result.failure is None
    assert result.reached == list(DESCRIPTOR_STAGES)
    assert result.skipped == [s for s in STAGES if s not in DESCRIPTOR_STAGES
                              and s != "build_dynamic"]
    assert result.skip_reason
    assert not result.completed


def test_flow_stops_at_the_failing_stage_and_records_it(lib):
    cfg = SAMPLE.replace(data_type=DataType.INT8, math_prec=DataType.INT8)
    with RNNFlow(cfg, lib, device=False) as flow:
        result = flow.run()
    f = result.failure
    assert (f.stage, f.call, f.status) == ("rnn_descriptor", "cudnnSetRNNDescriptor_v8",
                                           "NOT_SUPPORTED")
    assert f.code == (3000 if lib.version[0] >= 9 else 9)
    assert result.reached == ["dropout"]  # nothing after the failure ran
    assert "data_descriptors" not in result.reached


def test_descriptors_are_destroyed_exactly_once(lib):
    d = DropoutDescriptor(lib)
    with d:
        pass
    assert d.closed
    d.close()  # a second close is a no-op, not a double destroy
    import ctypes
    with pytest.raises((ValueError, ctypes.ArgumentError), match="already destroyed"):
        lib.cudnnDestroyDropoutDescriptor(d)


@pytest.mark.parametrize("math_type", list(MathType), ids=lambda m: m.short)
def test_float_accepts_every_math_type_at_set_time(lib, math_type):
    set_descriptor(lib, SAMPLE.replace(math_type=math_type))


class _FakeDeviceArray:
    """Stands in for a cupy array: only the address is read by the flow's call sites."""

    class data:  # noqa: N801 - mimics cupy's .data.ptr
        ptr = 0x100000


def test_compute_call_sites_marshal_their_arguments(lib):
    """cudnnRNNForward / BackwardData / BackwardWeights as the flow calls them, with no
    handle: the real library must answer BAD_PARAM, which proves every argument
    converted to its C type (a ctypes ArgumentError would mean a wrong binding)."""
    from cudnn_rnn.bindings.enums import ForwardMode
    cfg = SAMPLE.replace(mode=RNNMode.LSTM)
    with RNNFlow(cfg, lib, device=False) as flow:
        flow.run()
        names = ("seq_lengths x y hx hy cx cy w work reserve dy dx dhy dhx dcy dcx dw "
                 "y_inf hy_inf cy_inf").split()
        flow.buf.update({n: _FakeDeviceArray() for n in names})
        flow.sizes.update(weight_space=1 << 20, work_space=1 << 20, work_space_training=1 << 20,
                          work_space_inference=1 << 20, reserve_space=1 << 20)
        for call in (lambda: flow.forward(ForwardMode.TRAINING),
                     lambda: flow.forward(ForwardMode.INFERENCE),
                     flow.backward_data, flow.backward_weights):
            with pytest.raises(errors.BadParam):
                call()


def test_a_c_int_is_named_by_the_sizes_the_configuration_gives():
    """Without a projection the hidden state's sizes are hidden_size's, and the refusal says
    so (it named proj_size, which the user never gave); with one, proj_size."""
    big = dict(mini_batch=2 ** 16, hidden_size=2 ** 16, input_size=8)
    with pytest.raises(ValueError) as plain:
        SAMPLE.replace(**big)
    assert "hidden-state stride (mini_batch x hidden_size)" in str(plain.value)
    assert "proj_size" not in str(plain.value)
    with pytest.raises(ValueError) as projected:
        SAMPLE.replace(mode=RNNMode.LSTM, mini_batch=2 ** 16, hidden_size=2 ** 17,
                       proj_size=2 ** 16, input_size=8)
    assert "hidden-state stride (mini_batch x proj_size)" in str(projected.value)
