"""Layer 0's input projection read by the gate math from global memory (launch shapes with
'g' after 'wb', the kernel's ``GXG``) without a GPU: the room it makes where a step's staged
projection left none for the ring beside the weights (LSTM 50/1/1024/256 in 16 bits,
50/1/2048/128 in 8: bench shapes the issue names), its name and refusals, and the kernel
compiled for sm_90a: the projection loaded from global memory and brought into L2 a step
ahead, none of it staged, no spills, no wgmma serialized."""
import re

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


# (shape, format, launch shape) with layer 0's projection staged
STAGED = [("LSTM 50/1/2048/128", "int8", "b1t256u16wbes2"),
          ("LSTM 50/1/1024/64", "fp16", "b2t256u16wb"), ("GRU 20/2/512/64", "int8", "b2t256u16wbe")]


def _named(spec, fmt, name, bidirectional=False):
    """(configuration, partition) of ``spec`` in ``fmt`` at the launch shape ``name``."""
    cell, sizes = spec.split()
    T, L, H, B = (int(v) for v in sizes.split("/"))
    cfg = _cfg(RNNMode[cell], L, bidirectional, H=H, B=B, T=T, I=H)
    s = Settings.parse(name)
    fx = fmt if L > 1 or s.input_inside else None
    return cfg, partition.plan(cfg, fx, fmt, sm_count=132, smem_per_block=SMEM - P.STATIC_SMEM,
                               **s.partition_args())


@pytest.mark.parametrize("spec,fmt,name", STAGED)
def test_a_streaming_projection_is_brought_into_l2_ahead_and_waited_for_before_the_gates(
        spec, fmt, name):
    """Without 'g', layer 0's projection of the next step is copied into shared memory past
    the step's signal; where it streams (GXL2) the step after is brought into L2 by one bulk
    prefetch, and with bulk staging its copies are waited for before the gate math's barrier
    rather than before the first product. tools/persistent_probe.py's gx_no_l2 takes the
    prefetch back and gx_l2 puts it in (the kernel of GXL2), gx_early_wait takes the late wait
    back (with GXL2 off: the kernel before both; PTX compared in the commit), gx_cp16 adds
    16-byte copies; every kernel compiles without spills or serialized wgmma."""
    _nvrtc_or_skip()
    from tests.test_persistent import _probe_tool
    cfg, part = _named(spec, fmt, name)
    tool = _probe_tool()
    plain, streams = (P.defines(cfg, part, gx_int=fmt == "int8", gx_l2=g) for g in (0, 1))
    assert "GXL2" not in plain and streams["GXL2"] == 1
    ptx = {k: _ptx(P.source(c), "compute_90a") for k, c in (("plain", plain), ("l2", streams))}
    for k, c in (("no_l2", streams), ("l2_on", plain), ("early", plain), ("cp16", plain)):
        variant = {"no_l2": "gx_no_l2", "l2_on": "gx_l2", "early": "gx_early_wait",
                   "cp16": "gx_cp16"}[k]
        ptx[k] = _ptx(tool.varied(variant)(c), "compute_90a")
        log = _ptxas_log(cfg, part, fmt, tool.varied(variant))
        assert "0 bytes spill stores" in log and SERIALIZED not in log
    l2, cg = "cp.async.bulk.prefetch.L2.global", "cp.async.cg.shared.global"
    wait = "cp.async.wait_group"
    assert ptx["l2"].count(l2) >= 1 and ptx["plain"].count(l2) == 0  # (before the steps, in each)
    assert ptx["no_l2"] == ptx["plain"] and ptx["l2_on"] == ptx["l2"]
    assert ptx["early"].count(wait) > ptx["plain"].count(wait)  # the ring's, one a slab
    # the late wait: every copy landed, then the barrier past which the gate math reads them
    late = re.compile(r"cp\.async\.wait_group 0;\s*// end inline asm\s*bar\.sync \t0;")
    assert late.search(ptx["plain"]) and not late.search(ptx["early"])
    assert ptx["cp16"].count(cg) > ptx["plain"].count(cg)


def test_the_projection_streams_where_it_passes_half_of_l2():
    """limits.projection_streams: at an H100's 50 MB of L2, the seed's projection (10 MB)
    stays in L2, LSTM 50/1/1024/64's (52 MB, also H100's whole L2) and 50/1/2048/128's (210
    MB) stream; two directions count twice; none streams with 'i' (computed in the kernel),
    'g' (read by the gate math) or without wgmma (no copy engine's prefetch)."""
    from cudnn_rnn.lowbit.limits import projection_streams
    h100 = {"l2_bytes": 52428800}
    streams = lambda spec, name, bi=False: projection_streams(  # noqa: E731
        *_named(spec, "int8", name, bi), h100)
    assert not streams("LSTM 20/2/512/64", "b2t256u16wbe")
    assert streams("LSTM 50/1/1024/64", "b2t256u16wbe")
    assert streams("LSTM 50/1/2048/128", "b1t256u16wbes2")
    assert not streams("GRU 20/1/512/128", "b2t256u16wbe")  # 16 MB, half of L2 is 26
    assert streams("GRU 20/1/512/128", "b2t256u16wb", True)  # 31 MB
    assert not streams("LSTM 50/1/1024/64", "b2t256u16wbei")
    assert not streams("LSTM 50/1/1024/64", "b2t256u16wbg")
    assert not streams("LSTM 50/1/1024/64", "b2t256u16")


