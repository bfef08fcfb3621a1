"""The gate math on the sums in registers (launch shapes with 'e' after 'wb', the kernel's
``GR``; an LSTM or a GRU) without a GPU: its name and refusals, the weight rows laid out so that a lane and
the lane 16 apart hold a unit's four gates (``tables.gate_rows``, the kernel's ``gr_row``
and its inverse read from persistent.cu), the blob moved by rows only, the numpy model on
that layout against the twin, the staged projection's reads on 32 banks, and the kernel
compiled for sm_90a at the issue's shapes without spills or serialized wgmma."""
import dataclasses
import re

import numpy as np
import pytest

from cudnn_rnn.bindings.enums import RNNMode
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.lowbit import partition, tables
from cudnn_rnn.lowbit import persistent as P
from cudnn_rnn.lowbit.launch import Settings

from tests.test_clusters import _ptx
from tests.test_persistent import SMEM, _cfg, _close, _nvrtc_or_skip, _run_model
from tests.test_persistent_wg import SERIALIZED, _ptxas_log, _seed, _shape


def _plan(cfg, fmt="int8", slices=2, units=16, **kw):
    return partition.plan(cfg, fmt if cfg.num_layers > 1 else None, fmt, sm_count=132,
                          smem_per_block=SMEM, batch_slices=slices, units=units, wg=True,
                          bulk=True, **kw)


def _kernel_expr(pattern: str) -> str:
    """An expression of persistent.cu (C and Python alike: shifts, masks, sums)."""
    m = re.search(pattern, P.SOURCE.read_text())
    assert m, pattern
    return m.group(1)


def test_the_launch_shape_names_it_with_an_e_after_wb():
    for name in ("b2t256u16wbe", "b1t256u16wbge", "b2t256u16wbem2"):
        s = Settings.parse(name)
        assert s.name == name and s.reg_gates and s.partition_args()["reg_gates"]
    assert not Settings.parse("b2t256u16wbg").reg_gates
    for name in ("b2t256u16we", "b2t256u16e", "b2t256u16wbeg"):
        with pytest.raises(ValueError):
            Settings.parse(name)
    with pytest.raises(ValueError, match="name 'wb' first"):
        Settings(batch_slices=2, units=16, wg=True, reg_gates=True)
    with pytest.raises(partition.DoesNotFit, match="bulk staging's: 'wbe'"):
        partition.plan(_seed(), "int8", "int8", sm_count=132, smem_per_block=SMEM,
                       batch_slices=2, units=16, wg=True, reg_gates=True)


@pytest.mark.parametrize("cfg,kw,message", [
    (_seed(RNNMode.RNN_RELU), {}, "an LSTM's or a GRU's gates.* not RNN_RELU"),
    (_seed(RNNMode.RNN_TANH), {}, "not RNN_TANH"),
    (_cfg(RNNMode.LSTM, 1, H=64, B=32, I=64), {"units": 8}, "16 units in every CTA .* not 8"),
    (_cfg(RNNMode.LSTM, 1, H=40, B=32, I=40), {}, "not 8 and 16"),
    (_cfg(RNNMode.LSTM, 1, H=64, B=16, I=64), {}, "8 padded rows, not a multiple of 16"),
])
def test_each_refusal_says_what_is_short(cfg, kw, message):
    _plan(cfg, **kw)  # the same shape without 'e' plans
    with pytest.raises(partition.DoesNotFit, match=message):
        _plan(cfg, reg_gates=True, **kw)


