"""The persistent kernel's host side, without a GPU: the partition (every unit of every
pseudo-layer owned once per batch slice, sizes, refusals with their bytes), the wait table
(the wavefront over layers, a bidirectional layer after the layer below), the weight blob
and the per-CTA arithmetic, run by a numpy model of the kernel against the float64 twin,
and the CUDA source compiled by NVRTC for sm_80 and sm_90."""
import collections
import dataclasses
import re
import threading
import types

import numpy as np
import pytest

from cudnn_rnn.bindings.enums import DirectionMode, RNNMode
from cudnn_rnn.check import reference
from cudnn_rnn.engine import walk
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.lowbit import candidates as C
from cudnn_rnn.lowbit import model, operands, partition, tables
from cudnn_rnn.lowbit import persistent as P
from cudnn_rnn.lowbit import ptxas
from cudnn_rnn.lowbit.engine import Unsupported

from tests.persistent_model import Model, first_layer_projection

CELLS = (RNNMode.RNN_RELU, RNNMode.RNN_TANH, RNNMode.LSTM, RNNMode.GRU)
SMEM = 227 * 1024


def _cfg(mode=RNNMode.LSTM, layers=2, bi=False, H=24, B=5, T=4, I=12):
    return RNNConfig(seq_length=T, num_layers=layers, hidden_size=H, mini_batch=B,
                     input_size=I, mode=mode,
                     direction=DirectionMode.BIDIRECTIONAL if bi else DirectionMode.UNIDIRECTIONAL)


def _plan(cfg, values, fmt, parts):
    if fmt is None:
        return None
    cal = values["calibration"]
    return model.plan(cfg, values["stacked"], model.calibrate(cfg, values["stacked"], **cal),
                      fmt, parts)


def _dq(plan, name, k, rows):
    scales = None if plan is None else getattr(plan, name)[k]
    if scales is None:
        return np.ones(rows)
    return np.broadcast_to(scales.act * np.ravel(np.asarray(scales.weight, np.float64)), (rows,))


def _run_model(cfg, fmt=None, parts=None, float_precision="fp16", seed=3, sms=12,
               batch_slices=1, order=0, edit=None, areg=False, cluster=0, units=0, wg=False,
               **kw):
    """(the numpy model's y, hy, cy, the twin's y, hy, cy, the partition)."""
    values = C.draw(cfg, seed)
    stacked, io = values["stacked"], values["io"]
    plan = _plan(cfg, values, fmt, parts)
    ops = operands.prepare(stacked, float_precision, plan)
    fx, fh, _ = P.formats(operands.precisions(stacked, float_precision, plan),
                          kw.get("input_inside", False))
    part = partition.plan(cfg, fx, fh, sm_count=sms, smem_per_block=SMEM,
                          batch_slices=batch_slices, areg=areg, cluster=cluster,
                          units=units, wg=wg, **kw)
    blob = tables.blob(part, [o.input.codes for o in ops], [o.recurrent.codes for o in ops])
    if edit:
        edit(part, blob)
    rows = cfg.gates * cfg.hidden_size
    vectors = [{"dqx": _dq(plan, "input", k, rows), "dqh": _dq(plan, "recurrent", k, rows),
                "bW": o.bW.astype(np.float64), "bR": o.bR.astype(np.float64)}
               for k, o in enumerate(ops)]
    seen = operands.seen_weights(stacked, ops)
    gx0 = [g * 1.0 for g in first_layer_projection(cfg, seen, io["x"], plan)]
    scales = {"h": [o.recurrent.act_scale for o in ops], "x": [o.input.act_scale for o in ops]}
    m = Model(part, blob, vectors, gx0, io["hx"], io["cx"], scales, io["x"])
    got = m.run(seed=order)
    want = model.forward(cfg, seen, io["x"], io["hx"], io["cx"], plan)
    return got, want, part


def _close(got, want, tol=1e-10):
    for g, w in zip(got, want):
        if w is None:
            assert g is None
            continue
        assert np.abs(g - w).max() <= tol * max(1.0, np.abs(w).max())


