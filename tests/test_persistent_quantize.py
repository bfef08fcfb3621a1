"""Layer 0's input codes written by the kernel itself (launch shapes with 'q' after 'i', the
kernel's XQ), on the CPU: the name, the refusals with their reasons, each CTA's share of a
batch slice's codes by the kernel's own text (every code once, where the kernel's reads find
it), the layer records that hand the kernel x, and the kernels compiled without spills. On
a GPU: tests/test_gpu_persistent_quantize.py."""
import re
from types import SimpleNamespace

import numpy as np
import pytest

from cudnn_rnn.bindings.enums import RNNMode
from cudnn_rnn.lowbit import fits, partition, tables
from cudnn_rnn.lowbit import persistent as P
from cudnn_rnn.lowbit.launch import Settings
from cudnn_rnn.lowbit.ptxas import ptxas_info

from tests.test_persistent import SMEM, _cfg, _nvrtc_or_skip
from tests.test_persistent_inside import _code_at, _plan
from tests.test_persistent_wg import _shape


def test_the_launch_shape_names_a_q_after_the_i():
    for name in ("b2t256u16wbeiq", "b2t256u8wbiq", "b2t256u16wbeiqs2", "b2t256u16wbeiqxs2"):
        s = Settings.parse(name)
        assert s.name == name and s.quantize and s.partition_args()["quantize"]
    assert "quantize" not in Settings.parse("b2t256u16wbeis2").partition_args()
    with pytest.raises(ValueError, match="no launch shape"):
        Settings.parse("b2t256u16wbeqi")
    with pytest.raises(ValueError, match="name 'i' first"):
        Settings.parse("b2t256u16wbeq")


def test_two_directions_a_share_too_large_and_no_input_products_are_refused():
    bi = _cfg(RNNMode.LSTM, 1, True, H=64, B=32, T=9, I=48)
    with pytest.raises(partition.DoesNotFit, match="take one direction"):
        _plan(bi, "b2t256u16wbeiq")
    wide = _cfg(RNNMode.LSTM, 1, H=64, B=64, T=9, I=256)
    # 32 rows of 64 units over 4 CTAs of 192 workers; one slice of 64 rows: 6 units a worker
    assert _plan(wide, "b2t256u16wbeiq").xq == 3
    with pytest.raises(partition.DoesNotFit, match=f"at most {fits.XQ_UNITS}"):
        _plan(wide, "b1t256u16wbeiq")
    seed = _shape("LSTM 20/2/512/64")
    with pytest.raises(partition.DoesNotFit, match="'wbiq'"):
        partition.plan(seed, "int8", "int8", sm_count=132, smem_per_block=SMEM, batch_slices=2,
                       units=16, wg=True, bulk=True, quantize=True)


def test_the_tuner_tries_each_q_shape_before_its_twin_and_not_the_twin_once_it_verified():
    """The tuner's list (launch.py's note: 'q' faster wherever both ran): 'wbeiqs2',
    'wbeiq' and 'wbiq' each just before its twin without 'q', not tried once the 'q' twin
    verified (where 'q' is refused, two directions or a share too large, the twin is
    tried); nor where the input is wider than a layer above's, nor in a list the user
    names. A 'q' shape verified stands for its twin in the other rules."""
    names = [s.name for s in P.SETTINGS]
    pairs = [("wbeiqs2", "wbeis2"), ("wbeiq", "wbei"), ("wbiq", "wbi")]
    for q, twin in pairs:
        q, twin = (Settings.parse(f"b2t256u16{n}") for n in (q, twin))
        assert names.index(q.name) + 1 == names.index(twin.name)
        why = P.not_tried(twin, [q], P.SETTINGS)
        assert f"{q.name} verified" in why and "('q'" in why
        for verified in ([], [twin], [Settings.parse("b2t256u16wbei" + "qs2" * (q.slab == 0))]):
            assert P.not_tried(twin, verified, P.SETTINGS) is None
            assert P.not_tried(q, verified, P.SETTINGS) is None
        assert P.not_tried(twin, [q], P.SETTINGS, _cfg(RNNMode.LSTM, 1, H=512, I=2048)) is None
        assert P.not_tried(twin, [q], (q, twin)) is None
    assert sum(s.quantize for s in P.SETTINGS) == len(pairs)
    wbeiq, wbeiqs2 = Settings.parse("b2t256u16wbeiq"), Settings.parse("b2t256u16wbeiqs2")
    assert "wbeiq verified, layer 0's input products in the kernel ('i'" in P.not_tried(
        Settings.parse("b2t256u16wbe"), [wbeiq], P.SETTINGS)
    assert "wbeiqs2 verified" in P.not_tried(Settings.parse("b2t256u16wbes2"), [wbeiqs2],
                                             P.SETTINGS)
    assert "wbeiq verified, its gate math" in P.not_tried(Settings.parse("b2t256u16wbi"),
                                                          [wbeiq], P.SETTINGS)


