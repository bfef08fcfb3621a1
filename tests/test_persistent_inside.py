"""Layer 0's input products in the kernel (launch shapes with 'i' after 'wb'): no input GEMM
and no projection; layer 0 multiplies its input codes (written before the launch in the
layout bulk staging reads) as a layer above multiplies the layer below's. Without a GPU: the
name and its refusals, the partition (layer 0's input part of K, the row of every layer
input's codes, no projection staged), the numpy model on it against the twin, and the
kernels compiled for sm_90a at the issue's shapes without spills or serialized wgmma."""
import pytest

from cudnn_rnn.bindings.enums import RNNMode
from cudnn_rnn.lowbit import partition
from cudnn_rnn.lowbit import persistent as P
from cudnn_rnn.lowbit.launch import Settings
from cudnn_rnn.lowbit.partition import CHUNK, row_bytes
from cudnn_rnn.lowbit.ptxas import ptxas_info

from tests.test_persistent import CELLS, SMEM, _cfg, _close, _nvrtc_or_skip, _run_model
from tests.test_persistent_wg import SERIALIZED, _ptxas_log, _seed, _shape


def _plan(cfg, name, fmt="int8"):
    s = Settings.parse(name)
    fx = fmt if cfg.num_layers > 1 or s.input_inside else None
    return partition.plan(cfg, fx, fmt, sm_count=132, smem_per_block=SMEM - P.STATIC_SMEM,
                          **s.partition_args())


def test_the_launch_shape_names_it_with_an_i_after_the_gates():
    for name in ("b2t256u16wbei", "b2t256u8wbi", "b2t256u16wbeim2", "b4t256u16wbeio2"):
        s = Settings.parse(name)
        assert s.name == name and s.input_inside and s.partition_args()["input_inside"]
    assert not Settings.parse("b2t256u16wbe").input_inside
    with pytest.raises(ValueError, match="no launch shape"):
        Settings.parse("b2t256u16wbie")  # 'i' after 'e'
    with pytest.raises(ValueError, match="name 'wb' first"):
        Settings(batch_slices=2, units=16, wg=True, input_inside=True)
    with pytest.raises(ValueError, match="no projection to read"):
        Settings.parse("b2t256u16wbgi")
    with pytest.raises(partition.DoesNotFit, match="bulk staging's: 'wbi'"):
        partition.plan(_seed(), "int8", "int8", sm_count=132, smem_per_block=SMEM,
                       batch_slices=2, units=16, wg=True, input_inside=True)


