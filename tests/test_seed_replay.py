"""The seed's calls replayed on the real library (descriptor level; the handle's part on a GPU)."""
import pytest

from cudnn_rnn.bindings.enums import DirectionMode, RNNMode
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.matrix.seed_replay import SEED, SENTINEL, parameter_count, replay


def test_parameter_count_formula():
    # 2 layers x (W 512x512 + R 512x512 + bW + bR) for RNN_RELU
    assert parameter_count(SEED) == 2 * (2 * 512 * 512 + 2 * 512)
    lstm = RNNConfig(mode=RNNMode.LSTM, num_layers=1, hidden_size=4, input_size=3,
                     direction=DirectionMode.BIDIRECTIONAL, proj_size=2)
    # per direction: W 4x(4x3) + R 4x(4x2) + biases 2x4x4 + projection 2x4
    assert parameter_count(lstm) == 2 * (48 + 32 + 32 + 8)


def test_without_a_handle_the_size_query_fails_on_the_handle_not_on_the_refusal(lib):
    """Without a GPU there is no handle, and cuDNN refuses the size query for that reason
    alone (it names the handle): what the query does on a refused descriptor can only be
    seen on a GPU (next test). The descriptor's own refusal needs no handle."""
    steps = replay(lib, device=False)
    rnn = next(s for s in steps if s["call"] == "cudnnSetRNNDescriptor_v8")
    assert (rnn["status"], rnn["status_code"]) in (("NOT_SUPPORTED", 3000), ("NOT_SUPPORTED", 9))
    size = next(s for s in steps if s["call"] == "cudnnGetRNNWeightSpaceSize")
    assert size["status"] == "BAD_PARAM" and "handle" in (size["reason"] or ""), size
    assert size["output_written"] is False and size["output_after"] == SENTINEL
    assert "no handle" in size["args"]
    filters = [s for s in steps if s["call"] == "cudnnSetFilterNdDescriptor"]
    assert [s["args"].split(",")[0] for s in filters] == ["CUDNN_DATA_INT8", "CUDNN_DATA_FLOAT"]
    assert [s["status"] for s in filters] == ["SUCCESS", "SUCCESS"]  # a correct size passes


@pytest.mark.gpu
def test_on_a_gpu_the_refused_descriptor_answers_zero_bytes(lib, cuda):
    """With a handle the query on the descriptor cudnnSetRNNDescriptor_v8 refused succeeds
    and writes 0 (the H200 runs with cuDNN 9.14 and 9.19 recorded this): a program that
    ignored the refusal would size its buffers from a zero, not from garbage."""
    steps = replay(lib, device=True)
    size = next(s for s in steps if s["call"] == "cudnnGetRNNWeightSpaceSize")
    assert (size["status"], size["output_written"], size["output_after"]) == ("SUCCESS", True, 0), size
