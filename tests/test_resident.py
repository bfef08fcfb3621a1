"""The resident kernel without a GPU: its weight fragments against mma.sync's operand layouts
as the PTX ISA documents them (element by element, per format), every recurrent row held by
exactly one warp with an LSTM's and GRU's gates laid out for the lane trade, its refusals
with their reasons, its launch shape's name, and its source compiled by NVRTC for sm_90
without spilling at the shapes it is for."""
import re

import numpy as np
import pytest

from cudnn_rnn.bindings.enums import DirectionMode, RNNMode
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.lowbit import resident as R
from cudnn_rnn.lowbit.engine import Unsupported
from cudnn_rnn.lowbit.launch import SETTINGS, Settings

DTYPE = {"int8": np.int8, "e4m3": np.uint8, "fp16": np.float16, "bf16": np.uint16}


def _cfg(mode, hidden=512, batch=16, layers=1, direction=DirectionMode.UNIDIRECTIONAL):
    return RNNConfig(seq_length=7, num_layers=layers, hidden_size=hidden, mini_batch=batch,
                     input_size=hidden, mode=mode, direction=direction)


def _codes(cfg, fmt, seed):
    """Codes whose every element names its own row and column (random bits besides)."""
    rng = np.random.default_rng(seed)
    n = cfg.gates * cfg.hidden_size
    if DTYPE[fmt] == np.float16:
        return rng.standard_normal((n, cfg.hidden_size)).astype(np.float16)
    info = np.iinfo(DTYPE[fmt])
    return rng.integers(info.min, info.max, (n, cfg.hidden_size), endpoint=True).astype(DTYPE[fmt])


def _element(fmt, lane, reg, e):
    """(row, column) of element e of A register ``reg`` of ``lane``: the PTX ISA's figures
    for mma.m16n8k32 (.s8, .e4m3: four 8-bit elements a register) and mma.m16n8k16 (.f16,
    .bf16: two 16-bit elements a register)."""
    group, tid = lane >> 2, lane & 3
    row = group + 8 * (reg & 1)  # a0, a2: groupID; a1, a3: groupID + 8
    if fmt in ("int8", "e4m3"):
        return row, tid * 4 + e + 16 * (reg >> 1)
    return row, tid * 2 + e + 8 * (reg >> 1)


@pytest.mark.parametrize("fmt", list(DTYPE))
@pytest.mark.parametrize("mode,direction", [
    (RNNMode.LSTM, DirectionMode.UNIDIRECTIONAL), (RNNMode.GRU, DirectionMode.BIDIRECTIONAL),
    (RNNMode.RNN_TANH, DirectionMode.UNIDIRECTIONAL)], ids=lambda v: v.name)
def test_each_lanes_fragments_hold_the_elements_mma_sync_reads_there(fmt, mode, direction):
    hidden = 256 if fmt in ("int8", "e4m3") else 128
    cfg = _cfg(mode, hidden=hidden, direction=direction)
    sh = R.shape(cfg, fmt, 256)
    codes = [_codes(cfg, fmt, seed) for seed in range(cfg.dirs)]
    frags = R.fragments(cfg, sh, codes).view(DTYPE[fmt])
    per = 4 // np.dtype(DTYPE[fmt]).itemsize  # elements a register
    k_chunk = 32 // np.dtype(DTYPE[fmt]).itemsize
    frags = frags.reshape(cfg.dirs, sh.cluster, sh.warps, sh.chunks, 32, 4, per)
    for d in range(cfg.dirs):
        for rank in (0, sh.cluster - 1):
            for warp in (0, sh.warps - 1):
                rows = R.warp_rows(cfg, sh, rank, warp)
                for k in (0, sh.chunks - 1):
                    for lane in range(32):
                        for reg in range(4):
                            for e in range(per):
                                r, c = _element(fmt, lane, reg, e)
                                want = (codes[d][rows[r], k * k_chunk + c] if rows[r] >= 0
                                        else 0)
                                got = frags[d, rank, warp, k, lane, reg, e]
                                assert got.tobytes() == np.asarray(want, DTYPE[fmt]).tobytes()


