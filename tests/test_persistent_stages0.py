"""One ring stage more for the second k-group (the kernel's STAGES0, partition.plan): where
bulk staging's ring is shallower than a step, 3 stages deep or more, and shared memory has
room past it for one more stage of one group but not of both, k-group 0 keeps the equal
ring's depth and the other group takes one stage more; the ring then lies group by group,
each warpgroup running a slab loop of its own depth. Only where it was measured: one
pseudo-layer, the gate math in registers ('e'), one CTA a multiprocessor. Without a GPU:
the plans, the kernels compiled for sm_90a, the probe's ``equal_ring`` variant (the kernel
as it was), its drops and shallower rings that took the products' phase apart, and the
kernel's refusals (their outputs on a GPU: tests/test_gpu_persistent_slab.py, whose shapes
these are)."""
import pytest

from cudnn_rnn.lowbit import persistent as P
from cudnn_rnn.lowbit.cubin import compile_source
from cudnn_rnn.lowbit.partition import CHUNK

from tests.test_clusters import _ptx
from tests.test_persistent import SMEM, _nvrtc_or_skip, _probe_tool
from tests.test_persistent_inside import _plan, compiles_clean
from tests.test_persistent_wg import _shape

# the tuner's shapes at the targets (INT8, and FP16 where 'wbe' does not fit) and
# each ring's depths: k-group 0's, the other's
DEEPER = [("LSTM 50/1/1024/256", "b2t256u16wbeis2", "int8", 5, 6),
          ("GRU 50/1/1024/256", "b2t256u16wbeis2", "int8", 5, 6),
          ("LSTM 50/1/2048/128", "b1t256u16wbes2", "int8", 3, 4),
          ("LSTM 50/1/1024/256", "b2t256u16wbes2", "fp16", 3, 4)]


@pytest.mark.parametrize("spec,name,fmt,stages0,stages", DEEPER)
def test_the_room_past_an_equal_ring_gives_the_second_group_one_stage_more(
        spec, name, fmt, stages0, stages):
    cfg = _shape(spec)
    part = _plan(cfg, name, fmt)
    assert (part.stages0, part.stages) == (stages0, stages) and stages < part.wg_slabs
    assert P.defines(cfg, part, gx_int=fmt == "int8")["STAGES0"] == stages0
    stage = part.slices[0].npad * part.slab * CHUNK
    for s in part.slices:
        assert s.ks == 2 and s.smem - s.off_ring == (stages0 + stages) * stage
        # one stage more for both groups does not fit: the second group's is what is left
        assert s.off_ring + 2 * stages * stage > SMEM - P.STATIC_SMEM >= s.smem


@pytest.mark.parametrize("spec,name,fmt,why", [
    ("LSTM 50/1/1024/256", "b2t256u16wbei", "int8", "two stages: group 0's own sets the pace"),
    ("LSTM 50/1/2048/128", "b1t256u16wbge", "int8", "two stages"),
    ("LSTM 50/1/1024/256", "b2t256u16wbeixs2", "int8", "copies ahead keep their own layout"),
    ("LSTM 20/2/512/64", "b2t256u16wbei", "int8", "the ring holds a whole step"),
    ("LSTM 20/2/512/64", "b2t256u16wbm2", "int8", "shared copies: a ring of a whole step"),
    ("LSTM 50/1/1024/256", "b2t256u16", "int8", "no bulk staging"),
    ("LSTM 50/1/1024/256", "b2t256u16wbs2", "int8", "not measured without 'e'"),
    ("GRU 50/2/1024/64", "b1t256u16wbes2", "int8", "not measured over two layers"),
])
def test_no_second_depth_elsewhere(spec, name, fmt, why):
    cfg = _shape(spec)
    part = _plan(cfg, name, fmt)
    assert part.wg_bulk or "bulk" in why
    if "measured" in why:  # a ring the rule would deepen otherwise: 3 stages or more, short
        assert 3 <= part.stages < part.wg_slabs, part.stages
    assert part.stages0 == 0, why
    assert "STAGES0" not in P.defines(cfg, part, gx_int=fmt == "int8")


@pytest.mark.parametrize("spec,name,fmt", [d[:3] for d in DEEPER])
def test_the_kernels_of_two_depths_compile_clean(spec, name, fmt):
    """No spills and no serialized wgmma with a slab loop for each depth."""
    compiles_clean(spec, name, fmt)


