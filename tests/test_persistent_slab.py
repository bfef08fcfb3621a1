"""Bulk copies of fewer chunks (launch shapes with 's<chunks>' after 'wb[g][e][i]'): a ring
stage is one copy, so smaller copies make a deeper ring in the same shared memory and keep
more bytes in flight while a warpgroup multiplies one; and the ring and the CTA's own h and
c take only what the kernel uses (no row padding in wgmma's layout; none with the gate math
in registers). Without a GPU: the name and its refusals, the partitions at the issue's
shapes, the kernels compiled for sm_90a without spills or serialized wgmma."""
import pytest

from cudnn_rnn.bindings.enums import RNNMode
from cudnn_rnn.engine.config import RNNConfig

from cudnn_rnn.lowbit import partition
from cudnn_rnn.lowbit import persistent as P
from cudnn_rnn.lowbit.launch import SLABS, Settings
from cudnn_rnn.lowbit.partition import CHUNK, pstride
from cudnn_rnn.lowbit.ptxas import ptxas_info

from tests.test_persistent import SMEM, _cfg, _nvrtc_or_skip
from tests.test_persistent_inside import _plan
from tests.test_persistent_wg import SERIALIZED, _ptxas_log, _seed, _shape


def test_the_launch_shape_names_its_copies_chunks_after_the_i():
    for name, slab in (("b2t256u16wbeis2", 2), ("b1t256u16wbges1", 1), ("b2t256u16wbs4", 4),
                       ("b2t256u16wbs2m2", 2)):
        s = Settings.parse(name)
        assert s.name == name and s.slab == s.partition_args()["slab"] == slab
    assert "slab" not in Settings.parse("b2t256u16wbei").partition_args()  # the default's
    with pytest.raises(ValueError, match="no launch shape"):
        Settings.parse("b2t256u16wbs2i")  # 's' after 'i'
    with pytest.raises(ValueError, match="bulk staging's: name 'wb' first"):
        Settings.parse("b2t256u16ws2")
    with pytest.raises(ValueError, match="'s' takes one of 1, 2, 4"):
        Settings.parse("b2t256u16wbs3")
    with pytest.raises(partition.DoesNotFit, match="one of 1, 2, 4"):
        partition.plan(_seed(), "int8", "int8", sm_count=132, smem_per_block=SMEM,
                       batch_slices=2, units=16, wg=True, bulk=True, slab=3)
    with pytest.raises(partition.DoesNotFit, match="bulk staging's: 'wb'"):
        partition.plan(_seed(), "int8", "int8", sm_count=132, smem_per_block=SMEM,
                       batch_slices=2, units=16, wg=True, slab=2)


@pytest.mark.parametrize("spec,name", [("LSTM 50/1/1024/256", "b2t256u16wbei"),
                                       ("LSTM 50/1/2048/128", "b1t256u16wbge"),
                                       ("LSTM 50/1/1024/256", "b2t256u16wbe")])
