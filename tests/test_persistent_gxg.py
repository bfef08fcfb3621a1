"""Layer 0's input projection read by the gate math from global memory (launch shapes with
'g' after 'wb', the kernel's ``GXG``) without a GPU: the room it makes where a step's staged
projection left none for the ring beside the weights (LSTM 50/1/1024/256 in 16 bits,
50/1/2048/128 in 8: bench shapes the issue names), its name and refusals, and the kernel
compiled for sm_90a: the projection loaded from global memory and brought into L2 a step
ahead, none of it staged, no spills, no wgmma serialized."""
import pytest

from cudnn_rnn.bindings.enums import RNNMode
from cudnn_rnn.lowbit import partition
from cudnn_rnn.lowbit import persistent as P
from cudnn_rnn.lowbit.cubin import compile_source
from cudnn_rnn.lowbit.launch import Settings

from tests.test_clusters import _ptx
from tests.test_persistent import SMEM, _cfg, _nvrtc_or_skip
from tests.test_persistent_wg import SERIALIZED, _ptxas_log, _seed, _shape

# (shape, format, batch slices): where bulk staging fits only with 'g'
ROOMLESS = [("LSTM 50/1/1024/256", "fp16", 2), ("GRU 50/1/1024/256", "bf16", 2),
            ("LSTM 50/1/2048/128", "int8", 1), ("LSTM 50/1/2048/128", "e4m3", 1)]


def _plan(cfg, fmt, slices, smem=SMEM, **kw):
    return partition.plan(cfg, fmt, fmt, sm_count=132, smem_per_block=smem, batch_slices=slices,
                          units=16, wg=True, bulk=True, **kw)


@pytest.mark.parametrize("spec,fmt,slices", ROOMLESS)
def test_the_projection_left_in_global_memory_makes_room_for_the_ring(spec, fmt, slices):
    """Without 'g' the CTA's shared memory is short; with it, it fits, and what it saves is
    exactly one step's projection of layer 0's slices (gates x batch rows x units floats)."""
    cfg = _shape(spec)
    with pytest.raises(partition.DoesNotFit, match="bytes of shared memory"):
        _plan(cfg, fmt, slices)
    part = _plan(cfg, fmt, slices, gx_global=True)
    assert part.gx_global and part.smem <= SMEM and part.stages >= 2
    # both planned where anything fits (the same ring): they differ by the staged projection
    staged, unstaged = (_plan(cfg, fmt, slices, smem=10 ** 7, gx_global=g) for g in (False, True))
    assert staged.stages == unstaged.stages
    for a, b in zip(staged.slices, unstaged.slices):
        step = cfg.gates * a.nb * a.nu * 4
        assert (a.off_ring - a.off_gx, b.off_ring - b.off_gx) == (step, 0)
        assert a.smem - b.smem == step


def test_above_the_first_layer_nothing_changes():
    """Layers above the first read no projection (their input part is a product): their
    slices are laid out alike with and without 'g'."""
    cfg = _seed()
    staged, unstaged = (_plan(cfg, "int8", 2, gx_global=g) for g in (False, True))
    above = [(a, b) for a, b in zip(staged.slices, unstaged.slices) if a.k > 0]
    assert above and all(a == b for a, b in above)


def test_the_launch_shape_names_it_with_a_g_after_wb():
    for name in ("b2t256u16wbg", "b1t256u16wbg", "b2t256u16wbgm2"):
        assert Settings.parse(name).name == name and Settings.parse(name).gx_global
    assert not Settings.parse("b2t256u16wb").gx_global
    assert Settings.parse("b2t256u16wbg").partition_args()["gx_global"]
    for name in ("b2t256u16wg", "b2t256u16g"):
        with pytest.raises(ValueError):
            Settings.parse(name)
    with pytest.raises(ValueError, match="name 'wb' first"):
        Settings(batch_slices=2, units=16, wg=True, gx_global=True)
    with pytest.raises(partition.DoesNotFit,
                       match="the input projection from global memory is bulk staging's: 'wbg'"):
        partition.plan(_seed(), "int8", "int8", sm_count=132, smem_per_block=SMEM,
                       batch_slices=2, units=16, wg=True, gx_global=True)


@pytest.mark.parametrize("spec,fmt,slices", ROOMLESS)
def test_the_kernel_reads_the_projection_from_global_memory_unspilled(spec, fmt, slices):
    """Compiled for sm_90a: the projection brought into L2 ahead (prefetch.global.L2) and
    read through the non-coherent path (ld.global.nc), no spills, no wgmma serialized."""
    _nvrtc_or_skip()
    cfg = _shape(spec)
    part = _plan(cfg, fmt, slices, gx_global=True)
    consts = P.defines(cfg, part, gx_int=fmt == "int8")
    assert consts["GXG"] == 1
    ptx = _ptx(P.source(consts), "compute_90a")
    assert "prefetch.global.L2" in ptx and "ld.global.nc" in ptx
    log = _ptxas_log(cfg, part, fmt)
    assert "0 bytes spill stores" in log and SERIALIZED not in log