def test_each_steps_codes_are_loaded_past_its_wait_and_stored_past_its_signal():
    """XQ's place in the kernel's text, which its ordering rests on: slots 0-2 stored before
    the first signal (hx's slot); in the step loop x loaded once, three steps ahead, past the
    wait's acquire and its marks (before it, the loads were in flight where the wait's
    thread polled), and the codes stored past the step's release, inside the step (before
    it, the release waited for them: docs/lowbit.md), so that the next step's signal
    releases them before the wait of s + 2 that the readers of step s + 3 follow."""
    src = P.SOURCE.read_text()
    step = src.index("    for (int s = 0; s < T; ++s) {")
    assert src.index("x_store(t, v[t])") < src.index("red_release(mine, 1u)") < step
    loop = src[step:src.index("\n    }\n", step)]
    assert loop.count("x_load(") == loop.count("x_store(") == 1
    load, store = loop.index("x_load(s + 3, xv)"), loop.index("x_store(s + 3, xv)")
    assert loop.index("ld_acquire(counters") < loop.index("MARK(6);") < load
    assert loop.index("red_release(mine, 1u)") < loop.index("MARK(9);") < store


def _share():
    """persistent.cu's XQ share by its own text, C's division as Python's //: a function of
    (the slice's nb, j0, nu, H, xqi, tid, k) giving unit u's (u, b, f) or None past the
    share, the x index its value e reads (None past the row) and the byte its codes start."""
    src = P.SOURCE.read_text()

    def grab(pattern, what):
        m = re.search(pattern, src)
        assert m, what
        text = m.group(1)
        for cast in ("(int)", "(long long)", "(size_t)"):
            text = text.replace(cast, "")
        # C's `a ? b : c` (one, unnested) as Python's
        text = re.sub(r"^(.+?) \? (.+?) : (.+)$", r"(\2) if (\1) else (\3)", text, flags=re.S)
        return compile(text.replace("L.", "").replace("/", "//").replace(">> 2", "// 4"),
                       what, "eval")
    per = grab(r"const int xq_per = ([^;]+);", "xq_per")
    n = grab(r"const long long xq_n = L\.xqi \? ([^:]+) : 0;", "xq_n")  # (L.xqi set)
    a = grab(r"const int xq_a = ([^,]+),", "xq_a")
    e = grab(r"xq_e = ([^;]+);\n", "xq_e")
    w = grab(r"const int xq_w = ([^;]+);", "xq_w")
    workers = grab(r"#define XQW (\([^)]+\))", "XQW")
    u = grab(r"const int u = (xq_w[^;]+);", "u")
    b = grab(r"\bb = (u / xq_per);", "b")
    f = grab(r"\bf = (\(u - b \* xq_per\) \* 4);", "f")
    row = grab(r"const float\* row = xq \+ ([^;]+);", "row")
    bound = grab(r"if \((f \+ e < L\.xqi)\) v\[k\]\[e\]", "the read's bound")
    # the load's and the store's units, rows and values are x_unit's; the codes at
    # code_at's bytes
    assert re.search(r"if \(u >= xq_e\) return false;", src), "the share's end"
    load, store = (re.search(r"auto %s = \[&\].*?\n    \};" % n, src, re.S)[0]
                   for n in ("x_load", "x_store"))
    for body in (load, store):
        assert "if (!x_unit(k, b, f)) continue;" in body and "u " not in body
    assert "+ code_at(t, S.bs, b, f * BPE(FX), xrowb);" in store, "the store"
    ev = lambda x, v: eval(x, {"min": min}, v)  # noqa: E731,S307 (the kernel's text)

    def unit(**v):
        v["xq_per"] = ev(per, v)
        v["xq_n"] = ev(n, v)
        v["xq_a"], v["xq_e"] = ev(a, v), ev(e, v)
        v["XQW"] = ev(workers, v)
        v["xq_w"] = ev(w, v)
        v["u"] = ev(u, v)
        if v["u"] >= v["xq_e"]:
            return None
        v["b"] = ev(b, v)
        v["f"] = ev(f, v)
        reads = [ev(row, v) + k for k in range(4) if ev(bound, dict(v, e=k))]
        return v["u"], v["b"], v["f"], reads
    return unit


