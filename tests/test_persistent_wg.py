"""The persistent kernel's wgmma products (launch shapes with 'w', ``WG``) without a GPU: the
partition (a warpgroup per part of K, every n-tile a warp; 8-bit weights in registers, 16-bit
ones in shared memory in wgmma's layout) run by the numpy model against the float64 twin,
its refusals with what is short, the staging into the canonical layout wgmma reads, the blob
in that layout, and the kernel compiled for sm_90a without spills."""
import re

import numpy as np
import pytest

from cudnn_rnn.bindings.enums import RNNMode
from cudnn_rnn.lowbit import partition, wgmma
from cudnn_rnn.lowbit import persistent as P
from cudnn_rnn.lowbit.cubin import compile_source
from cudnn_rnn.lowbit.engine import Unsupported
from cudnn_rnn.lowbit.launch import Settings

from tests.test_persistent import CELLS, SMEM, _cfg, _close, _nvrtc_or_skip, _run_model


def _seed(mode=RNNMode.LSTM):
    return _cfg(mode, 2, False, H=512, B=64, T=20, I=512)


def _shape(spec):
    """``"LSTM 50/1/1024/256"`` (cell T/L/H/B, input size H), one direction."""
    mode = RNNMode[spec.split()[0]]
    T, L, H, B = (int(v) for v in spec.split()[1].split("/"))
    return _cfg(mode, L, False, H=H, B=B, T=T, I=H)


def _wg(cfg, fmt="int8", **kw):
    kw = dict(dict(sm_count=132, batch_slices=2, units=16), **kw)
    return partition.plan(cfg, fmt, fmt, smem_per_block=SMEM, wg=True, **kw)


def _ptxas_log(cfg, part, fmt, source=None):
    """ptxas's report of the kernel for ``part`` (``source``: persistent.source or a patch of
    it) compiled for sm_90a."""
    log: list = []
    consts = P.defines(cfg, part, gx_int=fmt == "int8")
    compile_source((source or P.source)(consts), "persistent.cu", "sm_90a", log)
    return "\n".join(log)


def test_the_seeds_partition_is_a_warpgroup_per_part_of_k_each_warp_on_every_n_tile():
    part = _wg(_seed())
    assert part.grid == 128 and part.wg_slabs == 4 and not part.wg_shared
    assert part.areg_slabs == 0
    for s in part.slices:
        assert (s.ks, s.ts, s.mpad, s.npad) == (2, 1, 64, 32)
        # layer 1: the input part's 16 chunks, then the recurrent part's; layer 0: K in halves
        assert [list(s.chunks(g)) for g in range(2)] == (
            [list(range(16)), list(range(16, 32))] if s.k == 1 else
            [list(range(8)), list(range(8, 16))])
    consts = P.defines(_seed(), part, gx_int=True)
    assert (consts["WG"], consts["WGN"], consts["NSLAB"], consts["AREG"]) == (1, 32, 4, 0)
    # the step reads no weights from shared memory: they are registers
    assert part.step_bytes()["shared_read_bytes"] == 32 * 1024


@pytest.mark.parametrize("fmt", ["int8", "e4m3", None])
@pytest.mark.parametrize("mode", CELLS)
@pytest.mark.parametrize("layers,bi", [(1, False), (2, False), (2, True)])
def test_the_model_of_the_kernel_on_the_wgmma_partition_equals_the_twin(fmt, mode, layers, bi):
    """8 bits (A in registers) and FP16 (A from the blob in wgmma's canonical layout)."""
    cfg = _cfg(mode, layers, bi, H=40, B=16)
    got, want, part = _run_model(cfg, fmt, "both" if fmt else None, sms=40, batch_slices=2,
                                 wg=True, units=8)
    assert part.wg_slabs > 0 and {s.ks for s in part.slices} == {2}
    assert part.wg_shared == (fmt is None)
    _close(got, want)