def test_a_kernel_without_it_stages_the_projection_and_names_no_gxg():
    """The same shape with and without 'g' at the seed (where both fit): only 'g' defines
    GXG and prefetches into L2; without it the projection's copies into shared memory
    (cp.async) are there."""
    _nvrtc_or_skip()
    cfg = _seed()
    with_g, without = (P.defines(cfg, _plan(cfg, "int8", 2, gx_global=g), gx_int=True)
                       for g in (True, False))
    assert "GXG" not in without and with_g["GXG"] == 1
    ptx_g, ptx = (_ptx(P.source(c), "compute_90a") for c in (with_g, without))
    assert "prefetch.global.L2" in ptx_g and "prefetch.global.L2" not in ptx
    # the projection's loads join the kernel's other non-coherent loads (its tables), and
    # its copies into shared memory (cp.async, 4 bytes each) are gone
    assert ptx_g.count("ld.global.nc") > ptx.count("ld.global.nc")
    assert "cp.async.ca.shared.global" in ptx and "cp.async.ca.shared.global" not in ptx_g


def test_the_staged_projection_is_not_even_declared_with_gxg():
    """What makes a GXG kernel that still read the staged projection (the ring, under GXG)
    impossible: the buffer's name is not declared, so such a read does not compile."""
    _nvrtc_or_skip()
    cfg = _seed()
    consts = P.defines(cfg, _plan(cfg, "int8", 2, gx_global=True), gx_int=True)
    read = "x = (GXINT ? (float)__float_as_int(g) : g) * dqs[row];"
    text = P.source(consts)
    assert text.count(read) == 1
    with pytest.raises(RuntimeError, match="gxs"):
        compile_source(text.replace(read, "x = gxs[q * nb * nu + it.p] * dqs[row];"),
                       "persistent.cu", "sm_90a")


def test_the_kernel_refuses_gxg_without_bulk_staging():
    """GXG names room the partition made for bulk staging's ring: elsewhere the kernel
    does not compile, with the reason."""
    _nvrtc_or_skip()
    cfg = _cfg(RNNMode.LSTM, 1, False, H=64, B=8, T=4, I=64)
    part = partition.plan(cfg, None, "int8", sm_count=132, smem_per_block=SMEM)
    consts = dict(P.defines(cfg, part, gx_int=True), GXG=1)
    with pytest.raises(RuntimeError, match="the input projection from global memory is bulk "
                                           "staging's"):
        compile_source(P.source(consts), "persistent.cu", "sm_90")
    compile_source(P.source(P.defines(cfg, part, gx_int=True)), "persistent.cu", "sm_90")


@pytest.mark.parametrize("variant", ["gx_no_l1", "gx_no_prefetch"])
def test_the_probe_tools_variants_of_it_apply_and_compile(variant):
    """tools/persistent_probe.py --variants gx_no_l1 (the projection read past L1) and
    gx_no_prefetch (without its L2 prefetch a step ahead): each patch finds the kernel's
    text and compiles, without spills or serialized wgmma, to what it says."""
    _nvrtc_or_skip()
    from tests.test_persistent import _probe_tool
    cfg = _shape("LSTM 50/1/1024/256")
    part = _plan(cfg, "fp16", 2, gx_global=True)
    consts = P.defines(cfg, part, gx_int=False)
    varied = _probe_tool().varied(variant)
    ptx, base = (_ptx(source(consts), "compute_90a") for source in (varied, P.source))
    if variant == "gx_no_l1":
        assert "L1::no_allocate" in ptx and "L1::no_allocate" not in base
    else:
        assert "prefetch.global.L2" not in ptx and "prefetch.global.L2" in base
    log = _ptxas_log(cfg, part, "fp16", varied)
    assert "0 bytes spill stores" in log and SERIALIZED not in log


