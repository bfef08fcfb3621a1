"""The resident kernel on a GPU (marker ``gpu``): every cell x {uni, bi} x {FP16, BF16, INT8,
E4M3} in clusters of 8 and of 16 CTAs verified against the float64 reference (original
weights and as seen) and an 8-bit one against its twin, captured in a graph whose replay
writes the plain launch's bytes; batches whose last n-tile is partial or odd; a broken
slice (one CTA's fragments zeroed) caught by the verification."""
import pytest

from cudnn_rnn.bindings.enums import DirectionMode, RNNMode
from cudnn_rnn.lowbit import candidates as C
from cudnn_rnn.lowbit.engine import capability
from cudnn_rnn.lowbit.launch import Settings
from cudnn_rnn.lowbit.resident import ResidentEngine

from .test_gpu_persistent import NAMES, _cfg, _check

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def fp8_capable(cuda):
    return capability(cuda) >= (8, 9)


@pytest.fixture(scope="module")
def clusters_capable(cuda):
    if capability(cuda) < (9, 0):
        pytest.skip("thread-block clusters need compute capability 9.0")


def _verify(cfg, names, settings, fp8_capable):
    result = C.run_configs(cfg, names, reps=3, warmup=1, budget_s=None, settings=[settings])
    records = result["records"]
    assert sorted(r["config"] for r in records) == sorted(names)
    for rec in records:
        _check(rec, cfg.mode, fp8_capable)
        if rec["outcome"] == "OK":  # the kernel that ran is the resident one, as laid out
            launch = rec["algorithms"][-1]
            assert rec["settings"] == settings and launch["kernel"] == "resident", launch
            assert launch["grid"] == launch["cluster"] * cfg.dirs
            assert launch["cluster"] * launch["threads"] // 32 * (
                16 if cfg.gates == 1 else 4) == cfg.hidden_size
    return records


@pytest.mark.parametrize("hidden", [256, 512])  # clusters of 8 and 16 CTAs (LSTM, GRU)
@pytest.mark.parametrize("direction", [DirectionMode.UNIDIRECTIONAL,
                                       DirectionMode.BIDIRECTIONAL], ids=lambda d: d.name[:3])
@pytest.mark.parametrize("mode", list(RNNMode), ids=lambda c: c.name)
def test_every_cell_direction_and_format_verifies_and_replays(cuda, clusters_capable,
                                                              fp8_capable, mode, direction,
                                                              hidden):
    cfg = _cfg(mode, direction, 1, hidden=hidden, batch=16, input_size=96)
    _verify(cfg, NAMES, "b1t256d", fp8_capable)


@pytest.mark.parametrize("batch", [5, 8, 24, 32])  # one n-tile partial; 1, 3 and 4 n-tiles
@pytest.mark.parametrize("mode", [RNNMode.LSTM, RNNMode.RNN_TANH], ids=lambda c: c.name)
def test_batches_of_partial_and_odd_n_tiles_verify(cuda, clusters_capable, fp8_capable, mode,
                                                   batch):
    cfg = _cfg(mode, DirectionMode.UNIDIRECTIONAL, 1, hidden=128, batch=batch)
    _verify(cfg, ["persistent:fp16", "persistent:int8/both"], "b1t128d", fp8_capable)


@pytest.mark.parametrize("seq", [1, 2, 3])  # no hand-off; no re-arming; one re-arming
@pytest.mark.parametrize("threads,direction", [(256, DirectionMode.BIDIRECTIONAL),
                                               (128, DirectionMode.BIDIRECTIONAL)],
                         ids=["bulk", "stores"])  # H 128: 32 units a CTA, then 16 (8 bits)
def test_the_shortest_sequences_verify_in_both_hand_offs(cuda, clusters_capable, fp8_capable,
                                                         seq, threads, direction):
    cfg = _cfg(RNNMode.LSTM, direction, 1, seq=seq, hidden=128, batch=16)
    records = _verify(cfg, ["persistent:int8/both"], f"b1t{threads}d", fp8_capable)
    assert records[0]["algorithms"][-1]["handed_by"] == (
        "bulk copies" if threads == 256 else "stores")


def test_a_broken_slice_is_caught_by_the_verification(cuda, clusters_capable):
    cfg = _cfg(RNNMode.LSTM, DirectionMode.UNIDIRECTIONAL, 1, hidden=256, batch=16)
    values = C.draw(cfg, seed=2)
    ref = C.expected(cuda, cfg, values["stacked"], values["io"])
    config = C.parse("persistent:fp16")
    with ResidentEngine(cfg, values["stacked"], "fp16", None, Settings(resident=True)) as e:
        facts, wrong = C.verify(cuda, cfg, config, e, values, ref, None)
        assert wrong is None, facts
        sh = e.shape
        per_cta = e.frags.size // sh.cluster
        with e.stream:  # (the stream the launches read it on)
            e.frags[per_cta * (sh.cluster // 2):per_cta * (sh.cluster // 2 + 1)] = 0
        facts, wrong = C.verify(cuda, cfg, config, e, values, ref, None)
        assert wrong and "bound" in wrong, facts