def test_a_lane_and_the_lane_16_apart_hold_a_units_four_gates():
    """Warp w of an instruction's 64 rows (rows 16w .. 16w+15; lane l holds rows l // 4
    and l // 4 + 8) holds units 4w .. 4w+3; lanes l and l ^ 16 hold one unit's four gates
    between them, every row once."""
    part = _plan(_seed(), reg_gates=True)
    s = part.slices[0]
    rows = tables.gate_rows(part, s)
    assert sorted(rows.ravel()) == list(range(64))
    where = {int(r): (q, u) for (q, u), r in np.ndenumerate(rows)}
    for w in range(4):
        for lane in range(32):
            gq, mate = lane // 4, (lane ^ 16) // 4
            held = [where[16 * w + g + 8 * h] for g in (gq, mate) for h in (0, 1)]
            assert {u for _, u in held} == {4 * w + gq % 4}
            assert sorted(q for q, _ in held) == [0, 1, 2, 3]
            # exactly as the kernel's trade takes them: a lane's row h (of gq, gq + 8) is
            # gate (gq >> 2) + 2 h, lanes 0-15 gates 0 and 2, lanes 16-31 gates 1 and 3
            for h in (0, 1):
                assert where[16 * w + gq + 8 * h] == (gq // 4 + 2 * h, 4 * w + gq % 4)
    plain = _plan(_seed())
    assert not plain.reg_gates and (tables.gate_rows(plain, plain.slices[0])
                                    == np.arange(64).reshape(4, 16)).all()


def test_a_grus_three_gates_take_an_lstms_slots_the_fourth_empty():
    """A GRU's rows with 'e': 64 a CTA (48 before), gate q of unit u where an LSTM's is,
    and the fourth gate's 16 rows (rows 12-15 of each warp's 16) hold nothing."""
    cfg = _seed(RNNMode.GRU)
    part, plain = _plan(cfg, reg_gates=True), _plan(cfg)
    assert {s.mpad for s in part.slices} == {64} and {s.mpad for s in plain.slices} == {48}
    rows = tables.gate_rows(part, part.slices[0])
    lstm = _plan(_seed(), reg_gates=True)
    assert (rows == tables.gate_rows(lstm, lstm.slices[0])[:3]).all()
    assert sorted(set(range(64)) - set(rows.ravel())) == [16 * w + 12 + i for w in range(4)
                                                         for i in range(4)]


def test_the_kernels_rows_are_the_tables_rows():
    """persistent.cu's gr_row (the gate math's rows) and its inverse (the per-row factors
    read before the first step) are tables.gate_rows (the blob's rows)."""
    part = _plan(_seed(), reg_gates=True)
    want = tables.gate_rows(part, part.slices[0])
    q, u = np.meshgrid(np.arange(4), np.arange(16), indexing="ij")
    row = eval(_kernel_expr(r"int gr_row\(int q, int u\) \{\s*return ([^;]+);"))
    assert (row == want).all()
    r = np.arange(64)
    q = eval(_kernel_expr(r"const int q = GR \? ([^:]+) :"))
    u = eval(_kernel_expr(r"const int u = GR \? ([^:]+) :"))
    assert (want[q, u] == r).all()


def test_the_staged_projection_is_read_on_32_banks():
    """A warp's reads of one gate's staged projection (its 4 units by 8 batch rows, as the
    gate math deals them: unit 4w + l//4 % 4, row 8j + 2 (l % 4) + l // 16) fall on 32
    banks at GX_AT's places, and those places hold each (row, unit) of a block once."""
    body = _kernel_expr(r"#define GX_AT\(b, u, p\) \(GR \? (.+) : \(p\)\)\n")
    at = lambda b, u: eval(body.replace("(b)", "b").replace("(u)", "u"))  # noqa: E731
    for w in range(4):
        for j in range(4):
            banks = {at(8 * j + 2 * (lane % 4) + lane // 16, 4 * w + lane // 4 % 4) % 32
                     for lane in range(32)}
            assert len(banks) == 32, (w, j)
    places = [at(b, u) for b in range(32) for u in range(16)]
    assert sorted(places) == list(range(32 * 16))


@pytest.mark.parametrize("mode", [RNNMode.LSTM, RNNMode.GRU])
@pytest.mark.parametrize("fmt", ["int8", "e4m3", None])
@pytest.mark.parametrize("layers,bi", [(1, False), (2, False), (2, True), (3, False)])
def test_the_model_of_the_kernel_on_its_rows_equals_the_twin(fmt, layers, bi, mode):
    """The numpy model reads the gates at tables.gate_rows from the blob tables.blob wrote:
    8 bits (A in registers) and FP16 (A from the blob in wgmma's canonical layout)."""
    cfg = _cfg(mode, layers, bi, H=32, B=32)
    got, want, part = _run_model(cfg, fmt, "both" if fmt else None, sms=48, batch_slices=2,
                                 wg=True, units=16, bulk=True, reg_gates=True)
    assert part.reg_gates and {s.nu for s in part.slices} == {16}
    assert {s.mpad for s in part.slices} == {64}  # a GRU's 48 rows in an LSTM's 64
    _close(got, want)


@pytest.mark.parametrize("fmt", ["int8", "fp16"])
def test_the_blob_moves_rows_only(fmt):
    """The same slice's rows with and without 'e': each (gate, unit) row's bytes alike."""
    from cudnn_rnn.lowbit.tables import blob, gate_rows, rows
    cfg = _seed()
    rng = np.random.default_rng(0)
    dtype = np.int8 if fmt == "int8" else np.float16
    codes = [rng.integers(-100, 100, (4 * 512, 512)).astype(dtype) for _ in range(2)]
    parts = [_plan(cfg, fmt, reg_gates=e) for e in (False, True)]
    blobs = [blob(p, codes, codes) for p in parts]
    for sa, sb in zip(parts[0].slices[::17], parts[1].slices[::17]):
        ra, rb = rows(parts[0], blobs[0], sa), rows(parts[1], blobs[1], sb)
        assert (ra[gate_rows(parts[0], sa)] == rb[gate_rows(parts[1], sb)]).all()


@pytest.mark.parametrize("spec,fmt,settings", [
    ("LSTM 20/2/512/64", "fp16", "b2t256u16wbe"), ("LSTM 20/2/512/64", "bf16", "b2t256u16wbe"),
    ("LSTM 20/2/512/64", "int8", "b2t256u16wbe"), ("LSTM 20/2/512/64", "e4m3", "b2t256u16wbe"),
    ("LSTM 50/1/1024/64", "int8", "b2t256u16wbe"),
    ("LSTM 50/1/1024/256", "int8", "b2t256u16wbe"),
    ("LSTM 50/1/1024/256", "fp16", "b2t256u16wbge"),
    ("LSTM 50/1/2048/128", "int8", "b1t256u16wbge"),
    ("GRU 20/2/512/64", "fp16", "b2t256u16wbe"), ("GRU 20/2/512/64", "int8", "b2t256u16wbe"),
    ("GRU 50/1/1024/256", "int8", "b2t256u16wbe"), ("GRU 50/1/1024/256", "fp16", "b2t256u16wbge"),
])
def test_the_kernel_compiles_at_the_issues_shapes_unspilled_and_unserialized(spec, fmt,
                                                                             settings):
    """And it trades sums between lanes (shfl.sync), where the kernel without 'e' of the same
    shape trades none."""
    _nvrtc_or_skip()
    cfg = _shape(spec)
    shape = Settings.parse(settings)
    part = _plan(cfg, fmt, shape.batch_slices, gx_global=shape.gx_global, reg_gates=True)
    consts = P.defines(cfg, part, gx_int=fmt == "int8")
    assert consts["GR"] == 1
    log = _ptxas_log(cfg, part, fmt)
    assert "0 bytes spill stores" in log and SERIALIZED not in log
    plain = P.defines(cfg, _plan(cfg, fmt, shape.batch_slices, gx_global=shape.gx_global),
                      gx_int=fmt == "int8")
    assert "GR" not in plain
    assert "shfl.sync" in _ptx(P.source(consts), "compute_90a")
    assert "shfl.sync" not in _ptx(P.source(plain), "compute_90a")


def test_the_tuner_skips_a_bulk_shape_once_its_e_twin_verified():
    """Of the tuner's list, each bulk shape comes after its 'e' twin (faster wherever both
    ran: launch.py's note) and is not tried once the twin verified and was timed; where the
    twin was refused (another cell) it is tried; a list the user names is tried whole."""
    names = [s.name for s in P.SETTINGS]
    bulk = [s for s in P.SETTINGS if s.bulk and not s.reg_gates]
    assert bulk
    for s in bulk:
        twin = dataclasses.replace(s, reg_gates=True)
        # after it, with only 'q' shapes or the twin's own twin without 'q' between them
        between = names[names.index(twin.name) + 1:names.index(s.name)]
        assert set(between) <= {n for n in between if Settings.parse(n).quantize} | {
            dataclasses.replace(twin, quantize=False).name}, (s.name, between)
        assert "('e', faster" in P.not_tried(s, [twin], P.SETTINGS)
        assert P.not_tried(s, [Settings.parse("b2t256u16")], P.SETTINGS) is None
        assert P.not_tried(s, [twin], (twin, s)) is None
    assert P.not_tried(Settings.parse("b2t256u16wb"), [], P.SETTINGS) is None
    # the twins themselves are tried first, and only the 'g' rule skips any of them (and, a
    # shape of two batch slices verified, the one of one slice: tests/test_persistent_slab.py)
    for s in P.SETTINGS:
        if s.reg_gates and not s.gx_global and s.batch_slices > 1:
            assert P.not_tried(s, [Settings.parse("b2t256u16wb")], P.SETTINGS) is None
    # ... and an 'e' shape's 'i' twin ('i': layer 0's input products in the kernel), first of
    # all: 'wbe' is not tried once 'wbei' was, nor 'wbi' and 'wb' (their 'e' twin's twin)
    ei = Settings.parse("b2t256u16wbei")
    assert names.index(ei.name) < names.index("b2t256u16wbe")
    assert "('i', faster" in P.not_tried(Settings.parse("b2t256u16wbe"), [ei], P.SETTINGS)
    for name in ("b2t256u16wbi", "b2t256u16wb"):
        assert "b2t256u16wbei verified" in P.not_tried(Settings.parse(name), [ei], P.SETTINGS)
    assert P.not_tried(ei, [Settings.parse("b2t256u16wbe")], P.SETTINGS) is None
    # an input wider than a layer above's: every CTA multiplies more slabs with 'i' (not
    # measured): its twins without 'i' are tried too ('wbi' is still 'wbei' less 'e')
    narrow, wide = (RNNConfig(hidden_size=512, input_size=i) for i in (512, 2048))
    for name in ("b2t256u16wbe", "b2t256u16wb"):
        assert P.not_tried(Settings.parse(name), [ei], P.SETTINGS, narrow)
        assert P.not_tried(Settings.parse(name), [ei], P.SETTINGS, wide) is None
    wbi = Settings.parse("b2t256u16wbi")
    assert "('e', faster" in P.not_tried(wbi, [ei], P.SETTINGS, wide)


@pytest.mark.parametrize("spec,one_slice_tried", [
    ("LSTM 50/1/512/16", True), ("GRU 25/1/1024/16", True), ("LSTM 20/2/512/64", False),
    ("LSTM 50/1/1024/256", False)])
def test_below_batch_32_the_one_slice_e_shape_is_tried(spec, one_slice_tried):
    """The tuner's walk of its list, each shape that plans counted as verified: where two
    batch slices would have fewer than the 16 rows 'e' takes (batch 16), no shape of two
    slices has 'e', so the one-slice 'e' shape is tried (before, the two-slice shapes
    without 'e' left it untried); where one of two slices with 'e' verifies, it is not."""
    from tests.test_persistent_inside import _plan as _named_plan
    cfg, verified, tried = _shape(spec), [], {}
    for s in P.SETTINGS:
        why = P.not_tried(s, verified, P.SETTINGS, cfg)
        if why:
            tried[s.name] = why
            continue
        try:
            _named_plan(cfg, s.name, "int8")
        except partition.DoesNotFit:
            continue
        verified.append(s)
    e2 = [s.name for s in verified if s.bulk and s.reg_gates and s.batch_slices == 2]
    assert bool(e2) != one_slice_tried
    assert (Settings.parse("b1t256u16wbes2") in verified) == one_slice_tried
    if not one_slice_tried:
        assert "bulk staging of two batch slices" in tried["b1t256u16wbes2"]
