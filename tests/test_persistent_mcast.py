"""Bulk copies shared by cluster-mates (launch shapes with 'wbm<N>', the kernel's ``MCAST``)
without a GPU: the name, the partition (mates of one group that stage alike, a ring of a
whole step), what each CTA then reads from L2, each refusal with what is short, and the
kernel compiled for sm_90a with the multicast copy, without spills or serialized wgmma
(tests/test_gpu_persistent_wg.py runs it)."""
import re

import pytest

from cudnn_rnn.bindings.enums import RNNMode
from cudnn_rnn.lowbit import partition
from cudnn_rnn.lowbit import persistent as P
from cudnn_rnn.lowbit.cubin import compile_source
from cudnn_rnn.lowbit.launch import Settings

from tests.test_clusters import _ptx
from tests.test_persistent import CELLS, SMEM, _cfg, _nvrtc_or_skip
from tests.test_persistent_wg import SERIALIZED, _ptxas_log, _seed


def _plan(cfg, fmt, **kw):
    kw = dict(dict(sm_count=132, batch_slices=2, units=16, wg=True, bulk=True), **kw)
    return partition.plan(cfg, fmt, fmt, smem_per_block=SMEM, **kw)


def test_the_launch_shape_names_a_shared_copy_with_m_after_the_bulk_copy():
    s = Settings.parse("b2t256u16wbm2")
    assert (s.wg, s.bulk, s.mcast, s.units) == (True, True, 2, 16)
    assert s.name == "b2t256u16wbm2"
    assert s.partition_args()["mcast"] == 2
    assert Settings.parse("b2t256u16wb").mcast == 0
    with pytest.raises(ValueError, match="'wb' first"):
        Settings(batch_slices=2, wg=True, mcast=2)
    with pytest.raises(ValueError, match="'wb' first"):
        Settings.parse("b2t256u16wm2")
    with pytest.raises(ValueError, match="'m2' or more"):
        Settings.parse("b2t256u16wbm1")


@pytest.mark.parametrize("fmt,slabs", [("fp16", 8), ("int8", 4)])
@pytest.mark.parametrize("mates", [2, 4])
def test_mates_share_a_step_of_copies_and_each_reads_its_share_from_l2(fmt, slabs, mates):
    """At the seed's shape each group's 32 CTAs pair off in clusters of their own group, on
    a ring that holds the step's slabs; each CTA copies 1/mates of them."""
    cfg = _seed()
    alone, shared = _plan(cfg, fmt), _plan(cfg, fmt, mcast=mates)
    assert (alone.mcast, shared.mcast) == (0, mates)
    assert shared.wg_slabs == slabs and shared.stages >= slabs
    for i in range(0, shared.grid, mates):
        mates_of = shared.slices[i:i + mates]
        assert len({(s.k, s.bs, s.off_ring) for s in mates_of}) == 1
    # a CTA's two warpgroups each copy their share of the step's slabs: 32 rows (the batch
    # slice) of SLAB chunks of 32 bytes each
    read = lambda p: p.step_bytes()["state_read_bytes"]  # noqa: E731
    assert read(alone) == 2 * slabs * 4 * 32 * 32
    assert read(shared) == 2 * -(-slabs // mates) * 4 * 32 * 32
    consts = P.defines(cfg, shared, gx_int=fmt == "int8")
    assert consts["MCAST"] == mates and "MCAST" not in P.defines(cfg, alone, fmt == "int8")


@pytest.mark.parametrize("cfg,fmt,kw,message", [
    (_cfg(RNNMode.LSTM, 1, False, H=1024, B=256, T=50, I=1024), "int8", {},
     r"a ring of a whole step \(4 slabs\); 3 stages"),
    (_cfg(RNNMode.LSTM, 1, False, H=48, B=16, T=5, I=48), "int8", {},
     "takes 3 CTAs a batch slice, not clusters of 2"),
    (_cfg(RNNMode.LSTM, 2, True, H=56, B=16, T=5, I=48), "fp16", {},
     r"CTAs 2\.\.3 do not stage alike"),
    (_seed(), "int8", {"mcast": 1}, "2 to 16"),
    (_seed(), "int8", {"mcast": 3}, "not clusters of 3"),
    (_seed(), "int8", {"bulk": False}, "'wb' first"),
])
def test_each_refusal_of_a_shared_copy_says_what_is_short(cfg, fmt, kw, message):
    kw = dict({"mcast": 2}, **kw)
    with pytest.raises(partition.DoesNotFit, match=message):
        _plan(cfg, fmt, **kw)


@pytest.mark.parametrize("mode", CELLS)
@pytest.mark.parametrize("fmt", ["int8", "fp16"])
def test_the_shared_copy_kernel_compiles_for_sm_90a_with_the_multicast(mode, fmt):
    """Each CTA's share of a step's slabs one multicast copy each, no spills, no wgmma
    serialized."""
    _nvrtc_or_skip()
    cfg = _seed(mode)
    part = _plan(cfg, fmt, units=64 if cfg.gates == 1 else 16, mcast=2)
    log = _ptxas_log(cfg, part, fmt)
    assert "0 bytes spill stores" in log and SERIALIZED not in log
    ptx = _ptx(P.source(P.defines(cfg, part, gx_int=fmt == "int8")), "compute_90a")
    assert len(re.findall(r"cp\.async\.bulk\S*\.multicast::cluster", ptx)) >= 1
    assert "%cluster_ctarank" in ptx
    assert ".reqnctapercluster 2, 1, 1" in ptx


def test_the_kernel_refuses_to_share_copies_into_a_ring_shallower_than_a_step():
    """The kernel's own guard, for a table built by hand: a shared copy into a ring that
    a mate refills within a step would need a release from that mate."""
    _nvrtc_or_skip()
    cfg = _cfg(RNNMode.LSTM, 1, False, H=1024, B=256, T=50, I=1024)
    part = _plan(cfg, "int8")
    assert part.stages < part.wg_slabs
    consts = dict(P.defines(cfg, part, gx_int=True), MCAST=2)
    with pytest.raises(RuntimeError, match="a ring a whole step deep"):
        compile_source(P.source(consts), "persistent.cu", "sm_90a")