@pytest.mark.parametrize("spec,name,fmt,input_size", [
    ("LSTM 3/1/1024/256", "b2t256u16wbeiqs2", "int8", None),
    ("LSTM 3/2/512/64", "b2t256u16wbeiq", "int8", None),
    ("GRU 4/1/200/39", "b2t256u16wbiq", "e4m3", 50),
    ("LSTM 5/1/64/63", "b2t256u16wbeiq", "fp16", 52),
    ("RNN_TANH 3/1/136/5", "b2t256u16wbiq", "bf16", 17),
    ("LSTM 2/1/64/63", "b2t256u16wbeiq", "int8", 50),
    ("LSTM 2/1/64/64", "b1t256u16wbeiq", "e4m3", 48)])
def test_each_ctas_share_writes_every_code_of_its_slice_once(spec, name, fmt, input_size):
    """Every (batch row, 4 values) unit of layer 0's input stored by exactly one thread of
    one CTA of its batch slice, within the XQ units a thread the plan gives it, at the bytes
    code_at gives the values' codes (where the kernel's bulk copies read them, as the
    quantizer before the launch puts them), read from x's row of that batch row (nothing past
    the row's end); the slices of the layers above write none."""
    cfg = _shape(spec)
    if input_size:
        cfg = _cfg(cfg.mode, cfg.num_layers, H=cfg.hidden_size, B=cfg.mini_batch,
                   T=cfg.seq_length, I=input_size)
    part = _plan(cfg, name, fmt)
    unit, code_at = _share(), _code_at()
    T, B, I, H = cfg.seq_length, cfg.mini_batch, cfg.input_size, cfg.hidden_size
    bpe = partition.FORMAT_BYTES[fmt]
    per_row = -(-I // 4)
    seen = {}
    for s in part.slices:
        if s.k:  # (the kernel: xq_n is 0 where the layer's record has no x)
            continue
        for tid in range(part.threads):
            for k in range(part.xq):
                got = unit(nb=s.nb, j0=s.j0, nu=s.nu, H=H, xqi=I, tid=tid, k=k,
                           THREADS=part.threads, t=T - 1, B=B, b0=s.b0)
                if got is None:
                    continue
                u, b, f, reads = got
                key = (s.b0 + b, f)
                assert key not in seen and b < s.nb and f < I
                seen[key] = s.j0
                assert reads == [((T - 1) * B + s.b0 + b) * I + f + e
                                 for e in range(min(4, I - f))]
                byte = code_at(t=T - 1, bs=s.bs, b=b, byte=f * bpe, rowb=part.xrowb,
                               WGS=part.batch_slices, WGN=s.npad)
                assert byte % (4 * bpe) == 0  # one aligned store within a 16-byte piece
                assert byte // 16 == code_at(t=T - 1, bs=s.bs, b=b, byte=(f + 3) * bpe,
                                             rowb=part.xrowb, WGS=part.batch_slices,
                                             WGN=s.npad) // 16
    assert set(seen) == {(r, 4 * c) for r in range(B) for c in range(per_row)}
    assert 1 <= part.xq <= fits.XQ_UNITS


def test_the_layer_records_hand_layer_0_its_input_size_and_scale():
    """With 'q' layer 0's record holds its input's size and scale (x itself is a launch
    argument: the engine's own buffer or the one bound); the layers above, and every layer
    without 'q', none (their CTAs then quantize nothing)."""
    cfg = _cfg(RNNMode.LSTM, 2, H=64, B=32, T=9, I=48)
    arr = lambda p: SimpleNamespace(data=SimpleNamespace(ptr=p))  # noqa: E731 (a device array)
    vectors = [{n: arr(16) for n in ("dqx", "dqh", "bW", "bR")}] * 2
    ops = [SimpleNamespace(input=SimpleNamespace(act_scale=0.5 + i),
                           recurrent=SimpleNamespace(act_scale=2.0)) for i in range(2)]
    for name, xq in (("b2t256u16wbeiq", True), ("b2t256u16wbei", False)):
        part = _plan(cfg, name)
        rows = tables.layers(part, vectors, ops, [arr(32)] * 2, {0: arr(48), 1: arr(64)}, [])
        assert rows["xqi"].tolist() == ([cfg.input_size, 0] if xq else [0, 0])
        assert rows["xqscale"].tolist() == ([0.5, 0.0] if xq else [0.0, 0.0])
        assert rows["xin"].tolist() == [48, 64] and rows["xout0"].tolist() == [64, 0]