@pytest.mark.parametrize("fmt,shared", [("fp16", True), ("bf16", True), ("int8", False)])
def test_16_bit_weights_stay_in_shared_memory_laid_out_as_wgmma_reads_them(fmt, shared):
    from cudnn_rnn.lowbit import tables
    cfg = _seed()
    part = _wg(cfg, fmt)
    assert part.wg_shared == shared and part.wg_slabs == (8 if shared else 4)
    assert P.defines(cfg, part, gx_int=False)["WG"] == (2 if shared else 1)
    rng = np.random.default_rng(1)
    k, g, H = cfg.input_size, cfg.gates, cfg.hidden_size
    codes = [rng.integers(0, 256, (g * H, k if p else H), dtype=np.uint8) for p in range(2)]
    blob = tables.blob(part, codes, codes)
    s = part.slices[-1]  # layer 1: both parts; chunk c of K at 256 c, 8-row groups 8 K apart
    rows = tables.rows(part, blob, s)
    kb = s.nc * 32
    region = blob[s.blob:s.blob + s.mpad * s.rowb]
    if shared:
        r, c = 9, 5  # row 9 (group 1, row 1 of it), byte 16 c + 3
        assert region[1 * 8 * kb + c * 128 + 1 * 16 + 3] == rows[r, 16 * c + 3]
    else:
        np.testing.assert_array_equal(region.reshape(s.mpad, s.rowb)[:, :kb], rows)
    q, u = divmod(9, s.nu)  # row 9: gate q of unit j0 + u
    np.testing.assert_array_equal(rows[9, :k], codes[1][q * H + s.j0 + u])


@pytest.mark.parametrize("cfg,fmt,kw,message", [
    (_seed(), "fp16", dict(mixed="int8"), "wgmma multiplies both parts of K in one format"),
    (_seed(), "int8", dict(threads=512), "two warpgroups a CTA (256 threads), 512 given"),
    (_seed(), "int8", dict(areg=True), "not with 'r' or clusters"),
    (_cfg(RNNMode.LSTM, 1, False, H=64, B=256), "int8", dict(batch_slices=1, units=16),
     "sums of 256 batch rows in registers (at most 128)"),
    (_cfg(RNNMode.LSTM, 1, False, H=96, B=16), "int8", dict(units=48),
     "wgmma takes 128 weight rows a CTA, 192 given"),
    (_cfg(RNNMode.LSTM, 1, False, H=64, B=128), "int8", dict(batch_slices=1, units=32),
     "sums of 128 rows by 128 batch rows take 128 registers a thread (at most 64)"),
    (_cfg(RNNMode.LSTM, 1, False, H=64, B=17), "int8", dict(units=16),
     "batch slices of 8 and 16 rows"),
])
def test_each_refusal_of_the_wgmma_partition_says_what_is_short(cfg, fmt, kw, message):
    fx = kw.pop("mixed", fmt)
    kw = dict(dict(sm_count=132, batch_slices=2, units=16), **kw)
    with pytest.raises(partition.DoesNotFit, match=re.escape(message)):
        partition.plan(cfg, fx, fmt, smem_per_block=SMEM, wg=True, **kw)


def test_8_bit_fragments_past_the_registers_multiply_from_shared_memory():
    part = _wg(_cfg(RNNMode.LSTM, 2, False, H=1024, B=64), "int8", sm_count=264)
    assert part.wg_shared and part.wg_slabs == 8  # 32 chunks a part: 128 registers


def test_a_gpu_that_is_not_sm_90_is_refused_before_any_partition():
    limits = {"sm_count": 132, "cooperative": True, "smem_per_block": SMEM,
              "capability": (8, 9)}
    gemms = [("int8", "int8"), ("int8", "int8")]
    with pytest.raises(Unsupported, match="compute capability 9.0 only, this GPU has 8.9"):
        P.layout(_seed(), gemms, None, Settings.parse("b2t256u16w"), limits)
    limits["capability"] = (9, 0)
    part, _ = P.layout(_seed(), gemms, None, Settings.parse("b2t256u16w"), limits)
    assert part.wg_slabs == 4