@pytest.mark.parametrize("mode", list(RNNMode), ids=lambda c: c.name)
def test_every_row_lies_in_one_warp_and_a_lanes_two_rows_are_one_unit(mode):
    cfg = _cfg(mode)
    sh = R.shape(cfg, "int8", 256)
    held = np.concatenate([R.warp_rows(cfg, sh, r, w) for r in range(sh.cluster)
                           for w in range(sh.warps)])
    real = held[held >= 0]
    assert sorted(real) == list(range(cfg.gates * cfg.hidden_size))  # each row once
    assert (held < 0).sum() == (cfg.hidden_size if mode == RNNMode.GRU else 0)  # gate 3
    if cfg.gates == 1:
        return
    H = cfg.hidden_size
    rows = R.warp_rows(cfg, sh, 3, 5)
    for g in range(8):  # lane group g holds rows g and g + 8; lanes 16 apart are g and g ^ 4
        mine = {int(rows[g]) // H if rows[g] >= 0 else 3, int(rows[g + 8]) // H
                if rows[g + 8] >= 0 else 3}
        other = {int(rows[g ^ 4]) // H if rows[g ^ 4] >= 0 else 3, int(rows[(g ^ 4) + 8]) // H
                 if rows[(g ^ 4) + 8] >= 0 else 3}
        assert mine | other == {0, 1, 2, 3} and mine == ({0, 2} if g < 4 else {1, 3})
        units = {int(rows[i]) % H for i in (g, g + 8, g ^ 4, (g ^ 4) + 8) if rows[i] >= 0}
        assert len(units) == 1


@pytest.mark.parametrize("cfg,fmt,threads,why", [
    (_cfg(RNNMode.LSTM, layers=2), "int8", 256, "one layer"),
    (_cfg(RNNMode.LSTM, batch=33), "int8", 256, "batch of at most 32"),
    (_cfg(RNNMode.LSTM, hidden=1024), "int8", 256, "up to 512"),
    (_cfg(RNNMode.LSTM, hidden=1024), "fp16", 512, "256 registers"),
    (_cfg(RNNMode.LSTM), "int8", 512, "64 registers .* 48 at most at 512"),  # spilled
    (_cfg(RNNMode.GRU, hidden=200), "int8", 256, "a multiple of 32"),
    (_cfg(RNNMode.RNN_RELU, hidden=80), "int8", 32, "32-byte chunks"),
    (_cfg(RNNMode.LSTM), "int8", 48, "multiple of 32")], ids=str)
def test_what_the_kernel_cannot_hold_is_refused_with_the_reason(cfg, fmt, threads, why):
    with pytest.raises(Unsupported, match=why):
        R.shape(cfg, fmt, threads)


def test_its_launch_shape_takes_threads_only_and_the_tuner_tries_it_before_the_fallbacks():
    names = [x.name for x in SETTINGS]
    assert Settings.parse("b1t256d") == Settings(resident=True)
    assert names.index("b1t256d") < min(names.index(x.name) for x in SETTINGS if x.gx_global)
    assert Settings.parse("b1t128d").threads == 128
    for name in ("b2t256d", "b1c64t256d", "b1t256dp", "b1t256dr"):
        with pytest.raises(ValueError):
            Settings.parse(name)


def _ptxas(cfg, fmt, threads):
    nvrtc = pytest.importorskip("cupy_backends.cuda.libs.nvrtc")
    try:
        nvrtc.getVersion()
    except Exception as exc:  # no CUDA wheels with NVRTC in this environment
        pytest.skip(f"NVRTC is not available here ({type(exc).__name__}: {exc})")
    from cudnn_rnn.lowbit.cubin import compile_source
    log: list = []
    sh = R.shape(cfg, fmt, threads)
    compile_source(R.source(R.defines(cfg, sh, fmt == "int8")), "resident.cu", "sm_90", log)
    text = "\n".join(log)
    spills = [int(n) for n in re.findall(r"(\d+) bytes spill", text)]
    return int(re.search(r"Used (\d+) registers", text).group(1)), spills, text


@pytest.mark.parametrize("mode", list(RNNMode), ids=lambda c: c.name)
@pytest.mark.parametrize("fmt", ["int8", "fp16"])
def test_the_source_compiles_for_sm_90_and_keeps_its_fragments_in_registers(mode, fmt):
    """The bench's batch-16 shape (H 512): every fragment in registers, nothing spilled."""
    regs, spills, text = _ptxas(_cfg(mode), fmt, 256)
    assert "resident_rnn" in text and spills and not any(spills), text
    assert regs >= R.shape(_cfg(mode), fmt, 256).chunks * 4  # the fragments are in them


def test_the_kernels_parameters_are_the_engines_in_order():
    text = R.SOURCE.read_text()
    sig = text[text.index("resident_rnn("):text.index(")", text.index("resident_rnn("))]
    names = re.findall(r"(\w+)\s*(?:,|$)", sig.replace("\n", " ") + ",")
    assert tuple(names) == R.ARGS


def test_a_gpu_without_cooperative_launch_is_refused_to_the_persistent_kernel_only():
    """The resident kernel's clusters are scheduled whole: it asks for no cooperative launch
    (limits.check_device's ``cooperative``), which the persistent kernel needs."""
    from cudnn_rnn.lowbit.limits import check_device
    limits = {"capability": (9, 0), "cooperative": False}
    check_device(_cfg(RNNMode.LSTM), None, "int8", limits, {"int8"}, cooperative=False)
    with pytest.raises(Unsupported, match="no cooperative launch"):
        check_device(_cfg(RNNMode.LSTM), None, "int8", limits, {"int8"})
