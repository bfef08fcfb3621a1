"""The seed's calls replayed on the real library (descriptor level, no GPU needed)."""
from bindings.enums import DirectionMode, RNNMode
from cudnn_rnn.config import RNNConfig
from cudnn_rnn.seed_replay import SEED, SENTINEL, parameter_count, replay


def test_parameter_count_formula():
    # 2 layers x (W 512x512 + R 512x512 + bW + bR) for RNN_RELU
    assert parameter_count(SEED) == 2 * (2 * 512 * 512 + 2 * 512)
    lstm = RNNConfig(cell=RNNMode.LSTM, num_layers=1, hidden_size=4, input_size=3,
                     direction=DirectionMode.BIDIRECTIONAL, proj_size=2)
    # per direction: W 4x(4x3) + R 4x(4x2) + biases 2x4x4 + projection 2x4
    assert parameter_count(lstm) == 2 * (48 + 32 + 32 + 8)


def test_replay_separates_the_real_refusal_from_its_consequences(lib):
    steps = {s["call"] + (s.get("args") or "")[:12]: s for s in replay(lib, device=False)}
    rnn = next(s for s in steps.values() if s["call"] == "cudnnSetRNNDescriptor_v8")
    assert rnn["status"] == "NOT_SUPPORTED"
    size = next(s for s in steps.values() if s["call"] == "cudnnGetRNNWeightSpaceSize")
    assert size["status"] != "SUCCESS"
    assert size["output_written"] is False and size["output_after"] == SENTINEL
    filters = [s for s in steps.values() if s["call"] == "cudnnSetFilterNdDescriptor"]
    assert {s["args"].split(",")[0] for s in filters} == {"CUDNN_DATA_INT8", "CUDNN_DATA_FLOAT"}
    assert all("status" in s for s in filters)
