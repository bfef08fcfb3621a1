"""A user's torch.nn.LSTM / GRU / RNN as cudnn_rnn.torch sees it: the state_dict mapping
of every module kind onto cuDNN's layout (the float64 reference on the mapped weights gives
the module's own outputs), what is refused and how (one line), and the digest a plan file
names its module by.

Without PyTorch the mapping is checked on the saved state_dicts and outputs of real modules
(tests/fixtures/torch-rnn: LSTM with a projection, GRU, tanh RNN, ReLU RNN); with it, on
modules built here, of every kind, direction, depth and data type."""
import re
from pathlib import Path

import numpy as np
import pytest

from cudnn_rnn.charlm import files, network
from cudnn_rnn.torch import modules
from cudnn_rnn.torch.errors import NotAccelerated
from cudnn_rnn.torch.modules import ModuleSpec

FIX = Path(__file__).parent / "fixtures" / "torch-rnn"
# fixture -> the module it was saved from (tools/torch_fixture.py)
SAVED = {"lstm": ModuleSpec("LSTM", 2, 12, 16, 8, True, False, "float32"),
         "gru": ModuleSpec("GRU", 1, 12, 16, 16, False, False, "float32"),
         "rnn_tanh": ModuleSpec("RNN_TANH", 2, 12, 16, 16, True, False, "float32"),
         "rnn_relu": ModuleSpec("RNN_RELU", 1, 12, 16, 16, False, False, "float32")}


