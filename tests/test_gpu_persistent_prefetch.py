"""The input part of the next step copied ahead on a GPU (marker ``gpu``; sm_90a: launch
shapes with 'x' after 'i'): an LSTM and a GRU of one layer in each direction (the reverse
one copies step T - 2 - s ahead) and every format verified against the float64 reference
and replayed bit for bit; at the issue's shapes, where the ring is shallower than a step and
each of its input stages is copied ahead and refilled within the step; refused, with the
reason, where a layer above would wait (tests/test_persistent_prefetch.py plans them)."""
import pytest

from cudnn_rnn.bindings.enums import DirectionMode, RNNMode
from cudnn_rnn.lowbit import candidates as C

from tests.test_gpu_persistent import _cfg, _verify_all
from tests.test_gpu_persistent_wg import NAMES, _verify_at, hopper  # noqa: F401

pytestmark = pytest.mark.gpu


# the gate math in registers (with copies of 4 and 2 chunks), and in shared memory ('wbix':
# the partial sums, every k-group's, over the recurrent part's stages)
@pytest.mark.parametrize("settings", ["b2t256u16wbeix", "b2t256u16wbeixs2", "b2t256u8wbix"])
@pytest.mark.parametrize("direction", [DirectionMode.UNIDIRECTIONAL,
                                       DirectionMode.BIDIRECTIONAL], ids=lambda d: d.name[:3])
@pytest.mark.parametrize("mode", [RNNMode.LSTM, RNNMode.GRU], ids=lambda m: m.name)
def test_every_format_and_direction_verifies_with_the_input_copied_ahead(cuda, hopper, mode,
                                                                        direction, settings):
    cfg = _cfg(mode, direction, 1, hidden=128, batch=32, input_size=192)  # 3 input slabs of 2
    by_name = _verify_all(cfg, NAMES, settings, mode, True)
    for rec in by_name.values():
        launch = rec["algorithms"][-1]
        assert rec["outcome"] == "OK" and launch["input_stages_ahead"] > 0


@pytest.mark.parametrize("spec,names", [
    ("LSTM 5/1/1024/256", ["persistent:int8/both", "persistent:e4m3/both"]),
    ("GRU 5/1/1024/256", ["persistent:int8/both"]),
])
def test_the_input_copied_ahead_verifies_on_a_ring_shallower_than_a_step(cuda, hopper, spec,
                                                                         names):
    by_name = _verify_at(cuda, spec, names, "b2t256u16wbeixs2")
    for rec in by_name.values():
        launch = rec["algorithms"][-1]
        assert launch["input_stages_ahead"] == launch["ring_stages"] < launch["slabs_per_step"]


def test_two_layers_are_refused_with_the_reason_before_any_launch(cuda, hopper):
    cfg = _cfg(RNNMode.LSTM, DirectionMode.UNIDIRECTIONAL, 2, batch=32)
    result = C.run_configs(cfg, ["persistent:int8/both"], reps=3, warmup=1, budget_s=None,
                           settings=["b2t256u16wbeix"])
    rec, = result["records"]
    assert rec["outcome"] == "NOT_SUPPORTED" and "takes one layer" in rec["reason"]