def test_the_staging_writes_each_state_piece_once_where_wgmma_reads_it_without_bank_conflicts():
    """persistent.cu's WG staging: thread tid writes piece (tid >> 3) & 7 of row
    (tid & 7) + 8 (tid / 64), 32 rows a pass, at (row >> 3) SLAB*256 + piece 128 + (row & 7)
    16: the canonical layout ``wgmma.strides(npad, SLAB * 32, "k")``, which the kernel's
    descriptors (K stride 128, row-group stride SLAB * 256) read."""
    slab, npad, threads = partition.SLAB, 64, 256
    along_k, along_rows = wgmma.strides(npad, slab * 32, "k")
    assert (along_k, along_rows) == (128, slab * 256)
    seen = {}
    for tid in range(threads):
        piece, prow = (tid >> 3) & (slab * 2 - 1), (tid & 7) + 8 * (tid // (slab * 16))
        for n in range(prow, npad, threads // (slab * 2)):
            at = (n >> 3) * (slab * 256) + piece * 128 + (n & 7) * 16
            assert at == wgmma.offset(n, piece * 16, along_k, along_rows)
            seen[(n, piece)] = seen.get((n, piece), 0) + 1
            if n == prow:  # the first pass: a quarter-warp's 8 stores, 128 bytes in a row
                seen.setdefault(("phase", tid // 8), set()).add(at // 16 % 8)
    assert all(seen[(n, p)] == 1 for n in range(npad) for p in range(slab * 2))
    assert all(len(v) == 8 for k, v in seen.items() if k[0] == "phase")
    d = wgmma.chunk_descriptor(0, 1, npad, slab * 32, "k")
    assert wgmma.fields(d)["address"] == 256 and wgmma.fields(d)["lbo"] == 128


@pytest.mark.parametrize("mode", CELLS)
@pytest.mark.parametrize("fmt", ["int8", "e4m3", "fp16", "bf16"])
def test_the_wgmma_kernel_compiles_for_sm_90a_without_spills(mode, fmt):
    _nvrtc_or_skip()
    cfg = _seed(mode)
    units = 64 // cfg.gates // 4 * 4 or 4
    part = _wg(cfg, fmt, units=units)
    text = _ptxas_log(cfg, part, fmt)
    assert "0 bytes spill stores" in text and "persistent_rnn" in text
    with pytest.raises(RuntimeError, match="not supported on .target 'sm_90'"):
        compile_source(P.source(P.defines(cfg, part, gx_int=fmt == "int8")), "persistent.cu",
                       "sm_90")


def test_the_launch_shape_names_wgmma_with_a_w():
    s = Settings.parse("b2t256u16w")
    assert s.wg and s.units == 16 and s.name == "b2t256u16w"
    assert not Settings.parse("b2t256u16").wg
    with pytest.raises(ValueError, match=r"\[w\[b\[g\]\[e\]\[i\[q\]\[x\]\]\[s<chunks a copy>\]"
                                         r"\[m<CTAs sharing a copy>\]\]\]"):
        Settings.parse("b2t256wu16")


@pytest.mark.parametrize("fmt,width", [("int8", 48), ("e4m3", 40), ("fp16", 40)])
def test_a_batch_slice_is_padded_to_a_width_the_formats_wgmma_takes(fmt, width):
    """40 batch rows a slice: E4M3 and FP16 take N 40; int8 takes 8, 16, 24 and multiples
    of 16 only, so its slice is padded to 48 (rows staged as zeros) and the kernel compiles."""
    _nvrtc_or_skip()
    cfg = _cfg(RNNMode.LSTM, 1, False, H=64, B=80)
    part = _wg(cfg, fmt, units=8)
    assert {s.npad for s in part.slices} == {width} and {s.nb for s in part.slices} == {40}
    consts = P.defines(cfg, part, gx_int=fmt == "int8")
    assert consts["WGN"] == width
    assert compile_source(P.source(consts), "persistent.cu", "sm_90a")[:4] == b"\x7fELF"


@pytest.mark.parametrize("name", ["b2t256pu16w", "b2t256ru16w", "b2t256u16wk8"])
def test_wgmma_with_polling_registers_or_clusters_is_refused_when_named(name):
    with pytest.raises(ValueError, match="not with 'p', 'r' or clusters"):
        Settings.parse(name)


@pytest.mark.parametrize("fmt", ["int8", "e4m3", None])
@pytest.mark.parametrize("mode", [RNNMode.LSTM, RNNMode.GRU])
def test_two_instructions_a_chunk_take_128_weight_rows_from_shared_memory(fmt, mode):
    """32 units of an LSTM are 128 rows: two wgmma a chunk, 64 rows each, A from shared
    memory even in 8 bits; the model on that partition equals the twin."""
    cfg = _cfg(mode, 2, False, H=64, B=16)
    got, want, part = _run_model(cfg, fmt, "both" if fmt else None, sms=40, batch_slices=2,
                                 wg=True, units=32)
    assert part.wg_blocks == 2 and part.wg_shared  # LSTM 128 rows, GRU 96
    _close(got, want)


@pytest.mark.parametrize("spec,fmt,kw,blocks,width", [
    ("LSTM 50/1/1024/256", "int8", dict(batch_slices=2, units=16), 1, 128),
    ("LSTM 50/1/1024/64", "fp16", dict(batch_slices=1, units=8), 1, 64),
    ("LSTM 50/1/1024/64", "int8", dict(batch_slices=2, units=32), 2, 32),
])
def test_the_large_bench_shapes_plan_and_compile_on_wgmma(spec, fmt, kw, blocks, width):
    _nvrtc_or_skip()
    T, L, H, B = (int(v) for v in spec.split()[1].split("/"))
    cfg = _cfg(RNNMode.LSTM, L, False, H=H, B=B, T=T, I=H)
    part = partition.plan(cfg, fmt, fmt, sm_count=132, smem_per_block=SMEM, wg=True, **kw)
    assert (part.wg_blocks, part.slices[0].npad) == (blocks, width)
    assert part.grid <= 132 and part.smem <= SMEM
    assert "0 bytes spill stores" in _ptxas_log(cfg, part, fmt)


@pytest.mark.parametrize("fmt", ["fp16", "int8"])
@pytest.mark.parametrize("settings", ["b2t256w", "b1t256w", "b2t256u16w", "b2t256u32w"])
def test_every_slice_has_room_for_the_rows_and_zeros_its_wgmma_reads(fmt, settings):
    """WGM is one for the whole grid: with units in proportion to each layer's work (no
    'u'), layer 0 may take more rows than the layers above (the seed at b2t256w: 96 against
    48); every slice still keeps 64 WGM rows and the 2 KB of zeros before its scales."""
    from cudnn_rnn.lowbit import fits
    s = Settings.parse(settings)
    try:
        part = partition.plan(_seed(), fmt, fmt, sm_count=132, smem_per_block=SMEM,
                              **s.partition_args())
    except partition.DoesNotFit:
        pytest.skip(f"{settings} does not fit the seed in {fmt}")
    for sl in part.slices:
        assert 64 * part.wg_blocks * sl.rowb + fits.wg_zero(sl.npad) <= sl.off_dq
        assert sl.smem <= part.smem <= SMEM
    if settings == "b2t256w":
        assert {sl.mpad for sl in part.slices} == {96, 48} and part.wg_blocks == 2


@pytest.mark.parametrize("mode", CELLS)
@pytest.mark.parametrize("fmt", ["int8", "e4m3"])
def test_the_bulk_staging_kernel_compiles_for_sm_90a_without_spills(mode, fmt):
    _nvrtc_or_skip()
    cfg = _seed(mode)
    units = 64 // cfg.gates // 4 * 4 or 4
    part = _wg(cfg, fmt, units=units, bulk=True)
    consts = P.defines(cfg, part, gx_int=fmt == "int8")
    assert (consts["WGB"], consts["WGS"]) == (1, 2)
    assert "0 bytes spill stores" in _ptxas_log(cfg, part, fmt)


def test_bulk_staging_sizes_the_state_for_padded_slices():
    cfg = _seed()
    part = _wg(cfg, "int8", bulk=True)
    # two slices of 32 rows (the batch's 64), slots of 2 x 32 rows, a zero tail of the slabs
    assert part.state_bytes(21, part.hrowb) == 21 * 2 * 32 * 512 + 4 * 4 * 32 * 32
    assert _wg(cfg, "int8").state_bytes(21, part.hrowb) == 21 * 64 * 512
    with pytest.raises(ValueError, match="'b' after 'w'"):
        Settings.parse("b2t256u16b")
    # where not even the weights fit, the refusal says what is short
    big = _cfg(RNNMode.LSTM, 2, False, H=1024, B=64, T=20, I=1024)
    with pytest.raises(partition.DoesNotFit, match="bytes of shared memory"):
        _wg(big, "fp16", bulk=True, units=32)


def test_a_bulk_copys_step_reads_whole_slabs_of_padded_rows():
    """Partition.step_bytes with bulk staging: a batch of 60 in two slices of 30 rows, padded
    to wgmma's 32: every CTA's copies read 32 rows of its two groups' 4 slabs of 128 bytes
    (layer 0 too, whose groups hold 8 chunks: its slabs past them are read and multiply
    zeros), where staging by every thread reads the 30 real rows of its K only."""
    cfg = _cfg(RNNMode.LSTM, 2, False, H=512, B=60, T=20, I=512)
    assert _wg(cfg, "int8", bulk=True).step_bytes()["state_read_bytes"] == 2 * 4 * 128 * 32
    assert _wg(cfg, "int8").step_bytes()["state_read_bytes"] == 30 * 1024


# ptxas's note where it waits for each wgmma before the next (it then puts its own fence in
# the wait loop's path): "(C7520) Potential Performance Loss: wgmma.mma_async instructions
# are serialized due to program dependence on compiler-inserted WG.AR in divergent path"
SERIALIZED = "C7520"


@pytest.mark.parametrize("mode", [RNNMode.LSTM, RNNMode.GRU])
@pytest.mark.parametrize("fmt,stages,slabs", [("fp16", 8, 8), ("bf16", 8, 8), ("int8", 6, 4)])
def test_bulk_staging_deepens_the_ring_to_hold_every_slab_of_a_step_where_it_fits(
        mode, fmt, stages, slabs):
    """The seed in 16 bits: 8 slabs a step (1 KB of K a group, 128 bytes a slab), more than
    the 6 stages of the ring the partition prefers: the ring is 8 deep (213 KB with the
    weights, within the 226 KB a block is given); 8 bits keep the preferred ring. The kernel
    compiles without spills, each slab's products issued after its own wait with none
    serialized."""
    _nvrtc_or_skip()
    cfg = _seed(mode)
    part = _wg(cfg, fmt, bulk=True)
    assert (part.stages, part.wg_slabs) == (stages, slabs) and part.smem <= SMEM
    assert P.defines(cfg, part, gx_int=fmt == "int8")["STAGES"] == stages
    log = _ptxas_log(cfg, part, fmt)
    assert "0 bytes spill stores" in log and SERIALIZED not in log


@pytest.mark.parametrize("spec,fmt,stages,slabs", [
    ("LSTM 20/2/512/128", "fp16", 5, 8),   # 128 KB of weights beside the ring
    ("GRU 20/2/512/128", "bf16", 5, 8),
    ("LSTM 50/1/1024/256", "int8", 3, 4),  # the bench shape (255 registers, none spilled)
])
def test_a_ring_shallower_than_a_steps_slabs_is_the_deepest_that_fits_and_refills(
        spec, fmt, stages, slabs):
    """Where the ring cannot hold a step's slabs, the partition takes the deepest that
    fits, and the kernel refills each stage once its slab's products are done, with none of
    the step's wgmma serialized."""
    _nvrtc_or_skip()
    cfg = _shape(spec)
    part = _wg(cfg, fmt, bulk=True)
    assert (part.stages, part.wg_slabs) == (stages, slabs) and part.smem <= SMEM
    # one stage more (a slab of each warpgroup, unpadded: wgmma's layout) would not fit
    stage = max(sl.ks * sl.npad * partition.SLAB * 32 for sl in part.slices)
    assert part.smem + stage > SMEM
    log = _ptxas_log(cfg, part, fmt)
    assert "0 bytes spill stores" in log and SERIALIZED not in log


def test_the_serialization_check_sees_ptxas_serialize_a_wait_without_its_fence():
    """The check above can fail: the kernel's fence before every slab's products left at
    the first slab only (as before per-slab waits), ptxas serializes them and says so."""
    _nvrtc_or_skip()
    cfg = _seed()
    part = _wg(cfg, "int8", bulk=True)
    fence = "if (WGB || i == 0) wg_fence();"

    def first_only(consts):
        text = P.source(consts)
        assert text.count(fence) == 1
        return text.replace(fence, "if (i == 0) wg_fence();")
    assert SERIALIZED in _ptxas_log(cfg, part, "int8", first_only)


def test_a_bulk_copy_of_a_slab_carries_the_bytes_the_producers_wrote_where_wgmma_reads_them():
    """persistent.cu's formulas (WGB): a producer writes byte `byte` of row b (slice bs, slot
    t) at (t S + bs) N rowb + (byte >> 4) 16 N + (b >> 3) 128 + (b & 7) 16 + (byte & 15); a
    slab of chunks from kc is one copy from (t S + bs) N rowb + kc 32 N; wgmma reads chunk cc
    of it through (start cc 32 N, K stride 16 N, row-group stride 128): the canonical
    layout ``wgmma.strides(N, SLAB * 32, "rows")`` of the slab."""
    S, N, rowb, slab = 2, 32, 512, partition.SLAB
    along_k, along_rows = wgmma.strides(N, slab * 32, "rows")
    assert (along_k, along_rows) == (16 * N, 128)

    def produced(t, bs, b, byte):
        return ((t * S + bs) * N * rowb + (byte >> 4) * (16 * N) + (b >> 3) * 128
                + (b & 7) * 16 + (byte & 15))
    for t, bs, kc in [(0, 0, 0), (3, 1, 4), (5, 1, 12)]:
        src = (t * S + bs) * N * rowb + kc * 32 * N
        for cc in range(slab):
            for b in range(N):
                for k in range(32):
                    read = cc * 32 * N + wgmma.offset(b, k, along_k, along_rows)
                    assert src + read == produced(t, bs, b, (kc + cc) * 32 + k)


def test_the_probe_tools_old_bulk_wait_still_applies_and_compiles_unserialized():
    """tools/persistent_probe.py --variants waits_together (every stage's first slab waited
    for before the step's first product): its patch still finds the kernel's text, and the
    patched bulk kernel compiles without spills or serialized wgmma, so the old wait stays
    measurable beside the kernel."""
    _nvrtc_or_skip()
    from tests.test_persistent import _probe_tool
    cfg = _seed()
    part = _wg(cfg, "int8", bulk=True)
    old = _probe_tool().varied("waits_together")
    assert old(P.defines(cfg, part, gx_int=True)) != P.source(P.defines(cfg, part, gx_int=True))
    log = _ptxas_log(cfg, part, "int8", old)
    assert "0 bytes spill stores" in log and SERIALIZED not in log


@pytest.mark.parametrize("variant,fences", [("fence_once", 1), ("fence_at_producer", 2),
                                            ("gates_hoisted", 1)])
def test_the_probe_tools_next_variants_apply_and_compile_unserialized(variant, fences):
    """tools/persistent_probe.py --variants fence_once / fence_at_producer (bulk staging's
    proxy fence once a step, or on the producers' side) and gates_hoisted (the gate math's
    per-row factors in registers): each patch finds the kernel's text (the tool refuses a
    patch that does not) and changes the bulk kernel's source, which then holds the fence
    where the variant puts it, and compiles without spills or serialized wgmma."""
    _nvrtc_or_skip()
    from tests.test_persistent import _probe_tool
    cfg = _seed()
    part = _wg(cfg, "int8", bulk=True)
    consts = P.defines(cfg, part, gx_int=True)
    varied = _probe_tool().varied(variant)
    text = varied(consts)
    assert text != P.source(consts)
    assert text.count('asm volatile("fence.proxy.async.global;" ::: "memory");') == fences
    assert ("if (i == 0) asm volatile(\"fence.proxy.async.global" in text) == (variant
                                                                           == "fence_once")
    log = _ptxas_log(cfg, part, "int8", varied)
    assert "0 bytes spill stores" in log and SERIALIZED not in log