@pytest.mark.parametrize("spec,name,fmt", [d[:3] for d in DEEPER[::2]])
def test_the_probe_tools_equal_ring_variant_is_the_kernel_with_group_0s_depth_for_both(
        spec, name, fmt):
    """tools/persistent_probe.py --variants equal_ring: the PTX of the kernel defined with
    both groups k-group 0's depth (the kernel before STAGES0), which differs from the
    kernel's own, so the probe measures the two side by side in the same shared memory."""
    _nvrtc_or_skip()
    cfg = _shape(spec)
    consts = P.defines(cfg, _plan(cfg, name, fmt), gx_int=fmt == "int8")
    equal = {k: v for k, v in consts.items() if k != "STAGES0"}
    equal["STAGES"] = consts["STAGES0"]
    varied = _probe_tool().varied("equal_ring")(consts)
    assert _ptx(varied, "compute_90a") == _ptx(P.source(equal), "compute_90a")
    assert _ptx(P.source(consts), "compute_90a") != _ptx(P.source(equal), "compute_90a")


@pytest.mark.parametrize("name,what", [("b2t256u16wbeixs2", "PREX"), ("b2t256u16wbs2m2", "MCAST"),
                                       ("b2t256u16wbeis2", "a ring of one stage")])
def test_the_kernel_refuses_a_second_depth_it_does_not_run(name, what):
    """Copies ahead ('x') and shared copies keep rings of their own layout, and a ring
    shallower than two stages is no ring: the kernel does not compile with STAGES0 there,
    saying why, whatever a caller defines."""
    _nvrtc_or_skip()
    spec = "LSTM 20/2/512/64" if "m2" in name else "LSTM 50/1/1024/256"
    cfg = _shape(spec)
    consts = P.defines(cfg, _plan(cfg, name), gx_int=False)
    consts["STAGES0"] = 1 if what.startswith("a ring") else consts["STAGES"] - 1
    with pytest.raises(RuntimeError, match="STAGES0: bulk staging's ring, its own copies"):
        compile_source(P.source(consts), "persistent.cu", "sm_90a")


@pytest.mark.parametrize("spec,name", [("LSTM 50/1/1024/256", "b2t256u16wbeis2"),  # A shared
                                       ("LSTM 20/2/512/64", "b2t256u16wb"),  # A in registers
                                       ("LSTM 20/2/512/64", "b2t256u16wbm2")])  # shared copies
@pytest.mark.parametrize("phase", ["wg_mma", "bulk"])
def test_the_probe_tools_bulk_phases_leave_out_what_they_name(spec, name, phase):
    """tools/persistent_probe.py --drop wg_mma,bulk (the products' phase without the wgmma,
    or without the copies and their waits): each patch finds the kernel's text and changes
    the compiled kernel (its PTX, not only its text: a patch of code compiled out would
    measure the whole kernel under the drop's name) with A from shared memory or registers
    and with copies of a CTA's own or shared, and the kernel compiles without spills."""
    _nvrtc_or_skip()
    cfg = _shape(spec)
    consts = P.defines(cfg, _plan(cfg, name), gx_int=False)
    dropped = _probe_tool().without(phase)(consts)
    assert _ptx(dropped, "compute_90a") != _ptx(P.source(consts), "compute_90a")
    log: list = []
    compile_source(dropped, "persistent.cu", "sm_90a", log)
    assert any("0 bytes spill stores, 0 bytes spill loads" in line for line in log), log


@pytest.mark.parametrize("spec,name,n,ok", [("LSTM 50/1/1024/256", "b2t256u16wbeis2", 4, True),
                                            ("LSTM 50/1/1024/256", "b2t256u16wbeis2", 3, True),
                                            ("LSTM 50/1/2048/128", "b1t256u16wbes2", 3, True),
                                            ("LSTM 50/1/2048/128", "b1t256u16wbes2", 4, False),
                                            ("LSTM 50/1/1024/256", "b2t256u16wbei", 3, False)])
def test_the_probe_tools_shallower_rings_are_equal_rings_within_the_plans_memory(spec, name, n,
                                                                                 ok):
    """tools/persistent_probe.py --variants ring<n>: the kernel of an equal ring of n stages
    (k-group 0's as well, where the plan gave two depths), or, where n stages for both
    groups would pass the shared memory the plan set aside, a compile that says so (no
    copy lands past the allocation)."""
    _nvrtc_or_skip()
    cfg = _shape(spec)
    consts = P.defines(cfg, _plan(cfg, name), gx_int=False)
    varied = _probe_tool().varied(f"ring{n}")(consts)
    if ok:
        equal = {k: v for k, v in consts.items() if k != "STAGES0"}
        equal["STAGES"] = n
        assert _ptx(varied, "compute_90a") == _ptx(P.source(equal), "compute_90a")
    else:
        with pytest.raises(RuntimeError, match=f"ring{n}: deeper than the shared memory"):
            compile_source(varied, "persistent.cu", "sm_90a")