@pytest.mark.parametrize("spec,name,fmt", [
    ("LSTM 50/1/1024/256", "b2t256u16wbeiqs2", "int8"), ("GRU 50/1/1024/256", "b2t256u16wbeiqs2",
                                                         "int8"),
    ("LSTM 50/1/1024/256", "b2t256u16wbeiqxs2", "int8"), ("LSTM 20/2/512/64", "b2t256u16wbeiq",
                                                          "fp16"),
    ("GRU 20/2/512/64", "b2t256u16wbeiq", "e4m3"), ("RNN_TANH 20/1/512/64", "b2t256u16wbiq",
                                                    "bf16")])
def test_the_kernels_that_write_their_input_codes_compile_without_spills(spec, name, fmt):
    _nvrtc_or_skip()
    cfg = _shape(spec)
    consts = P.defines(cfg, _plan(cfg, name, fmt), gx_int=False)
    assert consts["XQ"] >= 1
    assert "XQ" not in P.defines(cfg, _plan(cfg, name.replace("q", ""), fmt), gx_int=False)
    info = ptxas_info(consts, "sm_90a")
    assert info["spill_stores"] == 0 and info["registers"] <= 255, info


@pytest.mark.parametrize("variant", ["xq_before_wait", "xq_all_threads", "xq_before_signal",
                                     "xq_before_signal+xq_before_wait", "xq_after_products"])
def test_the_probe_tools_q_variants_still_apply_and_compile_without_spills(variant,
                                                                         monkeypatch):
    """tools/persistent_probe.py --variants of 'q' (docs/lowbit.md measures them): each
    still finds the kernel's text, changes it, and compiles without spills."""
    _nvrtc_or_skip()
    from cudnn_rnn.lowbit import ptxas
    from tests.test_persistent import _probe_tool
    cfg = _shape("LSTM 50/1/1024/256")
    consts = P.defines(cfg, _plan(cfg, "b2t256u16wbeiqs2"), gx_int=False)
    text = _probe_tool().varied(variant)(consts)
    assert text != P.source(consts)
    monkeypatch.setattr(ptxas, "source", lambda c, text=text: text)
    assert ptxas.ptxas_info(consts, "sm_90a")["spill_stores"] == 0


def test_the_input_part_waits_for_its_groups_first_signal_only_where_the_kernel_quantizes():
    """persistent.cu's choice of counters each warpgroup polls (XE), by its own text: the
    input part's warpgroup of layer 0 (its codes written before the launch) polls none of
    its group's; with XQ, at step 0 it polls its group's counter too (the first signal
    follows the CTAs' slots 0-2 of the codes, which step 0 copies, and 'x' step 1's at its
    end), and past step 0 the recurrent part's wait and the CTA's barriers order the rest."""
    m = re.search(r"ctrs\[i\] = (XE && kx && [^?]+)\?\s*-1", P.SOURCE.read_text())
    assert m, "the XE wait's choice"
    text = " ".join(m.group(1).split()).replace("&&", " and ").replace("!(", "not (")
    skip = compile(text, "ctrs", "eval")
    for xq in (0, 1):
        for s in range(4):
            for kg, i in ((0, 0), (1, 0), (0, 1), (1, 1)):  # kg 0: the input part's
                v = dict(XE=1, XQ=xq, kx=1, kg=kg, i=i, s=s)
                polls = not eval(skip, {}, v)  # noqa: S307 (the kernel's text)
                own = i == 0
                if kg == 1:  # the recurrent part: its own group, not the layer below
                    assert polls == own
                else:  # the input part: the layer below; its group only at XQ's step 0
                    assert polls == (not own or bool(xq and s == 0)), v
