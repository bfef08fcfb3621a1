"""Reading cuDNN's API log (recorded real PyTorch runs) and replaying PyTorch's configuration
through our descriptors (real cuDNN, descriptor stage: no GPU needed)."""
from pathlib import Path

import pytest

from cudnn_rnn.bindings.enums import DataType, ForwardMode, MathType, RNNAlgo, RNNDataLayout, RNNMode
from cudnn_rnn.compare import apilog, pytorch
from cudnn_rnn.compare import overhead as measuring
from cudnn_rnn.engine.flow import DESCRIPTOR_STAGES, RNNFlow

LOGS = Path(__file__).parent / "fixtures" / "apilog"


def settings(name):
    return apilog.rnn_forward_settings(apilog.parse((LOGS / f"torch_lstm_{name}.txt").read_text()))


# the runs behind the logs (fixtures/apilog/README.md): T, B and the input size (= hidden)
XDIMS = {"fp32_eval": [20, 64, 512], "fp32_train": [20, 64, 512], "fp16_eval": [25, 64, 1024],
         "fp32_small": [20, 8, 128]}


@pytest.mark.parametrize("name,algo,dtype,math,mode,hidden", [
    ("fp32_eval", RNNAlgo.STANDARD, DataType.FLOAT, MathType.DEFAULT_MATH, ForwardMode.INFERENCE, 512),
    ("fp32_train", RNNAlgo.STANDARD, DataType.FLOAT, MathType.DEFAULT_MATH, ForwardMode.TRAINING, 512),
    ("fp16_eval", RNNAlgo.PERSIST_STATIC, DataType.HALF, MathType.TENSOR_OP_MATH,
     ForwardMode.INFERENCE, 1024),
    ("fp32_small", RNNAlgo.PERSIST_STATIC_SMALL_H, DataType.FLOAT, MathType.DEFAULT_MATH,
     ForwardMode.INFERENCE, 128),
])
def test_pytorchs_forward_settings_are_read_from_the_log(name, algo, dtype, math, mode, hidden):
    s = settings(name)
    assert s["cudnn_version"] == 91900
    assert (s["algo"], s["dataType"], s["mathMode"], s["fwdMode"]) == (algo, dtype, math, mode)
    assert s["mathPrec"] == DataType.FLOAT  # PyTorch promotes HALF to FLOAT math precision
    assert s["cellMode"] == RNNMode.LSTM and s["hiddenSize"] == hidden == s["projSize"]
    assert s["layout"] == RNNDataLayout.SEQ_MAJOR_UNPACKED and s["auxFlags"] == 1
    assert s["xDims"] == XDIMS[name]  # [seqLength, batch, inputSize] of the logged run
    assert s["devSeqLengths"] == "NULL"  # PyTorch leaves the lengths to xDesc
    assert s["workSpaceSize"] > 0 and s["weightSpaceSize"] > 0
    assert (s["reserveSpaceSize"] > 0) == (mode == ForwardMode.TRAINING)


def test_nested_fields_get_dotted_paths_and_first_value_wins():
    text = (LOGS / "torch_lstm_fp32_eval.txt").read_text()
    calls = apilog.parse(text)
    names = [c.name for c in calls]
    assert names[0] == "cudnnSetRNNDescriptor_v8" and names[-1] == "cudnnRNNForward"
    fwd = calls[-1]
    assert fwd.fields["handle.deviceProp.deviceName"] == '"NVIDIA H200"'
    assert fwd.enum("rnnDesc.cellMode") == 2 and fwd.int("rnnDesc.numLayers") == 2
    assert fwd.ints("xDesc.seqLengthArray") == [20] * 64
    assert apilog.rnn_forward_settings(calls[:1]) is None  # no forward in the first block


def test_requests_match_only_their_own_forward():
    calls = [c for c in apilog.parse((LOGS / "torch_lstm_fp32_eval.txt").read_text())
             if c.name == "cudnnRNNForward"]
    req = {"cell": "LSTM", "seq": 20, "layers": 2, "hidden": 512, "batch": 64, "input_size": 512,
           "bidirectional": False}
    assert pytorch._last_matching(calls, req)["algo"] == RNNAlgo.STANDARD
    for change in ({"batch": 32}, {"training": True}, {"cell": "GRU"}, {"dtype": "float16"}):
        assert pytorch._last_matching(calls, req | change) is None


@pytest.mark.parametrize("name", ["fp32_eval", "fp16_eval", "fp32_small"])
def test_pytorchs_configuration_passes_our_descriptor_stages(lib, name):
    s = {k: (v.name if hasattr(v, "name") else v) for k, v in settings(name).items()}
    t, b = s["xDims"][0], s["xDims"][1]
    cfg = measuring.config_from_settings({"seq": t, "batch": b}, s)
    assert cfg.padded_io and cfg.layout == RNNDataLayout.SEQ_MAJOR_UNPACKED
    with RNNFlow(cfg, lib, device=False) as flow:
        result = flow.run()
    assert result.failure is None, result.failure
    assert set(DESCRIPTOR_STAGES) <= set(result.reached)