def test_smaller_copies_make_a_deeper_ring_with_more_bytes_in_flight(spec, name):
    """A warpgroup multiplies one stage while the others' copies are in flight: slabs of 2
    and 1 chunks keep more bytes on their way than slabs of 4, each step reads the same
    bytes, and every plan fits a block's shared memory."""
    cfg = _shape(spec)
    parts = {slab: _plan(cfg, f"{name}s{slab}") for slab in SLABS}
    flight = {}
    for slab, part in parts.items():
        s = part.slices[0]
        assert part.slab == slab and part.smem <= SMEM - P.STATIC_SMEM
        assert part.wg_slabs == -(-part.chunks_per_group() // slab)
        assert P.defines(cfg, part, gx_int=False)["SLAB"] == slab
        flight[slab] = (min(part.stages, part.wg_slabs) - 1) * s.npad * slab * CHUNK
    assert flight[1] > flight[4] and flight[2] > flight[4]
    assert len({p.step_bytes()["state_read_bytes"] for p in parts.values()}) == 1
    assert _plan(cfg, name).stages == parts[4].stages  # 's4' is the default


def test_the_ring_takes_no_row_padding_and_registers_keep_h_and_c():
    """wgmma reads a stage as the bulk copy laid it (rows unpadded: stages x k-groups x WGN
    rows x SLAB chunks, k-group 0's STAGES0 where given, the kernel's own extent), and with
    the gate math in registers ('e') a CTA holds its h and c there: neither takes shared
    memory. The partial sums overlay the ring (GR: 32 lanes x 4 values x 8 blocks of 4
    warps x 2 warpgroups x GRH)."""
    cfg = _shape("LSTM 50/1/1024/256")
    e, plain = _plan(cfg, "b2t256u16wbe"), _plan(cfg, "b2t256u16wb")
    for part in (e, plain, _plan(cfg, "b2t256u16wbes2")):
        d, s = P.defines(cfg, part, gx_int=True), part.slices[0]
        stages = d.get("STAGES0", d["STAGES"]) + (s.ks - 1) * d["STAGES"]
        ring = stages * d["WGN"] * d["SLAB"] * CHUNK
        partials = (2 * 4 * (d["WGN"] // 16) * 4 * 32 * 4 if d.get("GR")
                    else s.ks * pstride(s.mpad) * d["WGN"] * 4)
        assert s.smem - s.off_ring == max(ring, partials)
    se, sp = e.slices[0], plain.slices[0]
    assert se.off_gx == se.off_own and P.defines(cfg, e, gx_int=True)["GR"] == 1
    assert sp.off_gx - sp.off_own == 2 * sp.npad * sp.nu * 4 and "GR" not in P.defines(
        cfg, plain, gx_int=True)


@pytest.mark.parametrize("spec,name,fmt", [
    ("LSTM 50/1/1024/256", "b2t256u16wbeis2", "int8"),
    ("LSTM 50/1/2048/128", "b1t256u16wbges2", "int8"),
    ("LSTM 20/2/512/64", "b2t256u16wbeis1", "fp16"),
])
def test_the_kernels_compile_without_spills_or_serialized_wgmma(spec, name, fmt):
    _nvrtc_or_skip()
    cfg = _shape(spec)
    part = _plan(cfg, name, fmt)
    info = ptxas_info(P.defines(cfg, part, gx_int=fmt == "int8" and not part.input_inside),
                      "sm_90a")
    assert info["spill_stores"] == info["spill_loads"] == 0, info
    assert SERIALIZED not in _ptxas_log(cfg, part, fmt)


def test_a_ring_of_one_chunk_slabs_stays_within_the_kernels_static_shared_memory():
    """LSTM H 512, batch 8, input 2048 in INT8, layer 0's input inside, slabs of one chunk:
    64 a step would fit in shared memory (512 bytes a stage), but each stage takes two
    mbarriers of the kernel's own (STATIC_SMEM): at most MAX_RING, the kernel's static
    shared memory within its bound."""
    _nvrtc_or_skip()
    cfg = _cfg(RNNMode.LSTM, 1, False, H=512, B=8, T=4, I=2048)
    part = _plan(cfg, "b1t256u16wbis1")
    assert part.wg_slabs == 64 and part.stages == partition.MAX_RING
    assert part.smem + (part.wg_slabs - part.stages) * 512 <= SMEM - P.STATIC_SMEM
    info = ptxas_info(P.defines(cfg, part, gx_int=False), "sm_90a")
    assert info["static_smem"] <= P.STATIC_SMEM


def test_the_tuner_times_wbeis2_beside_wbei_and_tries_wbes2_only_where_wbe_is_refused():
    """Of the tuner's list: 'wbeis2' (faster than 'wbei' where a two-stage ring waited on
    L2, slower where it kept up: launch.py's note) is tried whatever else verified but its
    own 'q' twin 'wbeiqs2' (tests/test_persistent_quantize.py); 'wbes2'
    (slower than 'wbe' and 'wbei' wherever both ran) not once either has, nor once its 'i'
    twin 'wbeis2' has, and tried where both were refused (FP16 at LSTM 50/1/1024/256, where
    'wbe' does not fit); a list the user names is tried whole."""
    names = [s.name for s in P.SETTINGS]
    wbeis2, wbei, wbe, wbes2 = (Settings.parse(f"b2t256u16{n}")
                                for n in ("wbeis2", "wbei", "wbe", "wbes2"))
    assert names.index(wbeis2.name) < names.index(wbei.name) < names.index(wbe.name) \
        < names.index(wbes2.name)
    assert [s.name for s in P.SETTINGS if s.slab] == ["b2t256u16wbeiqs2", wbeis2.name,
                                                      wbes2.name, "b1t256u16wbes2"]
    for verified in ([wbei], [wbe], [wbei, wbe], [], [Settings.parse("b2t256u16wbeiq")]):
        assert P.not_tried(wbeis2, verified, P.SETTINGS) is None
    assert "('q'" in P.not_tried(wbeis2, [Settings.parse("b2t256u16wbeiqs2")], P.SETTINGS)
    for twin in ([wbe], [wbei], [wbeis2, wbei]):  # copies of 4, with 'i' or without
        assert f"{twin[-1].name} verified, copies of 4 chunks" in P.not_tried(
            wbes2, twin, P.SETTINGS)
    assert "b2t256u16wbeis2 verified" in P.not_tried(wbes2, [wbeis2], P.SETTINGS)
    wide = RNNConfig(hidden_size=512, input_size=2048)  # 'i' stands for no twin there
    assert P.not_tried(wbes2, [wbei], P.SETTINGS, wide) is None
    assert P.not_tried(wbes2, [Settings.parse("b2t256u16")], P.SETTINGS) is None
    assert P.not_tried(wbes2, [wbe], (wbe, wbes2)) is None
    # where 'wbes2' verified, the 'g' shapes are its fallback no more
    assert "b2t256u16wbes2 verified" in P.not_tried(
        Settings.parse("b2t256u16wbge"), [wbes2], P.SETTINGS)
    # ... and one batch slice's 'wbes2' (LSTM 50/1/2048/128 INT8, where no shape of two fits,
    # faster than 'b1t256u16wbge': launch.py's note) not once a staged shape of two verified
    # (a 'g' one of two is no such shape), and the 'g' shapes not once it has
    one = Settings.parse("b1t256u16wbes2")
    g = [s for s in P.SETTINGS if s.gx_global]
    assert names.index(wbes2.name) < names.index(one.name) < names.index(g[0].name)
    for verified in ([], [Settings.parse("b2t256u16")], [g[0]]):
        assert P.not_tried(one, verified, P.SETTINGS) is None
    for verified in ([wbe], [wbeis2], [wbes2]):
        assert (f"{verified[0].name} verified, bulk staging of two batch slices"
                in P.not_tried(one, verified, P.SETTINGS))
    assert P.not_tried(one, [wbe], (wbe, one)) is None
    assert all("b1t256u16wbes2 verified" in P.not_tried(s, [one], P.SETTINGS) for s in g)
