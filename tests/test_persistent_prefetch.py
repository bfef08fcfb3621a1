"""The input part of the next step copied ahead (launch shapes with 'x' after 'i'): with layer
0's input products in the kernel and one layer, the input codes of every step are written
before the launch, so the input part's warpgroups copy the next step's first ring stages as
soon as their products of a step are done, and those copies are in flight through the gate
math, the signal and the next step's wait. Without a GPU: the name and its refusals, the
ring laid out group by group with the partial sums past the input part's stages, and the
kernels compiled for sm_90a at the issue's shapes without spills or serialized wgmma."""
import pytest

from cudnn_rnn.lowbit import partition
from cudnn_rnn.lowbit import persistent as P
from cudnn_rnn.lowbit.launch import Settings
from cudnn_rnn.lowbit.partition import CHUNK

from tests.test_persistent_inside import _plan, compiles_clean
from tests.test_persistent_wg import _seed, _shape


def test_the_launch_shape_names_it_with_an_x_after_the_i():
    for name in ("b2t256u16wbeixs2", "b2t256u16wbeix", "b2t256u8wbix"):
        s = Settings.parse(name)
        assert s.name == name and s.prefetch and s.partition_args()["prefetch"]
    assert "prefetch" not in Settings.parse("b2t256u16wbeis2").partition_args()
    with pytest.raises(ValueError, match="no launch shape"):
        Settings.parse("b2t256u16wbexi")  # 'x' before 'i'
    with pytest.raises(ValueError, match="name 'i' first"):
        Settings(batch_slices=2, units=16, wg=True, bulk=True, prefetch=True)


@pytest.mark.parametrize("cfg,name,reason", [
    (_seed(), "b2t256u16wbeixs2", "takes one layer"),  # layer 1 waits for layer 0's h
    (_shape("LSTM 50/1/1024/256"), "b2t256u16wbix",  # the partial sums in shared memory
     r"partial sums \(69632 bytes\) must fit the recurrent part's stages \(32768 bytes\)"),
    (_shape("LSTM 50/1/1024/64"), "b2t256u16wbeixm2", "without shared copies"),
])
def test_the_partition_refuses_it_where_the_input_stages_would_not_stay_free(cfg, name, reason):
    with pytest.raises(partition.DoesNotFit, match=reason):
        _plan(cfg, name)


@pytest.mark.parametrize("spec,name,fmt", [("LSTM 50/1/1024/256", "b2t256u16wbeixs2", "int8"),
                                           ("GRU 50/1/1024/256", "b2t256u16wbeixs2", "e4m3"),
                                           ("LSTM 50/1/1024/64", "b2t256u16wbeix", "int8")])
def test_it_takes_no_shared_memory_and_the_partial_sums_leave_the_input_stages_free(
        spec, name, fmt):
    """The same ring as without 'x', less the stage the twin's second group takes where
    room is left (its ``stages0``: 'x' keeps an equal ring), no more shared memory, and the
    partial sums, laid past the input part's group of stages (the ring group by group), end
    within the ring: the copies in flight into those stages during the gate math meet no
    write of the sums."""
    cfg = _shape(spec)
    ahead, twin = _plan(cfg, name, fmt), _plan(cfg, name.replace("x", ""), fmt)
    assert ahead.prefetch and not twin.prefetch and not ahead.stages0
    assert (ahead.stages, ahead.slab) == (twin.stages0 or twin.stages, twin.slab)
    assert ahead.smem <= twin.smem
    d = P.defines(cfg, ahead, gx_int=False)
    assert d["PREX"] == d["XE"] == d["GR"] == 1 and "PREX" not in P.defines(cfg, twin, False)
    stage = d["WGN"] * d["SLAB"] * CHUNK
    for s in ahead.slices:
        sums = partition.partial_bytes(cfg, s.npad, s.mpad, s.ks, s.nxc, True)
        assert s.kx == 1 and s.off_ring + s.kx * ahead.stages * stage + sums <= s.smem


@pytest.mark.parametrize("spec,name,fmt", [("LSTM 50/1/1024/256", "b2t256u16wbeixs2", "int8"),
                                           ("LSTM 50/1/1024/256", "b2t256u16wbeixs2", "e4m3"),
                                           ("GRU 50/1/1024/256", "b2t256u16wbeixs2", "int8"),
                                           ("LSTM 50/1/1024/64", "b2t256u16wbeix", "int8")])
def test_the_kernels_compile_without_spills_or_serialized_wgmma(spec, name, fmt):
    compiles_clean(spec, name, fmt)


def test_a_list_that_names_x_and_its_twin_tries_both():
    """'x' is not in the tuner's own list (slower than the fastest shape without it wherever
    it ran: launch.py's note); a list a user names (``--settings``) with both an 'x' shape
    and its twin times both, whichever verified first."""
    assert not any(s.prefetch for s in P.SETTINGS)
    for twin in ("b2t256u16wbeis2", "b2t256u16wbei"):
        x, t = Settings.parse(twin.replace("bei", "beix")), Settings.parse(twin)
        assert x.prefetch and x.name.replace("x", "") == twin
        assert P.not_tried(x, [t], (x, t)) is None and P.not_tried(t, [x], (x, t)) is None