# ---------------------------------------------------------------------------- the partition
@pytest.mark.parametrize("mode", CELLS)
@pytest.mark.parametrize("layers,bi", [(1, False), (2, False), (3, False), (1, True), (2, True)])
@pytest.mark.parametrize("batch_slices", [1, 2])
def test_every_unit_of_every_pseudo_layer_is_owned_once_per_batch_slice(mode, layers, bi,
                                                                        batch_slices):
    cfg = _cfg(mode, layers, bi, H=40, B=9)
    part = partition.plan(cfg, "int8" if layers > 1 else None, "int8", sm_count=20,
                          smem_per_block=SMEM, batch_slices=batch_slices)
    assert part.grid <= 20
    owned = np.zeros((cfg.pseudo_layers, cfg.mini_batch, cfg.hidden_size), int)
    for s in part.slices:
        owned[s.k, s.b0:s.b0 + s.nb, s.j0:s.j0 + s.nu] += 1
        assert s.mpad % 16 == 0 and s.mpad >= cfg.gates * s.nu and s.npad % 8 == 0
        assert s.ts * part.ntw * 8 >= s.npad and s.ts * s.ks <= part.threads // 32
        assert sorted(c for kg in range(s.ks) for c in s.chunks(kg)) == list(range(s.nc))
        assert s.nxc == (0 if walk.pseudo_layers(cfg)[s.k].layer == 0 else part.xrowb // 32)
    assert (owned == 1).all()


def test_the_work_is_spread_by_k_and_the_sizes_say_why_a_shape_does_not_fit():
    cfg = _cfg(RNNMode.LSTM, 2, False, H=512, B=64, T=20, I=512)
    part = partition.plan(cfg, "fp16", "fp16", sm_count=132, smem_per_block=SMEM,
                          batch_slices=2)
    per_layer = [sum(1 for s in part.slices if s.k == k) for k in range(2)]
    assert per_layer[1] > 1.5 * per_layer[0]  # layer 1 multiplies twice the K of layer 0
    assert part.grid <= 132 and part.smem <= SMEM
    with pytest.raises(partition.DoesNotFit, match=r"needs \d+ bytes of shared memory .* gives "
                                                   r"a block 40000"):
        partition.plan(cfg, "fp16", "fp16", sm_count=132, smem_per_block=40_000)
    big = _cfg(RNNMode.LSTM, 1, False, H=2048, B=128, T=50, I=2048)
    with pytest.raises(partition.DoesNotFit, match="shared memory"):  # 32 MB of FP16 weights
        partition.plan(big, None, "fp16", sm_count=132, smem_per_block=SMEM)
    fits = partition.plan(big, None, "int8", sm_count=132, smem_per_block=SMEM)
    assert fits.weight_bytes() >= 4 * 2048 * 2048  # 16 MB of INT8 rows on chip
    with pytest.raises(partition.DoesNotFit, match="pseudo-layers"):
        partition.plan(_cfg(layers=3, bi=True), "fp16", "fp16", sm_count=4, smem_per_block=SMEM)


@pytest.mark.parametrize("threads", [64, 256])
@pytest.mark.parametrize("layers,bi", [(2, False), (3, False), (2, True)])
def test_a_k_group_multiplies_one_part_of_k_unless_it_is_the_ctas_only_one(layers, bi, threads):
    """Above the first layer the input part's chunks go to the first kx groups and the
    recurrent part's to the others, in proportion: a group straddles the two (and the
    kernel keeps a second set of accumulators, STRADDLE) only where a CTA has one group."""
    cfg = _cfg(RNNMode.GRU, layers, bi, H=64, B=32)
    part = partition.plan(cfg, "int8", "fp16", sm_count=40, smem_per_block=SMEM,
                          threads=threads)
    above = [s for s in part.slices if s.nxc]
    assert above
    for s in above:
        groups = [s.chunks(g) for g in range(s.ks)]
        if s.ks == 1:
            assert s.kx == 0 and s.straddles and groups == [range(0, s.nc)]
            continue
        assert 1 <= s.kx < s.ks and not s.straddles
        assert all(g.stop <= s.nxc for g in groups[:s.kx])
        assert all(g.start >= s.nxc for g in groups[s.kx:])
        # each part's groups take equal runs (the last may be shorter), and no other split
        # of the groups between the parts has a shorter longest run
        for runs in (groups[:s.kx], groups[s.kx:]):
            assert len({len(r) for r in runs[:-1]}) <= 1 and len(runs[-1]) <= len(runs[0])
        longest = max(len(r) for r in groups)
        nh = s.nc - s.nxc
        assert longest == min(max(-(-s.nxc // kx), -(-nh // (s.ks - kx))) for kx in range(1, s.ks))
    assert part.straddles == any(s.ks == 1 for s in above) == (threads == 64)


def test_every_cta_takes_the_heaviest_layers_tile_shape_where_the_ctas_suffice():
    """The seed's LSTM on 132 multiprocessors: 8 units a CTA in both layers (128 CTAs), so
    every CTA fills 2 m-tiles and the kernel checks no bounds (EXACT); on 20, layer 0's
    CTAs take more units than layer 1's and the kernel checks them."""
    cfg = _cfg(RNNMode.LSTM, 2, False, H=512, B=64, T=20, I=512)
    part = partition.plan(cfg, "int8", "int8", sm_count=132, smem_per_block=SMEM)
    assert {s.nu for s in part.slices} == {8} and part.grid == 128
    assert part.exact and P.defines(cfg, part, True)["EXACT"] == 1
    few = partition.plan(cfg, "int8", "int8", sm_count=60, smem_per_block=SMEM,
                         batch_slices=1)
    by_layer = {k: {s.nu for s in few.slices if s.k == k} for k in (0, 1)}
    assert max(by_layer[0]) > max(by_layer[1]) and not few.exact
    # a last slice of fewer units pads its rows to its layer's full tiles
    ragged = partition.plan(_cfg(RNNMode.LSTM, 1, False, H=40, B=16), None, "int8",
                            sm_count=3, smem_per_block=SMEM)
    assert len({s.nu for s in ragged.slices}) == 2 and len({s.mpad for s in ragged.slices}) == 1


def test_a_shape_beyond_the_kernels_32_bit_offsets_is_refused_with_the_bytes():
    long = _cfg(RNNMode.LSTM, 1, False, H=4096, B=512, T=1000, I=64)  # 33.5 GB of projections
    with pytest.raises(partition.DoesNotFit, match=r"input projection's values: \d+ bytes, "
                                                   r"beyond the kernel's 32-bit offsets"):
        partition.plan(long, None, "int8", sm_count=132, smem_per_block=SMEM)


# ---------------------------------------------------------------------------- the schedule
def test_layers_run_as_a_wavefront_and_a_reverse_layer_waits_for_the_end_of_the_one_below():
    uni = _cfg(RNNMode.GRU, 2, False, T=5)
    part = partition.plan(uni, "fp16", "fp16", sm_count=8, smem_per_block=SMEM)
    w = tables.waits(part)
    top = next(i for i, s in enumerate(part.slices) if s.k == 1)
    g0, g1 = part.counter(0, 0), part.counter(1, 0)
    for s in range(5):  # layer 1 at step s: itself after step s-1, layer 0 after step s
        assert w[top, s, 0].tolist() == [g1, (s + 1) * part.units[1]]
        assert w[top, s, 1].tolist() == [g0, (s + 2) * part.units[0]]
    bi = _cfg(RNNMode.GRU, 2, True, T=5)
    part = partition.plan(bi, "fp16", "fp16", sm_count=8, smem_per_block=SMEM)
    w = tables.waits(part)
    fwd_top = next(i for i, s in enumerate(part.slices) if s.k == 2)
    back = part.counter(1, 0)  # layer 0's reverse direction wrote time 0 at its last step
    assert [back, (4 + 2) * part.units[1]] in w[fwd_top, 0].tolist()


@pytest.mark.parametrize("mode", CELLS)
@pytest.mark.parametrize("layers,bi", [(1, False), (2, False), (3, False), (1, True), (2, True)])
def test_the_model_of_the_kernel_equals_the_twin_in_fp16(mode, layers, bi):
    got, want, part = _run_model(_cfg(mode, layers, bi), batch_slices=2 if bi else 1)
    assert any(s.ks > 1 for s in part.slices)  # k-groups meet in the partial sums
    _close(got, want)


@pytest.mark.parametrize("fmt", model.FORMATS)
@pytest.mark.parametrize("parts", model.PARTS)
@pytest.mark.parametrize("mode", (RNNMode.LSTM, RNNMode.GRU))
def test_the_model_of_the_kernel_equals_the_twin_in_eight_bits(fmt, parts, mode):
    got, want, _ = _run_model(_cfg(mode, 2, True, H=40, B=9), fmt, parts, batch_slices=2)
    _close(got, want)


@pytest.mark.parametrize("fmt", ["int8", "e4m3"])
@pytest.mark.parametrize("mode", CELLS)
def test_the_partition_for_weights_in_registers_computes_the_twins_function(fmt, mode):
    """AREG's partition (more warps along K, each with fewer weight fragments): the model of
    the kernel on it equals the twin, and each warp's fragments fit AREG_REGS registers."""
    cfg = _cfg(mode, 2, False, H=96, B=64)  # 8 n-tiles: 4 warps along n, or 2 with AREG
    got, want, part = _run_model(cfg, fmt, "both", sms=16, areg=True)
    _close(got, want)
    plain = partition.plan(cfg, fmt, fmt, sm_count=16, smem_per_block=SMEM)
    assert part.areg_slabs > 0 and plain.areg_slabs == 0
    assert max(s.ks for s in part.slices) > max(s.ks for s in plain.slices)
    # this shape's layout, worked by hand: H 96 on 8 CTAs a layer, 12 units a CTA (gates x
    # 12 rows in 16-row m-tiles); 64 batch rows are 8 n-tiles, 4 a warp with AREG (2
    # without); layer 1's K is 3 chunks of input and 3 of h over 2 + 2 k-groups: at most 2
    # chunks a group, one slab
    assert (part.mt_max, part.ntw, part.areg_slabs) == (-(-cfg.gates * 12 // 16), 4, 1)
    assert plain.ntw == 2


@pytest.mark.parametrize("cfg,kw,message", [
    (_cfg(RNNMode.LSTM, 1, False, H=64, B=16), dict(ctas=200),
     "200 CTAs: a persistent launch takes 1 to 132"),
    (_cfg(RNNMode.LSTM, 1, False, H=64, B=4), dict(batch_slices=5),
     "5 batch slices for a batch of 4 on 132 CTAs"),
    (_cfg(RNNMode.LSTM, 1, False, H=64, B=16), dict(threads=100),
     "100 threads: a whole number of warps up to 1024"),
    (_cfg(RNNMode.LSTM, 1, False, H=64, B=512), {},
     "a batch slice of 512 needs 8 n-tiles per warp with 8 warps (at most 4)"),
    (_cfg(RNNMode.LSTM, 1, False, H=512, B=64), dict(ctas=4),
     "32 m-tiles x 2 n-tiles per warp exceed the 16 accumulator tiles"),
    (_cfg(RNNMode.LSTM, 1, False, H=64, B=9), dict(batch_slices=4),
     "batch 9 in 4 slices of 3 leaves one empty"),
    # y is wider than the input projection where directions outnumber gates
    (RNNConfig(seq_length=150, num_layers=1, hidden_size=4096, mini_batch=512, input_size=64,
               mode=RNNMode.RNN_TANH, direction=DirectionMode.BIDIRECTIONAL), {},
     "y's values: 2516582400 bytes, beyond the kernel's 32-bit offsets"),
    # h's rows are padded to a 32-byte chunk: past a projection of one unit
    (RNNConfig(seq_length=65536, num_layers=1, hidden_size=1, mini_batch=1024, input_size=1,
               mode=RNNMode.RNN_TANH), {},
     "h's slots (bytes): 2147516416 bytes, beyond the kernel's 32-bit offsets"),
    # the accumulators decide: 64 registers of fragments fit, 128 with them do not
    (_cfg(RNNMode.LSTM, 1, False, H=128, B=32), dict(sm_count=8, areg=True),
     "take 64 registers a thread (4 m-tiles x 4 chunks x 4; at most 64), 128 with its "
     "accumulators (at most 96)"),
])
def test_each_refusal_of_the_partition_says_what_is_short(cfg, kw, message):
    kw = dict(dict(sm_count=132), **kw)
    with pytest.raises(partition.DoesNotFit, match=re.escape(message)):
        partition.plan(cfg, "int8" if cfg.num_layers > 1 else None, "int8",
                       smem_per_block=SMEM, **kw)


def test_weights_that_do_not_fit_registers_are_refused_with_the_count():
    big = _cfg(RNNMode.LSTM, 1, False, H=1024, B=256)
    with pytest.raises(partition.DoesNotFit, match=r"take 256 registers a thread \(2 m-tiles x "
                                                   r"32 chunks x 4; at most 64\), 288 with its "
                                                   r"accumulators \(at most 96\)"):
        partition.plan(big, "int8", "int8", sm_count=132, smem_per_block=SMEM, areg=True)
    with pytest.raises(partition.DoesNotFit, match="need at most 256 threads a CTA"):
        partition.plan(_cfg(RNNMode.LSTM, 2, False, H=512, B=64), "fp16", "fp16", sm_count=132,
                       smem_per_block=SMEM, threads=512, areg=True)


@pytest.mark.parametrize("mode", CELLS)
@pytest.mark.parametrize("fmt", ["int8", "e4m3"])
def test_the_kernel_with_weights_in_registers_compiles_without_spills(mode, fmt):
    """AREG at the seed's shape (20/2/512/64, 132 multiprocessors): every fragment a
    register (no local memory), and the default kernel keeps its weights in shared memory."""
    _nvrtc_or_skip()
    cfg = _cfg(mode, 2, False, H=512, B=64)
    part = partition.plan(cfg, fmt, fmt, sm_count=132, smem_per_block=SMEM, areg=True)
    consts = P.defines(cfg, part, gx_int=fmt == "int8")
    assert consts["AREG"] == 1 and consts["NSLAB"] == part.areg_slabs
    info = ptxas.ptxas_info(consts)
    assert info["spill_stores"] == info["spill_loads"] == 0, info
    assert P.defines(cfg, partition.plan(cfg, fmt, fmt, sm_count=132, smem_per_block=SMEM),
                     gx_int=False)["AREG"] == 0


@pytest.mark.parametrize("order", [1, 2, 3])
def test_any_order_the_waits_allow_gives_the_same_result(order):
    cfg = _cfg(RNNMode.LSTM, 3, False)
    got, want, _ = _run_model(cfg, "int8", "both", order=order)
    _close(got, want)


def test_a_wait_target_one_short_reads_an_unwritten_slot_and_one_over_deadlocks(monkeypatch):
    from tests import persistent_model
    cfg = _cfg(RNNMode.LSTM, 2, False)
    real = tables.waits

    def short(part):
        w = real(part)
        w[:, :, 1, 1] -= part.units[0]  # layer 1 no longer waits for layer 0's step
        return w

    def over(part):
        w = real(part)
        w[:, -1, 0, 1] += 1
        return w
    for broken, message in ((short, "unwritten slot"), (over, "deadlock")):
        monkeypatch.setattr(persistent_model, "waits", broken)
        with pytest.raises(AssertionError, match=message):
            for order in range(8):  # some order reaches the early read
                _run_model(cfg, order=order)


def test_one_ctas_weights_zeroed_changes_the_result():
    cfg = _cfg(RNNMode.LSTM, 2, False)

    def zero_one(part, blob):
        s = part.slices[len(part.slices) // 2]
        blob[s.blob:s.blob + s.mpad * s.rowb] = 0
    got, want, _ = _run_model(cfg, edit=zero_one)
    assert np.abs(got[0] - want[0]).max() > 1e-3


# ---------------------------------------------------------------------------- refusals
def test_what_the_kernel_does_not_build_is_refused_with_the_reason():
    cfg = _cfg()
    limits = {"sm_count": 132, "smem_per_block": SMEM, "cooperative": True,
              "capability": (8, 0)}
    with pytest.raises(Unsupported, match=r"e4m3 mma.sync needs compute capability 8\.9\+"):
        P.check_device(cfg, "e4m3", "e4m3", limits)
    with pytest.raises(Unsupported, match="not fp32"):
        P.check_device(cfg, None, "fp32", limits)
    with pytest.raises(Unsupported, match="no cooperative launch"):
        P.check_device(cfg, None, "fp16", dict(limits, cooperative=False))
    with pytest.raises(Unsupported, match="projection"):
        P.check_device(dataclasses.replace(cfg, proj_size=8), None, "fp16", limits)
    with pytest.raises(Unsupported, match="equal length"):
        P.check_device(cfg.replace(lengths="descending:1"), None, "fp16", limits)
    with pytest.raises(Unsupported, match=r"fp8 tensor-core GEMMs need compute capability 8\.9"):
        P.check_device(cfg, "int8", "fp16", limits, {"fp8"})  # layer 0's input GEMM in FP8
    P.check_device(cfg, "int8", "fp16", limits, {"int8"})  # INT8 and FP16 on sm_80: fine
    turing = dict(limits, capability=(7, 5))  # no bf16, int8 m16n8k32 or e4m3 mma.sync
    for fmt in ("fp16", "bf16", "int8"):
        with pytest.raises(Unsupported, match=rf"{fmt} mma.sync needs compute capability 8\.0\+, "
                                              r"this GPU has 7\.5"):
            P.check_device(cfg, None, fmt, turing)


# ---------------------------------------------------------------------------- the source
def _nvrtc_or_skip():
    try:
        from cupy_backends.cuda.libs import nvrtc
        nvrtc.getVersion()
    except Exception as exc:  # no CUDA wheels with NVRTC in this environment
        pytest.skip(f"NVRTC is not available here ({type(exc).__name__}: {exc})")


def _struct_fields(name: str) -> list:
    """(field, numpy type) of ``struct name`` in persistent.cu, in order (pointers u8)."""
    import re
    body = re.search(r"struct %s \{[^\n]*\n(.*?)\n\};" % name, P.SOURCE.read_text(), re.S)[1]
    fields = []
    for line in body.splitlines():
        decl = line.split("//")[0].strip().rstrip(";")
        m = re.fullmatch(r"(?:const )?(unsigned char|long long|float|int|void)(\*?) (.+)", decl)
        kind = "u8" if m[2] else {"float": "f4", "int": "i4", "long long": "i8"}[m[1]]
        fields += [(n.strip(), kind) for n in m[3].split(",")]
    return fields


@pytest.mark.parametrize("struct,dtype", [("Layer", P.LAYER), ("Slice", P.SLICE)])
def test_the_launch_tables_lay_out_the_kernels_structs(struct, dtype):
    """The host's records (persistent.LAYER, SLICE) name the kernel's struct fields in its
    order and sizes, so the kernel reads each value where the host wrote it."""
    want = [(n, np.dtype(t)) for n, t in _struct_fields(struct)]
    assert [(n, dtype.fields[n][0]) for n in dtype.names] == want


def test_the_launch_passes_the_kernels_parameters_in_their_order():
    """PersistentEngine.forward passes persistent.ARGS in that order: the names of
    persistent_rnn's parameters, so that no two pointers trade places."""
    import re
    sig = re.search(r"persistent_rnn\((.*?)\)\s*\{", P.SOURCE.read_text(), re.S)[1]
    assert tuple(p.split()[-1].lstrip("*") for p in sig.split(",")) == P.ARGS


COMPILED = [("sm_90", RNNMode.LSTM, f, f) for f in P.FORMAT_CODE] + \
    [("sm_90", mode, "int8", "fp16") for mode in CELLS] + \
    [("sm_80", RNNMode.GRU, f, f) for f in ("fp16", "bf16", "int8")] + \
    [("sm_80", mode, "int8", "fp16") for mode in CELLS if mode != RNNMode.GRU]


@pytest.mark.parametrize("arch,mode,fx,fh", COMPILED)
def test_the_kernel_compiles_with_nvrtc(arch, mode, fx, fh):
    _nvrtc_or_skip()
    cfg = _cfg(mode, 2, True, H=64, B=16)
    part = partition.plan(cfg, fx, fh, sm_count=132, smem_per_block=SMEM)
    cubin = ptxas.nvrtc_compile(P.defines(cfg, part, gx_int=fx == "int8"), arch)
    assert cubin[:4] == b"\x7fELF"


def test_warp_groups_all_ctas_agree_on_are_compiled_in_and_others_read_at_run_time():
    _nvrtc_or_skip()
    seed = RNNConfig(seq_length=20, num_layers=2, hidden_size=512, mini_batch=64,
                     input_size=512, mode=RNNMode.LSTM)
    part = partition.plan(seed, "int8", "int8", sm_count=132, smem_per_block=SMEM, threads=512)
    consts = P.defines(seed, part, gx_int=True)
    assert (consts["KS"], consts["TS"]) == (4, 4)
    uneven = _cfg(RNNMode.GRU, 1, False, H=64, B=33)  # batch slices of 17 and 16 rows
    part = partition.plan(uneven, None, "fp16", sm_count=132, smem_per_block=SMEM,
                          batch_slices=2)
    assert len({s.ts for s in part.slices}) == 2
    consts = P.defines(uneven, part, gx_int=False)
    assert consts["TS"] == 0 and consts["KS"] == 0
    assert ptxas.ptxas_info(consts)["spill_stores"] == 0


@pytest.mark.parametrize("exact,straddle", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_each_product_path_compiles(exact, straddle):
    """EXACT x STRADDLE, from the partitions that select them (the GPU test runs each)."""
    _nvrtc_or_skip()
    cfg = _cfg(RNNMode.GRU, 2, False, H=128 if exact else 64, B=32 if straddle else 16)
    part = partition.plan(cfg, "int8", "fp16", sm_count=132 if exact else 7,
                          smem_per_block=SMEM, threads=64 if straddle else 256)
    consts = P.defines(cfg, part, gx_int=False)
    assert (consts["EXACT"], consts["STRADDLE"]) == (exact, straddle)
    assert ptxas.ptxas_info(consts)["spill_stores"] == 0


@pytest.mark.parametrize("settings", [s.name for s in P.SETTINGS])
def test_every_shape_the_tuner_tries_compiles_at_the_seeds_shape_or_does_not_fit(settings):
    """Each of launch.SETTINGS at the seed's shape (20/2/512/64; LSTM in INT8 on both GEMMs,
    GRU in FP16; an H100's 132 multiprocessors): the partition refuses it (DoesNotFit, which
    the engine records as NOT_SUPPORTED) or its kernel compiles (a compile error would end
    the tuner's table). b2t256u16 and b2t256u16wb, the seed's fastest on the H100, without
    spills (b2t512 spills 32 bytes a thread there, docs/lowbit.md)."""
    _nvrtc_or_skip()
    s = P.Settings.parse(settings)
    compiled = 0
    for mode, fmt in ((RNNMode.LSTM, "int8"), (RNNMode.GRU, "fp16")):
        cfg = _cfg(mode, 2, False, H=512, B=64)
        try:
            part = partition.plan(cfg, fmt, fmt, sm_count=132,
                                  smem_per_block=SMEM - P.STATIC_SMEM, **s.partition_args())
        except partition.DoesNotFit:
            continue
        info = ptxas.ptxas_info(P.defines(cfg, part, gx_int=fmt == "int8"),
                                "sm_90a" if s.wg else "sm_90")
        compiled += 1
        if settings in ("b2t256u16", "b2t256u16wb"):
            assert info["spill_stores"] == info["spill_loads"] == 0, (mode, info)
    assert compiled or settings == "b4t256", settings  # b4t256: 12 m-tiles a warp at H 512


@pytest.mark.parametrize("fx,fh", [("int8", "int8"), ("e4m3", "e4m3"), ("bf16", "bf16"),
                                   ("int8", "fp16")])
def test_the_polling_kernel_compiles_without_spills_and_the_tuner_does_not_try_it(fx, fh):
    """POLL (consumers read the state itself until no sentinel byte is left): an
    experiment a diagnostic names (b1t256p, ...), not a shape the tuner tries."""
    _nvrtc_or_skip()
    cfg = _cfg(RNNMode.LSTM, 2, True, H=64, B=16)
    part = partition.plan(cfg, fx, fh, sm_count=132, smem_per_block=SMEM)
    consts = P.defines(cfg, part, gx_int=fx == "int8", poll=True)
    assert consts["POLL"] == 1 and ptxas.ptxas_info(consts)["spill_stores"] == 0
    assert not any(s.poll for s in P.SETTINGS)
    for s in P.SETTINGS + (P.Settings(ctas=64, batch_slices=2, threads=512, poll=True),):
        assert P.Settings.parse(s.name) == s  # a diagnostic names any shape
    assert P.Settings.parse("b1t256p").poll and not P.Settings.parse("b1t256").poll
    assert P.Settings.parse("b1t256r").areg and P.Settings(areg=True).name == "b1t256r"
    assert P.Settings.parse("b2c64t256pr") == P.Settings(64, 2, 256, True, True)
    assert P.Settings.parse("b2t512u16") == P.Settings(batch_slices=2, threads=512, units=16)
    assert P.Settings(batch_slices=2, units=8, cluster=4).name == "b2t256u8k4"
    assert not any(s.areg for s in P.SETTINGS)  # not tuned until measured
    for bad in ("b1", "t256", "b1t256z", "B1T256"):
        with pytest.raises(ValueError, match="no launch shape"):
            P.Settings.parse(bad)


@pytest.mark.parametrize("args,needle", [
    (["--settings", "b1"], "no launch shape 'b1'"),
    (["--shapes", "LSTM:20"], "is not CELL:T:L:H:B"),
    (["--shapes", "FOO:1:1:1:1"], "is not CELL:T:L:H:B"),
    (["--trace", "persistent:fp16"], "NAME@SETTINGS"),
    (["--trace", "persistent:fp16@b9"], "no launch shape 'b9'"),
    (["--drop", "gate"], "no phase gate"),
    (["--variants", "fast"], "no variant fast"),
    (["--variants", "gates_exact+fast"], "no variant fast"),
    (["--names", "persistent:fp17"], "no engine configuration named 'persistent:fp17'"),
    (["--trace", "fp17@b1t256"], "no engine configuration named 'fp17'"),
    (["--out", "README.md"], "--out 'README.md' is a file"),
    (["--ntw", "2,9"], "--ntw: whole numbers 1 to 4"),
    (["--ntw", "four"], "--ntw: whole numbers 1 to 4"),
    # patches of the gate math without 'e', where a shape with 'e' would run unpatched
    (["--drop", "gates", "--settings", "b2t256u16wb", "--trace",
      "persistent:fp16@b2t256u16wbe"], "gates patch the gate math without 'e'"),
    (["--variants", "gates_hoisted+fence_once"], "gates_hoisted patch the gate math"),
])
def test_the_probe_tool_refuses_bad_input_in_one_line_and_writes_nothing(tmp_path, args,
                                                                         needle):
    from pathlib import Path
    import subprocess
    import sys
    from tests.test_cli import assert_one_line_exit_2
    root = Path(__file__).resolve().parent.parent
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(root / "tools" / "persistent_probe.py"),
                           "--out", str(out), *args], capture_output=True, text=True,
                          timeout=120, cwd=root)
    assert_one_line_exit_2(proc, needle)
    assert not out.exists()


def _probe_tool():
    """tools/persistent_probe.py as a module (it is not part of the package)."""
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parent.parent / "tools" / "persistent_probe.py"
    spec = importlib.util.spec_from_file_location("tools_persistent_probe", path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


@pytest.mark.parametrize("phase", ["mma", "load", "gates", "cell", "stores", "y", "gx_next"])
def test_the_probe_tool_leaves_each_phase_out_of_the_kernel_it_compiles(phase):
    """tools/persistent_probe.py --drop: its exact-text patches still find the kernel's text
    (as often as listed) and leave a kernel that compiles, so a phase's cost stays
    measurable as the kernel changes."""
    _nvrtc_or_skip()
    tool = _probe_tool()
    cfg = _cfg(RNNMode.GRU, 2, False, H=64, B=16)
    part = partition.plan(cfg, "int8", "fp16", sm_count=132, smem_per_block=SMEM)
    consts = P.defines(cfg, part, gx_int=True)
    text = tool.without(phase)(consts)
    assert text != P.source(consts)
    from cupy_backends.cuda.libs import nvrtc
    prog = nvrtc.createProgram(text, "dropped.cu", [], [])
    try:
        nvrtc.compileProgram(prog, ["--gpu-architecture=sm_90", "--std=c++17"])
    finally:
        nvrtc.destroyProgram(prog)


@pytest.mark.parametrize("variant", ["gates_exact", "sums_predicated", "quant_exact",
                                     "ks_runtime", "stale_on_stall", "y_in_gates",
                                     "gates_swizzled", "fence_poll", "pairs_together",
                                     "fence_poll+gates_exact+gates_swizzled"])
def test_the_probe_tools_kernel_variants_still_apply_and_compile_without_spills(variant,
                                                                              monkeypatch):
    """tools/persistent_probe.py --variants: each idea's exact-text patch still finds the
    kernel's text, changes it, and leaves a kernel that compiles without spills, so the
    idea stays measurable beside the kernel as the kernel changes."""
    _nvrtc_or_skip()
    tool = _probe_tool()
    for mode, fx, fh in [(RNNMode.LSTM, "int8", "int8"), (RNNMode.GRU, "fp16", "fp16")]:
        cfg = _cfg(mode, 2, True, H=64, B=16)
        part = partition.plan(cfg, fx, fh, sm_count=132, smem_per_block=SMEM)
        consts = P.defines(cfg, part, gx_int=fx == "int8")
        text = tool.varied(variant)(consts)
        assert text != P.source(consts)
        monkeypatch.setattr(ptxas, "source", lambda c, text=text: text)
        assert ptxas.ptxas_info(consts)["spill_stores"] == 0


@pytest.mark.parametrize("threads", [256, 512])
@pytest.mark.parametrize("fmt", list(P.FORMAT_CODE))
def test_the_kernels_own_shared_memory_fits_what_the_engine_sets_aside(fmt, threads):
    """The engine gives every kernel the GPU's opt-in shared memory less STATIC_SMEM as its
    dynamic cap (engines share one compiled function): ptxas must count no more than that
    for the kernel's own __shared__ variables."""
    _nvrtc_or_skip()
    cfg = _cfg(RNNMode.LSTM, 2, False, H=64, B=16)
    part = partition.plan(cfg, fmt, fmt, sm_count=132, smem_per_block=SMEM, threads=threads)
    info = ptxas.ptxas_info(P.defines(cfg, part, gx_int=fmt == "int8"))
    # its own: the int the block agrees a wait gave up in, at least (ptxas rounds it up)
    assert 0 < info["static_smem"] <= P.STATIC_SMEM and info["registers"] > 0, info


def test_nvrtc_refuses_e4m3_below_sm_89():
    _nvrtc_or_skip()
    cfg = _cfg(RNNMode.LSTM, 1, False, H=64, B=16)
    part = partition.plan(cfg, None, "e4m3", sm_count=132, smem_per_block=SMEM)
    with pytest.raises(RuntimeError, match="NVRTC"):
        ptxas.nvrtc_compile(P.defines(cfg, part, gx_int=False), "sm_80")


class _CompilingCupy:
    """CuPy as :func:`persistent.precompile` uses it, on a machine without a GPU: a device
    (an H200's limits), and a RawModule whose kernel "compiles" by waiting at a barrier that
    only opens when every compile of the call is in flight at once; ``fails(code)``: the
    kernels whose compile raises (CuPy's CompileException stands for every such error)."""

    def __init__(self, parties: int, fails=lambda code: False):
        self.barrier = threading.Barrier(parties, timeout=60)
        self.fails = fails
        self.compiled: list[str] = []
        from cudnn_rnn.lowbit.limits import ATTR_L2_SIZE
        limits = {P.ATTR_SM_COUNT: 132, P.ATTR_COOPERATIVE: 1, P.ATTR_SMEM_OPTIN: SMEM,
                  P.ATTR_SMEM_PER_SM: SMEM + 1024, P.ATTR_SMEM_RESERVED: 1024,
                  ATTR_L2_SIZE: 50 * 2 ** 20}
        device = type("Device", (), {"id": 0, "compute_capability": "90",
                                     "__init__": lambda self, i=0: None,
                                     "__enter__": lambda self: self,
                                     "__exit__": lambda self, *a: None})
        self.cuda = types.SimpleNamespace(Device=device, runtime=types.SimpleNamespace(
            deviceGetAttribute=lambda attr, dev: limits[attr]))

    def RawModule(self, code, options, enable_cooperative_groups):  # noqa: N802 (CuPy's name)
        assert enable_cooperative_groups and options == P.OPTIONS
        outer = self

        class Module:
            def get_function(self, name):
                assert name == "persistent_rnn"
                outer.barrier.wait()  # BrokenBarrierError: the compiles ran one after another
                if outer.fails(code):
                    raise RuntimeError("nvrtc: error: the kernel does not compile")
                outer.compiled.append(code)
        return Module()


@pytest.mark.parametrize("fmt,parts", [(None, None), ("int8", "both"), ("e4m3", "recurrent")])
def test_the_launch_shapes_kernels_are_compiled_side_by_side_once_each(fmt, parts):
    cfg = _cfg(RNNMode.LSTM, 2, False, H=64, B=16)
    values = C.draw(cfg, 1)
    plan = _plan(cfg, values, fmt, parts)
    fx, fh, gx = P.formats(operands.precisions(values["stacked"], "fp16", plan))
    # the shapes CuPy's RawModule compiles (wgmma's go to NVRTC directly: cubin.load)
    through_cupy = tuple(s for s in P.SETTINGS if not s.wg)
    wanted = {P.source(P.defines(cfg, partition.plan(
        cfg, fx, fh, sm_count=132, smem_per_block=SMEM - P.STATIC_SMEM,
        **s.partition_args()), gx == "int8")) for s in through_cupy}
    assert len(wanted) > 1  # the shapes differ in their compiled constants
    cp = _CompilingCupy(len(wanted))
    shapes = through_cupy + through_cupy[:1]  # a shape given twice is compiled once
    assert P.precompile(cp, cfg, values["stacked"], "fp16", plan, shapes) == len(wanted)
    assert sorted(cp.compiled) == sorted(wanted)


def test_precompiling_converts_no_weight(monkeypatch):
    """precompile needs the GEMMs' precisions only: the launch shapes' kernels compile
    without a weight converted (at LSTM 50/1/4096/256 each conversion of the E4M3 weights
    took 20-40 s on the host)."""
    cfg = _cfg(RNNMode.LSTM, 2, False, H=64, B=16)
    values = C.draw(cfg, 1)
    plan = _plan(cfg, values, "e4m3", "both")

    def refuse(*a, **k):
        raise AssertionError("a weight was converted")
    monkeypatch.setattr(P, "prepare", refuse)
    monkeypatch.setattr(operands, "prepare", refuse)
    cp = _CompilingCupy(1)
    shapes = (P.Settings.parse("b1t256"),)
    assert P.precompile(cp, cfg, values["stacked"], "fp16", plan, shapes) == 1


def test_an_engine_whose_shape_does_not_fit_is_refused_before_a_weight_is_converted(
        monkeypatch):
    """PersistentEngine judges its launch shape on the GEMMs' precisions first: a shape
    that does not fit is Unsupported without its weights converted (each shape of a row
    is an engine of its own)."""
    from cudnn_rnn.engine import gpu
    big = _cfg(RNNMode.LSTM, 1, False, H=1024, B=16)
    stacked = model.stack(big, reference.random_params(big, np.random.default_rng(0)))

    def refuse(*a, **k):
        raise AssertionError("a weight was converted")
    monkeypatch.setattr(P, "prepare", refuse)
    monkeypatch.setattr(gpu, "cupy_or_raise", lambda: _CompilingCupy(1))
    with pytest.raises(Unsupported, match="does not fit on this GPU"):
        P.PersistentEngine(big, stacked, "fp16", None, P.Settings(batch_slices=4))


def test_what_fails_to_compile_or_fit_is_left_to_the_engine_to_judge():
    """precompile gives no verdict: a shape that does not fit, a kernel whose compile fails
    and a device that cannot be asked are each skipped (the engine's build meets them
    again and records or raises them), and the rest still compile."""
    big = _cfg(RNNMode.LSTM, 1, False, H=1024, B=16)
    stacked = model.stack(big, reference.random_params(big, np.random.default_rng(0)))
    shapes = (P.Settings(batch_slices=4),  # 33 CTAs per quarter batch: 1024 x 4096 FP16 weights
              P.Settings(batch_slices=1))  # 132 CTAs for the whole batch: fits
    cp = _CompilingCupy(1)
    assert P.precompile(cp, big, stacked, "fp16", None, shapes) == 1 and len(cp.compiled) == 1
    cp = _CompilingCupy(1, fails=lambda code: True)
    assert P.precompile(cp, big, stacked, "fp16", None, shapes) == 0 and cp.compiled == []
    cp = _CompilingCupy(1)
    cp.cuda.runtime.deviceGetAttribute = lambda attr, dev: 1 / 0  # no device to ask
    assert P.precompile(cp, big, stacked, "fp16", None, shapes) == 0 and cp.compiled == []


def test_a_launch_shape_with_r_lays_out_weights_in_registers_and_a_spilling_kernel_is_refused():
    """b1t256r's layout holds register slabs (layout passes the shape's areg through); its
    kernel, compiled, is refused where ptxas made it spill (local memory a thread)."""
    cfg = _cfg(RNNMode.LSTM, 2, False, H=96, B=64)
    values = C.draw(cfg, 1)
    plan = _plan(cfg, values, "int8", "both")
    gemms = operands.precisions(values["stacked"], "fp16", plan)
    limits = {"sm_count": 16, "smem_per_block": SMEM - P.STATIC_SMEM, "cooperative": True,
              "capability": (9, 0)}
    part, gx = P.layout(cfg, gemms, plan, P.Settings.parse("b1t256r"), limits)
    assert part.areg_slabs > 0
    assert P.layout(cfg, gemms, plan, P.Settings.parse("b1t256"), limits)[0].areg_slabs == 0
    kernel = types.SimpleNamespace(local_size_bytes=64, num_regs=255)
    module = types.SimpleNamespace(get_function=lambda name: kernel)
    engine = P.PersistentEngine.__new__(P.PersistentEngine)
    engine.cfg, engine.part, engine.settings, engine.limits = cfg, part, P.Settings.parse(
        "b1t256r"), limits
    engine.cp = types.SimpleNamespace(RawModule=lambda **kw: module, zeros=None)
    with pytest.raises(Unsupported, match=r"weights in registers spill: the kernel takes 64 "
                                          r"bytes of local memory a thread \(255 registers\)"):
        engine._compile(gx_int=True, spin_limit=P.SPIN_LIMIT, trace=False)
    kernel.local_size_bytes = 0  # no spill: the kernel is kept
    engine._compile(gx_int=True, spin_limit=P.SPIN_LIMIT, trace=False)
    assert engine.consts["AREG"] == 1 and engine.consts["NSLAB"] == part.areg_slabs


def test_one_format_per_gemm_kind_across_layers_or_a_refusal():
    assert P.formats([("fp16", "int8"), ("int8", "int8")]) == ("int8", "int8", "fp16")
    assert P.formats([("fp8", "fp8")]) == (None, "e4m3", "fp8")
    for mixed in ([("fp16", "int8"), ("int8", "fp16")],
                  [("fp16", "int8"), ("int8", "int8"), ("fp16", "int8")]):
        with pytest.raises(Unsupported, match="one format per GEMM kind across layers"):
            P.formats(mixed)


def test_a_polling_launch_shape_is_precompiled_as_the_polling_kernel():
    """precompile compiles what the engine of each shape will load: POLL for a 'p' shape."""
    cfg = _cfg(RNNMode.LSTM, 1, False, H=64, B=16)
    stacked = model.stack(cfg, reference.random_params(cfg, np.random.default_rng(0)))
    cp = _CompilingCupy(2)
    shapes = (P.Settings.parse("b1t256"), P.Settings.parse("b1t256p"))
    assert P.precompile(cp, cfg, stacked, "fp16", None, shapes) == 2
    assert sorted("#define POLL 1\n" in code for code in cp.compiled) == [False, True]


@pytest.mark.parametrize("mode", [RNNMode.LSTM, RNNMode.GRU], ids=lambda m: m.name)
@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
def test_units_given_a_cta_make_a_partition_the_model_runs_to_the_twin(mode, bidirectional):
    """Settings.units: every CTA of every pseudo-layer takes that many units (in more batch
    slices, the same compute with less of the state read a CTA and step); the numpy model of
    that partition, in two orders its waits allow, equals the float64 twin."""
    cfg = _cfg(mode, 2, bidirectional, H=64, B=16)
    for order in (0, 1):
        got, want, part = _run_model(cfg, "int8", "both", sms=132, batch_slices=2, units=16,
                                     order=order)
        _close(got, want)
    assert {s.nu for s in part.slices} == {16} and len({s.b0 for s in part.slices}) == 2
    assert part.grid == 2 * cfg.dirs * 2 * 4  # layers x directions x slices x H/16


@pytest.mark.parametrize("units,needle", [
    (6, "6 units a CTA: a multiple of 4 from 4 to 64"),
    (4, "4 units a CTA: 4 pseudo-layers x 2 batch slices x 16 CTAs = 128 CTAs, 12 available"),
])
def test_units_that_make_no_partition_are_refused_with_the_count(units, needle):
    cfg = _cfg(RNNMode.LSTM, 2, True, H=64, B=16)
    with pytest.raises(partition.DoesNotFit, match=re.escape(needle)):
        partition.plan(cfg, "int8", "int8", sm_count=12, smem_per_block=SMEM, batch_slices=2,
                       units=units)
    for cluster in (4, 3):  # also where the cluster alone would be refused
        with pytest.raises(partition.DoesNotFit, match="give the units or the cluster"):
            partition.plan(cfg, "int8", "int8", sm_count=132, smem_per_block=SMEM, units=16,
                           cluster=cluster)


def test_what_a_launch_shape_reads_a_step_is_said_for_the_seed():
    """Partition.step_bytes (in every persistent record's launch): at the seed's LSTM in 8
    bits, b1t512's CTA of layer 1 reads its 64 x 1024-byte state and, in its product loop,
    its 32 weight rows once per each of 4 n-groups plus the state once (192 KB); with 16
    units of 32 rows a CTA, half the state and 160 KB."""
    seed = RNNConfig(seq_length=20, num_layers=2, hidden_size=512, mini_batch=64,
                     input_size=512, mode=RNNMode.LSTM)
    plan = lambda **kw: partition.plan(seed, "int8", "int8", sm_count=132,  # noqa: E731
                                       smem_per_block=SMEM, **kw)
    assert plan(threads=512).step_bytes() == {"state_read_bytes": 64 * 1024,
                                              "shared_read_bytes": 192 * 1024}
    assert plan(threads=512, batch_slices=2, units=16).step_bytes() == {
        "state_read_bytes": 32 * 1024, "shared_read_bytes": 160 * 1024}


def test_the_swizzled_gate_math_takes_every_pair_once_and_reads_32_banks_a_warp():
    """tools/persistent_probe.py --variants gates_swizzled, its expression evaluated as the
    kernel's text writes it (C and Python read it alike): at 8 units a CTA each (batch row,
    unit) pair is taken once whatever the batch, and a warp's reads of a gate's partial sums
    (b * ps + u, ps 36 at 32 rows) fall on 32 banks where the plain order puts two lanes on
    each of 16 banks."""
    tool = _probe_tool()
    (old, new, _times), = tool.VARIANTS["gates_swizzled"]
    expr = " ".join(re.search(r"\? (.*?) : tid;", new, re.S).group(1).split())
    swz = lambda tid: eval(expr, {"tid": tid})  # noqa: E731
    nu, ps = 8, 32 + 4 + (32 & 16)
    for threads in (256, 512):
        for nb in (1, 5, 64, 100):
            seen = sorted(p for t in range(threads) for p in range(swz(t), nb * nu, threads))
            assert seen == list(range(nb * nu)), (threads, nb)

    def worst(order):  # the most lanes of one warp on one bank
        return max(max(collections.Counter((p // nu * ps + p % nu) % 32
                                           for p in map(order, range(w, w + 32))).values())
                   for w in range(0, 512, 32))
    assert worst(lambda t: t) == 2 and worst(swz) == 1
