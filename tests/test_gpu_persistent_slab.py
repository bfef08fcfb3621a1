"""Bulk copies of fewer chunks on a GPU (marker ``gpu``; sm_90a: launch shapes with
's<chunks>'): every cell, direction and format verified against the float64 reference and
replayed bit for bit, with each copy 1 or 2 chunks; at the issue's shapes, rings shallower
than a step's slabs, refilled a stage at a time (tests/test_persistent_slab.py plans them)."""
import pytest

from cudnn_rnn.bindings.enums import DirectionMode, RNNMode
from cudnn_rnn.lowbit.persistent import Settings

from tests.test_gpu_persistent import _cfg, _verify_all
from tests.test_gpu_persistent_wg import NAMES, _shape, _verify_at, hopper  # noqa: F401

pytestmark = pytest.mark.gpu


# every cell with copies of 1 chunk; the gate math in registers ('e', with 'i' and copies
# of 2: the tuner's first bulk shape) is an LSTM's or a GRU's only
CELLS = [(mode, "b2t256u8wbs1") for mode in RNNMode] + [
    (mode, "b2t256u16wbeis2") for mode in (RNNMode.LSTM, RNNMode.GRU)]


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("direction", [DirectionMode.UNIDIRECTIONAL,
                                       DirectionMode.BIDIRECTIONAL], ids=lambda d: d.name[:3])
@pytest.mark.parametrize("mode,settings", CELLS, ids=lambda v: getattr(v, "name", v))
def test_every_cell_direction_and_format_verifies_with_smaller_copies(cuda, hopper, mode,
                                                                     direction, layers, settings):
    # a batch of 32: two slices of 16 rows, what the gate math in registers takes
    by_name = _verify_all(_cfg(mode, direction, layers, batch=32), NAMES, settings, mode, True)
    assert all(rec["outcome"] == "OK" for rec in by_name.values())


def test_one_chunk_copies_refill_a_ring_shallower_than_a_step_on_any_hopper(cuda, hopper):
    """LSTM 5/1/512/256 in FP16 on 64 CTAs (an H100 PCIe's 114 multiprocessors take it):
    16 slabs a step through 13 stages, which do not divide them, so each stage is refilled
    within the step and its phases differ from one stage to the next."""
    mode, cfg = _shape("LSTM 5/1/512/256")
    by_name = _verify_all(cfg, ["persistent:fp16"], "b2t256u16wbs1", mode, True)
    launch = by_name["persistent:fp16"]["algorithms"][-1]
    assert by_name["persistent:fp16"]["outcome"] == "OK" and launch["grid"] <= 114
    assert launch["slabs_per_step"] % launch["ring_stages"] and \
        2 < launch["ring_stages"] < launch["slabs_per_step"]


@pytest.mark.parametrize("spec,names,settings", [
    ("LSTM 5/1/1024/256", ["persistent:int8/both", "persistent:e4m3/both"], "b2t256u16wbeis2"),
    ("LSTM 5/1/1024/256", ["persistent:int8/both"], "b2t256u16wbeis1"),
    ("GRU 5/1/1024/256", ["persistent:int8/both"], "b2t256u16wbeis2"),
    ("LSTM 5/1/1024/256", ["persistent:fp16"], "b2t256u16wbes1"),  # staged projection
    ("LSTM 5/1/1024/256", ["persistent:fp16"], "b2t256u16wbes2"),  # the tuner's, there
    ("LSTM 5/1/2048/128", ["persistent:int8/both"], "b1t256u16wbes1"),  # likewise
    ("LSTM 5/1/2048/128", ["persistent:int8/both", "persistent:e4m3/both"],
     "b1t256u16wbes2"),  # the tuner's, there (a ring of three)
    ("LSTM 5/1/2048/128", ["persistent:int8/both"], "b1t256u16wbges2"),
])
def test_smaller_copies_verify_on_rings_shallower_than_a_step(cuda, hopper, spec, names,
                                                              settings):
    """(Where shared memory has room for one more stage of one group, the second group's
    ring is one stage deeper than k-group 0's: tests/test_persistent_stages0.py.)"""
    by_name = _verify_at(cuda, spec, names, settings)
    for rec in by_name.values():
        launch = rec["algorithms"][-1]
        assert launch["bulk_staging"] and 2 < launch["ring_stages"] < launch["slabs_per_step"]
        assert launch["chunks_per_slab"] == Settings.parse(settings).slab
        assert launch["ring_stages_group0"] in (launch["ring_stages"] - 1,
                                                launch["ring_stages"])
    if settings in ("b2t256u16wbeis2", "b1t256u16wbes2"):  # two depths (STAGES0) at these
        assert all(rec["algorithms"][-1]["ring_stages_group0"]
                   == rec["algorithms"][-1]["ring_stages"] - 1 for rec in by_name.values())