@pytest.mark.parametrize("layers", [1, 2])
def test_layer_0_takes_an_input_part_of_k_and_stages_no_projection(layers):
    """Input size 48 against 2 x 64 units above: layer 0's input part is its own row bytes,
    the layers above keep theirs, every layer input's codes take the longest row."""
    cfg = _cfg(RNNMode.LSTM, layers, True, H=64, B=32, I=48)
    inside, outside = _plan(cfg, "b2t256u16wbei"), _plan(cfg, "b2t256u16wbe")
    assert inside.input_inside and inside.fx == "int8"
    assert inside.xrowb == max(row_bytes(48, "int8"), row_bytes(128, "int8") * (layers > 1))
    for a, b in zip(inside.slices, outside.slices):
        if a.k < 2:  # layer 0, both directions: its input part, one warpgroup on it
            assert (a.nxc, b.nxc) == (row_bytes(48, "int8") // CHUNK, 0)
            assert a.kx == 1 and a.nc == b.nc + a.nxc
            assert a.off_ring - a.off_gx < b.off_ring - b.off_gx  # no projection staged
        else:
            assert (a.nxc, a.nc) == (b.nxc, b.nc)
    consts = P.defines(cfg, inside, gx_int=True)  # an INT8 input GEMM's, were there one
    assert consts["HASX"] == 1 and consts["XE"] == 1 and consts["GXINT"] == 0
    assert P.defines(cfg, outside, gx_int=True)["GXINT"] == 1


def test_layer_0_fits_at_the_issues_shape_without_the_projection():
    """LSTM 50/1/1024/256 in 8 bits: 2 x 1024 bytes a row, 128 KB of rows a CTA, A from
    shared memory (the input part's fragments would take 128 registers), a ring of two."""
    part = _plan(_shape("LSTM 50/1/1024/256"), "b2t256u16wbei")
    s = part.slices[0]
    assert (s.nxc, s.nc, part.grid) == (32, 64, 128)
    assert part.wg_shared and part.stages >= 2 and part.smem <= SMEM - P.STATIC_SMEM
    with pytest.raises(partition.DoesNotFit, match="263168 of weights"):
        _plan(_shape("LSTM 50/1/1024/256"), "b2t256u16wbei", "fp16")


@pytest.mark.parametrize("fmt", ["int8", "e4m3", None])
@pytest.mark.parametrize("mode", CELLS)
@pytest.mark.parametrize("layers,bi", [(1, False), (2, False), (1, True), (2, True)])
def test_the_model_of_the_kernel_with_layer_0_inside_equals_the_twin(fmt, mode, layers, bi):
    """The numpy model multiplies layer 0's input codes from its slots (x quantized by the
    host rules) where the kernel does: the twin's function, input size unlike H."""
    cfg = _cfg(mode, layers, bi, H=40, B=16, I=24)
    got, want, part = _run_model(cfg, fmt, "both" if fmt else None, sms=48, batch_slices=2,
                                 wg=True, units=8, bulk=True, input_inside=True)
    assert all(s.nxc for s in part.slices) and part.input_inside
    _close(got, want)


@pytest.mark.parametrize("fmt", ["int8", None])
@pytest.mark.parametrize("mode", [RNNMode.LSTM, RNNMode.GRU])
def test_an_input_wider_than_a_layer_above_sets_the_row_of_every_layer_input(fmt, mode):
    """Input size 200 against 40 units: layer 0's input row is every layer input's row
    (xrowb), the layer above reads its own 40 codes of it."""
    cfg = _cfg(mode, 2, False, H=40, B=16, I=200)
    got, want, part = _run_model(cfg, fmt, "both" if fmt else None, sms=48, batch_slices=2,
                                 wg=True, units=8, bulk=True, input_inside=True)
    wide = row_bytes(200, part.fx)
    assert part.xrowb == wide > row_bytes(40, part.fx)
    assert {s.nxc for s in part.slices if s.k == 0} == {wide // CHUNK}
    assert {s.nxc for s in part.slices if s.k == 1} == {row_bytes(40, part.fx) // CHUNK}
    _close(got, want)


def test_no_projection_no_refusal_for_its_offsets():
    """4.2 M rows of 4 x 64 float32 projections pass the kernel's 32-bit offsets; with 'i'
    there is no projection, and the states' buffers fit."""
    cfg = _cfg(RNNMode.LSTM, 1, False, H=64, B=128, T=32768, I=64)
    with pytest.raises(partition.DoesNotFit, match="input projection's values"):
        _plan(cfg, "b2t256u16wbe")
    assert _plan(cfg, "b2t256u16wbei").input_inside
    with pytest.raises(partition.DoesNotFit, match="need the input's format"):
        partition.plan(cfg, None, "int8", sm_count=132, smem_per_block=SMEM,
                       **Settings.parse("b2t256u16wbei").partition_args())


@pytest.mark.parametrize("fmt", ["int8", None])
@pytest.mark.parametrize("mode", [RNNMode.LSTM, RNNMode.GRU])
def test_the_model_with_the_gate_math_in_registers_equals_the_twin(fmt, mode):
    cfg = _cfg(mode, 2, True, H=32, B=32, I=32)
    got, want, part = _run_model(cfg, fmt, "both" if fmt else None, sms=48, batch_slices=2,
                                 wg=True, units=16, bulk=True, reg_gates=True,
                                 input_inside=True)
    assert part.reg_gates and part.input_inside
    _close(got, want)


@pytest.mark.parametrize("spec,name,fmt", [
    ("LSTM 20/2/512/64", "b2t256u16wbei", "int8"), ("GRU 20/2/512/64", "b2t256u16wbei", "int8"),
    ("LSTM 20/2/512/64", "b2t256u16wbei", "fp16"), ("LSTM 50/1/1024/256", "b2t256u16wbei", "int8"),
    ("GRU 50/1/1024/256", "b2t256u16wbei", "int8"), ("LSTM 50/1/1024/64", "b2t256u16wbei", "int8"),
])
def test_the_kernels_compile_without_spills_or_serialized_wgmma(spec, name, fmt):
    compiles_clean(spec, name, fmt)


def compiles_clean(spec, name, fmt):
    """The kernel of launch shape ``name`` at ``spec`` in ``fmt`` compiles for sm_90a without
    spills or serialized wgmma (the projection, where there is one, in INT32 for INT8, as
    the engine stages it; with layer 0's input inside there is none)."""
    _nvrtc_or_skip()
    cfg = _shape(spec)
    part = _plan(cfg, name, fmt)
    info = ptxas_info(P.defines(cfg, part, gx_int=fmt == "int8"), "sm_90a")
    assert info["spill_stores"] == info["spill_loads"] == 0, info
    assert SERIALIZED not in _ptxas_log(cfg, part, fmt)


@pytest.mark.parametrize("item,needle", [
    ("LSTM:20:2@persistent:int8/both@b2t256u16wbei", "is not CELL:T:L:H:B"),
    ("LSTM:20:2:512:64@persistent:int9/both@b2t256u16wbei", "no engine configuration"),
    ("LSTM:20:2:512:64@persistent:int8/both", "is not one item"),
    ("LSTM:20:2:512:64@persistent:int8/both@b2t256u16wbie", "no launch shape"),
])
def test_the_split_tool_refuses_bad_input_in_one_line_and_writes_nothing(tmp_path, item,
                                                                         needle):
    """tools/forward_split.py (the time split of a forward's launches)."""
    import subprocess
    import sys
    from pathlib import Path
    from tests.test_cli import assert_one_line_exit_2
    root = Path(__file__).resolve().parent.parent
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(root / "tools" / "forward_split.py"),
                           "--out", str(out), item], capture_output=True, text=True,
                          timeout=120, cwd=root)
    assert_one_line_exit_2(proc, needle)
    assert "CELL:T:L:H:B@CONFIG@LAUNCH_SHAPE" in proc.stderr
    assert not out.exists()


def _laid_out_element(itemsize: int):
    """The quantizer's own text (kernels._laid_out and wgmma_quantizer's launch), C's
    division as Python's //: (the elements it launches, as a function of its arguments;
    element i's writes and reads: None where its guard skips it, else its ``t``, ``bs``,
    ``b``, ``col``, the code index it stores at and the x indices it reads (beyond ``I``,
    a zero code)), for codes of ``itemsize`` bytes."""
    import inspect
    import re
    from cudnn_rnn.lowbit import kernels
    body = inspect.getsource(kernels._laid_out)
    launch = inspect.getsource(kernels.wgmma_quantizer)

    def c(text, what):
        text = text.replace("(long long)sizeof({ctype})", str(itemsize))
        text = text.replace("(int)sizeof({ctype})", str(itemsize)).replace("&&", " and ")
        return compile("(" + text.replace("/", "//") + ")", what, "eval")

    def grab(pattern, what, text=body):
        m = re.search(pattern, text)
        assert m, what
        return c(m.group(1), what)
    names = ("b", "r", "col", "slot", "bs", "t", "bg")
    exprs = [(n, grab(rf"\b{n} = ([^,;]+)[,;]", n)) for n in names]
    guard = grab(r"if \((b < [^)]*)\) \{", "the guard")
    per, f0 = grab(r"const int per = ([^;]+);", "per"), grab(r"f0 = ([^;]+);", "f0")
    row = grab(r"const float\* row = &x\[([^\]]+)\];", "the row")
    read = grab(r"in\[e\] = (f0 \+ e < I) \?", "the read's bound")
    store = grab(r"&q\[(.+?)\]\) =", "the store")
    size = grab(r"size=([^)]+)\)", "the launch size", launch)
    ev = lambda e, v: eval(e, {}, v)  # noqa: E731,S307 (the kernel's text)

    def element(**v):
        for n, e in exprs:  # in the kernel's order, each from those before it
            v[n] = ev(e, v)
        if not ev(guard, v):
            return None
        v["per"] = ev(per, v)
        v["f0"], v["row"] = ev(f0, v), ev(row, v)
        reads = [v["row"] + v["f0"] + e for e in range(v["per"]) if ev(read, dict(v, e=e))]
        return dict(t=v["t"], bs=v["bs"], b=v["b"], col=v["col"], at=ev(store, v), reads=reads)
    return (lambda **v: ev(size, v)), element


def _code_at():
    """persistent.cu's code_at: where code byte ``byte`` of row ``b`` of batch slice ``bs``
    of slot ``t`` lies (rows of ``rowb`` bytes, WGS slices of WGN rows)."""
    import re
    m = re.search(r"unsigned code_at\([^)]*\) \{\s*return ([^;]+);", P.SOURCE.read_text())
    assert m, "code_at"
    expr = compile("(" + m.group(1).replace("(unsigned)", "") + ")", "code_at", "eval")
    return lambda **v: eval(expr, {}, v)  # noqa: S307 (the kernel's text)


@pytest.mark.parametrize("spec,name,fmt", [
    ("LSTM 2/1/1024/256", "b2t256u16wbeis2", "int8"), ("LSTM 3/2/512/64", "b2t256u16wbei", "int8"),
    ("GRU 7/1/200/39", "b2t256u16wbi", "int8"), ("LSTM 5/1/72/16", "b2t256u16wbi", "fp16"),
    ("RNN_TANH 3/1/136/5", "b2t256u16wbi", "e4m3"),
    ("RNN_TANH 6/1/136/20", "b1t256u16wbi", "bf16")])
def test_the_input_quantizer_stores_each_code_once_where_the_kernel_reads_it(spec, name, fmt):
    """kernels.wgmma_quantizer, by its own text: element i stores its 16 bytes at byte 16 i of
    the codes (one run of memory a warp), which is where persistent.cu's code_at puts
    column ``col`` of row ``b`` of slice ``bs`` of step ``t``, and reads that column's values
    of the batch row the partition puts there (slice ``bs`` from its row ``b0``), a zero
    code past the row's end; every (step, batch row, column) is stored by exactly one
    element, the padded rows and a short last slice's missing rows by none."""
    from cudnn_rnn.lowbit.kernels import FORMATS
    import numpy as np
    cfg = _shape(spec)
    part = _plan(cfg, name, fmt)
    s0 = part.slices[0]
    T, B, I, rowb = cfg.seq_length, cfg.mini_batch, cfg.input_size, part.xrowb
    nbf, WGN, WGS, ncol = s0.nb, s0.npad, part.batch_slices, rowb // 16
    itemsize = np.dtype(FORMATS[fmt][0]).itemsize
    per = 16 // itemsize
    first_row = {sl.bs: sl.b0 for sl in part.slices if sl.k == 0}
    size, element = _laid_out_element(itemsize)
    code_at = _code_at()
    seen = set()
    for i in range(size(steps=T, slices=WGS, ncol=ncol, width=WGN)):
        v = element(i=i, WGN=WGN, ncol=ncol, WGS=WGS, nbf=nbf, B=B, I=I)
        if v is None:
            continue
        t, bs, b, col = v["t"], v["bs"], v["b"], v["col"]
        batch_row = first_row[bs] + b
        key = (t, batch_row, col)
        assert key not in seen and batch_row < B
        seen.add(key)
        assert v["at"] * itemsize == 16 * i == code_at(t=t, bs=bs, b=b, byte=16 * col,
                                                       rowb=rowb, WGS=WGS, WGN=WGN)
        base = (t * B + batch_row) * I
        assert v["reads"] == [base + f for f in range(col * per, min((col + 1) * per, I))]
    assert seen == {(t, b, c) for t in range(T) for b in range(B) for c in range(ncol)}