def test_the_tuner_tries_g_only_where_no_shape_with_the_projection_staged_verified():
    """'g' was 2-3 % slower than 'wb' where both fit (launch.py's note): of the tuner's list
    it is the fallback, listed after the staged shapes and not tried once one of them with
    bulk staging has verified; a list the user names is tried whole."""
    names = [s.name for s in P.SETTINGS]
    g = [s for s in P.SETTINGS if s.gx_global]
    assert [s.name for s in g] == ["b2t256u16wbge", "b2t256u16wbg", "b1t256u16wbge",
                                   "b1t256u16wbg"]
    assert max(names.index(s.name) for s in P.SETTINGS if not s.gx_global) < names.index(
        g[0].name)
    staged = Settings.parse("b2t256u16wb")
    for s in g:
        assert P.not_tried(s, [], P.SETTINGS) is None
        assert P.not_tried(s, [Settings.parse("b2t256u16")], P.SETTINGS) is None  # not bulk
        other = next(x for x in g if x.batch_slices != s.batch_slices)
        assert P.not_tried(s, [other], P.SETTINGS) is None  # another 'g'
        assert "b2t256u16wb verified" in P.not_tried(s, [Settings(), staged], P.SETTINGS)
        assert P.not_tried(s, [staged], (staged, s)) is None  # named: tried
    assert not any(P.not_tried(s, [staged], P.SETTINGS) for s in P.SETTINGS  # (one slice's:
                   if not s.gx_global and s.batch_slices > 1)  # tests/test_persistent_slab.py)


# (a GRU at 1024/256 in 16 bits fits the tuner's 'wbe': the test below)
@pytest.mark.parametrize("spec,fmt,slices", [r for r in ROOMLESS if r[0][0] != "G"])
def test_where_staging_leaves_no_room_the_tuner_reaches_a_g_shape_that_fits(spec, fmt, slices):
    """At the shapes where bulk staging of copies of 4 chunks fits only with 'g', every bulk
    shape of the tuner's list with the projection staged is refused (so none verifies) but
    those of copies of 2 chunks it is listed for (a ring of three): 'wbes2' at LSTM 1024/256
    in FP16, one batch slice's at LSTM 2048/128 in 8 bits; and its 'g' shape of those batch
    slices fits in what the engine gives a block."""
    cfg = _shape(spec)
    smem = SMEM - P.STATIC_SMEM
    fits = []
    for s in P.SETTINGS:
        if s.bulk and not s.gx_global:
            try:
                partition.plan(cfg, fmt, fmt, sm_count=132, smem_per_block=smem,
                               **s.partition_args())
            except partition.DoesNotFit:
                continue
            fits.append(s.name)
    listed = {("LSTM 50/1/1024/256", "fp16"): ["b2t256u16wbes2"],
              ("LSTM 50/1/2048/128", "int8"): ["b1t256u16wbes2"],
              ("LSTM 50/1/2048/128", "e4m3"): ["b1t256u16wbes2"]}
    assert fits == listed.get((spec, fmt), [])
    g = next(s for s in P.SETTINGS  # (not 'e': it takes an LSTM or a GRU, not every cell)
             if s.gx_global and s.batch_slices == slices and not s.reg_gates)
    part = partition.plan(cfg, fmt, fmt, sm_count=132, smem_per_block=smem,
                          **g.partition_args())
    assert part.gx_global and part.smem <= smem


def test_a_gru_in_16_bits_at_1024_256_fits_with_its_h_and_c_in_registers():
    """With the gate math in registers ('e') a CTA's h and c take no shared memory: a GRU at
    1024/256 in BF16 then stages its projection on a ring of two (without 'e' it does not
    fit)."""
    cfg = _shape("GRU 50/1/1024/256")
    smem = SMEM - P.STATIC_SMEM
    part = _plan(cfg, "bf16", 2, smem, reg_gates=True)
    assert not part.gx_global and part.stages == 2 and part.smem <= smem
    with pytest.raises(partition.DoesNotFit, match="shared memory"):
        _plan(cfg, "bf16", 2, smem)


def test_the_probe_tools_16_byte_staging_of_the_projection_applies_and_compiles():
    """tools/persistent_probe.py --variants gx_cp16 (the staged projection copied 16 bytes a
    cp.async where its runs are aligned): the kernel without 'g' at LSTM 50/1/1024/256 INT8
    gains 16-byte copies, keeps its 4-byte ones for unaligned runs, and compiles unspilled."""
    _nvrtc_or_skip()
    from tests.test_persistent import _probe_tool
    cfg = _shape("LSTM 50/1/1024/256")
    part = _plan(cfg, "int8", 2)
    consts = P.defines(cfg, part, gx_int=True)
    varied = _probe_tool().varied("gx_cp16")
    ptx, base = (_ptx(source(consts), "compute_90a") for source in (varied, P.source))
    cg = "cp.async.cg.shared.global"
    assert ptx.count(cg) > base.count(cg)
    assert ptx.count("cp.async.ca.shared.global") == base.count("cp.async.ca.shared.global")
    log = _ptxas_log(cfg, part, "int8", varied)
    assert "0 bytes spill stores" in log and SERIALIZED not in log