@pytest.mark.parametrize("name", sorted(SAVED))
def test_every_saved_module_kind_maps_onto_the_reference_of_its_own_outputs(name):
    state = files.read_weights(FIX / f"{name}.npz")
    rnn = modules.weights(state, SAVED[name])
    x = np.load(FIX / f"{name}-inputs.npy").astype(np.float64)
    want = np.load(FIX / f"{name}-outputs.npz")
    got = network.reference_outputs(rnn, x)
    np.testing.assert_allclose(got["y"], want["y"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(got["hy"], want["h_n"], rtol=0, atol=1e-12)
    if "c_n" in want:
        np.testing.assert_allclose(got["cy"], want["c_n"], rtol=0, atol=1e-12)


def test_a_relu_rnn_read_as_tanh_would_not_give_its_outputs():
    """The nonlinearity is not in a state_dict: the spec's cell decides it."""
    state = files.read_weights(FIX / "rnn_relu.npz")
    x = np.load(FIX / "rnn_relu-inputs.npy").astype(np.float64)
    want = np.load(FIX / "rnn_relu-outputs.npz")["y"]
    as_tanh = ModuleSpec(**{**SAVED["rnn_relu"].as_dict(), "cell": "RNN_TANH"})
    got = network.reference_outputs(modules.weights(state, as_tanh), x)["y"]
    assert np.abs(got - want).max() > 1e-2


def test_tensors_that_do_not_describe_the_module_are_refused():
    state = files.read_weights(FIX / "gru.npz")
    with pytest.raises(NotAccelerated, match=re.escape("describe ('GRU', 1, 12, 16, 16")):
        modules.weights(state, ModuleSpec("GRU", 1, 12, 32, 32, False, False, "float32"))
    state.pop("bias_hh_l0")
    with pytest.raises(NotAccelerated, match="has no 'bias_hh_l0'"):
        modules.weights(state, SAVED["gru"])


def test_the_digest_names_the_weights_and_nothing_else():
    state = files.read_weights(FIX / "lstm.npz")
    d = modules.digest(state)
    assert d == modules.digest({k: state[k].copy() for k in reversed(list(state))})
    changed = {k: v.copy() for k, v in state.items()}
    changed["weight_hh_l1"][0, 0] = np.nextafter(changed["weight_hh_l1"][0, 0], 1, dtype=np.float32)
    assert modules.digest(changed) != d
    renamed = dict(state)
    renamed["x"] = renamed.pop("bias_hh_l0")
    assert modules.digest(renamed) != d


@pytest.mark.parametrize("device,gpu_reason,needle", [
    ("cpu", "no NVIDIA driver found", "accelerate needs a CUDA GPU: no NVIDIA driver found"),
    ("cuda", "CUDNN_RNN_NO_GPU is set", "accelerate needs a CUDA GPU: CUDNN_RNN_NO_GPU is set"),
    ("cpu", None, "the module is on the CPU; move it to the GPU first (module.cuda())"),
    ("cuda", None, None)])
def test_where_a_module_can_run(device, gpu_reason, needle):
    assert modules.device_refusal(device, gpu_reason) == needle


# ---------------------------------------------------------------------------- with PyTorch
def _torch():
    return pytest.importorskip("torch", reason="real torch.nn modules need PyTorch")


KINDS = [("LSTM", {}), ("GRU", {}), ("RNN", {"nonlinearity": "tanh"}),
         ("RNN", {"nonlinearity": "relu"}), ("LSTM", {"proj_size": 3}), ("GRU", {"bias": False})]


@pytest.mark.parametrize("kind,extra", KINDS, ids=lambda v: str(v))
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_every_module_kind_maps_onto_the_reference_of_its_float64_forward(
        kind, extra, bidirectional, layers, dtype):
    torch = _torch()
    from cudnn_rnn.torch.tuning import check_mapping
    torch.manual_seed(layers)
    m = getattr(torch.nn, kind)(5, 7, layers, bidirectional=bidirectional, batch_first=True,
                                **extra).to(getattr(torch, dtype))
    spec = modules.inspect(m)
    assert (spec.layers, spec.bidirectional, spec.batch_first, spec.dtype) == \
        (layers, bidirectional, True, dtype)
    rnn = modules.weights(modules.state_arrays(m), spec)
    x = torch.randn(6, 3, 5).to(getattr(torch, dtype))  # (seq, batch, input)
    check_mapping(m, spec, rnn, x, torch, np)  # the module's own float64 forward agrees
    y, st = m.double()(x.double().transpose(0, 1))
    got = network.reference_outputs(rnn, x.double().numpy())
    np.testing.assert_allclose(got["y"], y.detach().transpose(0, 1).numpy(), atol=1e-12)
    h = st[0] if kind == "LSTM" else st
    np.testing.assert_allclose(got["hy"], h.detach().numpy(), atol=1e-12)


def test_a_module_whose_forward_is_not_its_classs_is_refused():
    torch = _torch()
    from cudnn_rnn.torch.tuning import check_mapping

    class Scaled(torch.nn.GRU):
        def forward(self, x, hx=None):
            y, h = super().forward(x, hx)
            return 2 * y, h

    m = Scaled(5, 7)
    spec = modules.inspect(m)
    rnn = modules.weights(modules.state_arrays(m), spec)
    with pytest.raises(NotAccelerated, match="its forward is not torch.nn.Scaled's"):
        check_mapping(m, spec, rnn, torch.randn(4, 2, 5), torch, np)


@pytest.mark.parametrize("make,needle", [
    (lambda t: t.nn.Linear(3, 4), "takes a torch.nn.LSTM, GRU or RNN, not a Linear"),
    (lambda t: t.nn.LSTM(3, 4).double(), "the module's weights are float64; give float32"),
    (lambda t: t.nn.Sequential(t.nn.LSTM(3, 4)), "not a Sequential"),
])
def test_what_is_not_such_a_module_is_refused_in_one_line(make, needle):
    torch = _torch()
    from cudnn_rnn.torch import accelerate
    with pytest.raises(NotAccelerated, match=re.escape(needle)):
        accelerate(make(torch), (4, 2))


@pytest.mark.parametrize("kw,needle", [
    ({"precision": "fp4"}, "precision 'fp4' is not one of"),
    ({"tolerance": 0}, "tolerance must be a positive"),
    ({"methods": "kl"}, "calibration method 'kl' is not one of max"),
    ({}, "accelerate needs a CUDA GPU"),
])
def test_accelerate_refuses_a_cpu_module_or_no_gpu_in_one_line(kw, needle, monkeypatch):
    torch = _torch()
    from cudnn_rnn.engine import gpu
    from cudnn_rnn.torch import accelerate
    monkeypatch.setenv("CUDNN_RNN_NO_GPU", "1")  # as on a machine without one, GPU or not
    gpu._probe.cache_clear()
    try:
        with pytest.raises(NotAccelerated, match=re.escape(needle)) as exc:
            accelerate(torch.nn.LSTM(3, 4), (4, 2), **kw)
    finally:
        gpu._probe.cache_clear()
    assert "\n" not in str(exc.value)


def test_a_module_on_the_cpu_of_a_machine_with_a_gpu_is_refused(cuda):
    torch = _torch()
    from cudnn_rnn.torch import accelerate
    with pytest.raises(NotAccelerated, match=re.escape("the module is on the CPU; move it")):
        accelerate(torch.nn.LSTM(3, 4), (4, 2))
