"""Layer 0's input codes written by the kernel itself on a GPU (marker ``gpu``; sm_90a:
launch shapes with 'q' after 'i'): every cell x {1, 2, 3 layers} x {FP16, BF16, INT8, E4M3}
verified against the float64 reference and replayed bit for bit; the codes it writes equal,
byte for byte, those the quantizer before the launch writes (rows ending inside a column,
a short last batch slice, sequences shorter than the three slots written before the first
signal), and so do the outputs; an input bound in place of the engine's (Forward.bind) is the
one quantized; with the input copied ahead ('x') and at the issue's shapes.
The refusals (two directions, a share too large) are planned on the CPU
(tests/test_persistent_quantize.py)."""
import numpy as np
import pytest

from cudnn_rnn.bindings.enums import DirectionMode, RNNMode
from cudnn_rnn.lowbit import candidates as C
from cudnn_rnn.lowbit import model
from cudnn_rnn.lowbit.persistent import PersistentEngine, Settings

from tests.test_gpu_persistent import _cfg, _verify_all
from tests.test_gpu_persistent_wg import NAMES, _verify_at, hopper  # noqa: F401

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("settings", ["b2t256u8wbiq", "b2t256u16wbeiq"])
@pytest.mark.parametrize("layers", [1, 2, 3])
@pytest.mark.parametrize("mode", list(RNNMode), ids=lambda c: c.name)
def test_the_kernels_own_input_codes_verify_and_replay(cuda, hopper, mode, layers, settings):
    if Settings.parse(settings).reg_gates and mode not in (RNNMode.LSTM, RNNMode.GRU):
        pytest.skip("the gate math in registers is an LSTM's or a GRU's")
    cfg = _cfg(mode, DirectionMode.UNIDIRECTIONAL, layers, batch=32)
    by_name = _verify_all(cfg, NAMES, settings, mode, True)
    for rec in by_name.values():
        launch = rec["algorithms"][-1]
        assert rec["outcome"] == "OK" and launch["input_codes_by_kernel"] >= 1
        assert [a.get("input_projection_from") for a in rec["algorithms"]] == ["kernel"]


def _codes_and_outputs(cfg, name, settings, seed):
    """(layer 0's input codes as the launch left them, the outputs) of two forwards of
    ``name`` at ``settings`` on inputs drawn with ``seed`` and ``seed + 1``."""
    values = C.draw(cfg, seed=seed)
    config, plan = C.parse(name), None
    if config.fmt:
        plan = model.plan(cfg, values["stacked"],
                          model.calibrate(cfg, values["stacked"], **values["calibration"]),
                          config.fmt, config.parts)
    out = []
    with PersistentEngine(cfg, values["stacked"], config.precision, plan,
                          settings=Settings.parse(settings)) as engine:
        for io in (values["io"], C.draw(cfg, seed=seed + 1)["io"]):
            engine.set_inputs(io["x"], io["hx"], io["cx"])
            engine.forward()
            outs = {n: a.get() for n, a in engine.outputs().items()}
            out.append((engine.xin[0].get(), outs, engine.describe()["input_codes_by_kernel"]))
    return out


@pytest.mark.parametrize("seq,input_size,batch", [
    (9, 48, 32), (9, 50, 63), (9, 52, 63), (1, 48, 32), (2, 50, 63), (3, 48, 32),
    (4, 52, 63)])
@pytest.mark.parametrize("name", NAMES)
def test_the_kernel_writes_the_codes_the_quantizer_before_the_launch_writes(
        cuda, hopper, name, seq, input_size, batch):
    """Input 50: values read one at a time, 52 and 48: 16 bytes at a time (52: a row ends
    inside its last 16 bytes of codes); batch 63: a short last slice; 1 to 4 steps:
    the slots written before the first signal and the first written at a step. The second
    forward's codes come from its own x (none left from the first)."""
    cfg = _cfg(RNNMode.LSTM, DirectionMode.UNIDIRECTIONAL, 1, seq=seq, batch=batch,
               input_size=input_size)
    kernel = _codes_and_outputs(cfg, name, "b2t256u16wbeiq", seed=11)
    before = _codes_and_outputs(cfg, name, "b2t256u16wbei", seed=11)
    assert not np.array_equal(kernel[0][0], kernel[1][0])  # two inputs, two sets of codes
    for (codes, outs, by_kernel), (codes_b, outs_b, by_b) in zip(kernel, before):
        assert by_kernel >= 1 and by_b == 0
        assert np.array_equal(codes, codes_b), np.argwhere(codes != codes_b)[:8]
        for n in outs:
            assert np.array_equal(outs[n], outs_b[n]), n


def test_a_bound_input_is_the_one_the_kernel_quantizes(cuda, hopper):
    """Forward.bind(x=...) (as the PyTorch module binds a tensor): the kernel reads and
    quantizes the bound array, not the engine's own buffer, whose values differ."""
    cfg = _cfg(RNNMode.LSTM, DirectionMode.UNIDIRECTIONAL, 1, batch=32)
    values = C.draw(cfg, seed=4)
    plan = model.plan(cfg, values["stacked"],
                      model.calibrate(cfg, values["stacked"], **values["calibration"]),
                      "int8", "both")
    io, other = values["io"], C.draw(cfg, seed=5)["io"]
    outs = []
    for bound in (False, True):
        with PersistentEngine(cfg, values["stacked"], "fp16", plan,
                              settings=Settings.parse("b2t256u16wbeiq")) as engine:
            engine.set_inputs(other["x"] if bound else io["x"], io["hx"], io["cx"])
            if bound:
                engine.bind(x=cuda.asarray(io["x"], dtype=cuda.float32))
            engine.forward()
            outs.append({n: a.get() for n, a in engine.outputs().items()})
    assert not np.array_equal(other["x"], io["x"])
    for n in outs[0]:
        assert np.array_equal(outs[0][n], outs[1][n]), n


@pytest.mark.parametrize("settings", ["b2t256u16wbeiqx", "b2t256u16wbeiqxs2"])
@pytest.mark.parametrize("mode", [RNNMode.LSTM, RNNMode.GRU], ids=lambda m: m.name)
def test_the_kernels_own_codes_verify_with_the_input_copied_ahead(cuda, hopper, mode,
                                                                  settings):
    """'x' copies a step's first input stages before the step's wait: the codes it copies
    were written three steps ahead."""
    cfg = _cfg(mode, DirectionMode.UNIDIRECTIONAL, 1, hidden=128, batch=32, input_size=192)
    by_name = _verify_all(cfg, NAMES, settings, mode, True)
    for rec in by_name.values():
        launch = rec["algorithms"][-1]
        assert launch["input_stages_ahead"] > 0 and launch["input_codes_by_kernel"] >= 1


@pytest.mark.parametrize("spec,names,settings", [
    ("LSTM 20/2/512/64", NAMES, "b2t256u16wbeiq"),
    ("GRU 20/2/512/64", ["persistent:int8/both", "persistent:fp16"], "b2t256u16wbeiq"),
    ("LSTM 5/1/1024/256", ["persistent:int8/both", "persistent:e4m3/both"],
     "b2t256u16wbeiqs2"),
    ("GRU 5/1/1024/256", ["persistent:int8/both"], "b2t256u16wbeiqs2"),
    ("LSTM 5/1/1024/64", ["persistent:int8/both"], "b2t256u16wbeiq"),
])
def test_the_kernels_own_codes_verify_at_the_issues_shapes(cuda, hopper, spec, names,
                                                           settings):
    _verify_at(cuda, spec, names, settings)