def _kernel_pair(pattern: str, what: str):
    """Two expressions of persistent.cu (integer arithmetic, C's division as Python's //)
    as a function of their names' values."""
    m = re.search(pattern, P.SOURCE.read_text())
    assert m, what
    exprs = [m.group(i).replace("/", "//") for i in (1, 2)]
    return lambda **v: tuple(eval(e, {}, v) for e in exprs)  # noqa: S307 (the kernel's text)


def _row_share():
    """The rows of its batch slice whose projection a CTA brings into L2 (persistent.cu's
    gx_to_l2: ``r0``, ``r1`` of the slice's ``nb``, ``j0``, ``nu`` and ``H``)."""
    return _kernel_pair(r"const int r0 = ([^,]+), r1 = ([^;]+);", "gx_to_l2's rows")


def _prefetched():
    """The bytes past the projection's start that a CTA's prefetch takes (gx_to_l2's ``a``
    and ``e`` of its first ``row`` this step, ``r0``, ``r1`` and ``gH``)."""
    return _kernel_pair(r"const size_t a = (.+?), e = (.+?);", "gx_to_l2's bytes")


@pytest.mark.parametrize("spec,fmt,name,bidirectional", [s + (False,) for s in STAGED] + [
    ("LSTM 50/1/1024/256", "int8", "b2t256u16wbes2", False),
    ("RNN_TANH 50/1/512/64", "fp16", "b2t256u16wb", True),
    ("GRU 50/1/1000/48", "bf16", "b1t256u16wb", True)])
def test_every_row_of_the_projection_is_brought_into_l2_by_one_cta_of_its_slice(
        spec, fmt, name, bidirectional):
    """The CTAs of a direction and batch slice of layer 0 (units j0 .. j0 + nu of H each)
    share its rows between them by the kernel's own expressions: every row once, each
    CTA's rows one run of memory."""
    share = _row_share()
    cfg, part = _named(spec, fmt, name, bidirectional)
    H = cfg.hidden_size
    groups: dict = {}
    for s in part.slices:
        if s.k < (2 if bidirectional else 1):  # layer 0's pseudo-layers (its directions)
            groups.setdefault((s.k, s.bs), []).append(s)
    assert groups
    for slices_ in groups.values():
        rows = [r for s in slices_ for r in range(*share(nb=s.nb, j0=s.j0, nu=s.nu, H=H))]
        assert sorted(rows) == list(range(slices_[0].nb)), (spec, slices_[0].bs)


@pytest.mark.parametrize("spec,name", [("LSTM 50/1/2048/128", "b1t256u16wbes2"),
                                       ("GRU 100/1/1002/128", "b2t256u16wb"),
                                       ("RNN_TANH 50/1/1001/64", "b2t256u16wb")])
def test_each_ctas_prefetch_is_16_byte_aligned_within_its_rows(spec, name):
    """cp.async.bulk.prefetch takes a 16-byte aligned address and a multiple of 16 bytes;
    a row of the projection is 4 GATES H bytes, unaligned for a GRU's H 1002 or an RNN's
    1001 (the tuner's 'wb' fits both and streams there): by the kernel's own expressions
    every CTA's bytes are aligned, lie within its rows, and the CTAs of a batch slice leave
    less than 32 bytes between one's bytes and the next's (each bound rounded inward), none
    at the slice's ends past 15."""
    share, took = _row_share(), _prefetched()
    cfg, part = _named(spec, "int8", name)
    H, B, gH = cfg.hidden_size, cfg.mini_batch, cfg.gates * cfg.hidden_size
    groups: dict = {}
    for s in part.slices:
        if s.k == 0:
            groups.setdefault(s.bs, []).append(s)
    for t in (0, cfg.seq_length - 1):
        for slices_ in groups.values():
            spans = []
            for s in slices_:
                r0, r1 = share(nb=s.nb, j0=s.j0, nu=s.nu, H=H)
                row = t * B + s.b0
                a, e = took(row=row, r0=r0, r1=r1, gH=gH)
                assert a % 16 == 0 and e % 16 == 0
                if e > a:
                    assert row * gH * 4 <= a + 15 and e <= (row + s.nb) * gH * 4
                    spans.append((a, e))
            spans.sort()
            assert spans and all(b[0] - a[1] < 32 and b[0] >= a[1]
                                 for a, b in zip(spans, spans[1:]))
            first = (t * B + slices_[0].b0) * gH * 4
            assert spans[0][0] - first < 16
            assert first + slices_[0].nb * gH * 4 - spans[-1][1] < 16


@pytest.mark.parametrize("spec,fmt,name", STAGED + [("LSTM 20/2/512/64", "int8", "b2t256u16w")])
def test_the_probe_tools_bulk_copied_projection_applies_and_compiles(spec, fmt, name):
    """tools/persistent_probe.py --variants gx_bulk (the staged projection by the copy
    engine, on an mbarrier of its own): with bulk staging the kernel gains its bulk copies
    and compiles without spills or serialized wgmma; without it (no copy engine's ring)
    the PTX is the kernel's own."""
    _nvrtc_or_skip()
    from tests.test_persistent import _probe_tool
    cfg, part = _named(spec, fmt, name)
    consts = P.defines(cfg, part, gx_int=fmt == "int8")
    varied = _probe_tool().varied("gx_bulk")
    ptx, base = (_ptx(source(consts), "compute_90a") for source in (varied, P.source))
    bulk = "cp.async.bulk.shared::cluster.global.mbarrier"
    if part.wg_bulk:
        assert ptx.count(bulk) > base.count(bulk)
        log = _ptxas_log(cfg, part, fmt, varied)
        assert "0 bytes spill stores" in log and SERIALIZED not in log
    else:
        assert ptx == base
