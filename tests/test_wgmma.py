"""Hopper's warpgroup MMA without a GPU (``cudnn_rnn.lowbit.wgmma``, ``tools/wgmma_probe.py``):
the descriptor's bits, the canonical layouts read back through the descriptors the way the
PTX ISA defines their two strides, the instruction's inline PTX compiled by NVRTC for
sm_90a (and refused for plain sm_90, which is why the kernel that uses it names sm_90a),
the probe's kernel compiled for every path it measures, and the probe tool's refusals."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cudnn_rnn.lowbit import wgmma
from cudnn_rnn.lowbit.cubin import compile_source

from tests.test_cli import assert_one_line_exit_2
from tests.test_persistent import _nvrtc_or_skip

ROOT = Path(__file__).resolve().parent.parent


def _tool():
    """tools/wgmma_probe.py as a module (it is not part of the package)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("tools_wgmma_probe",
                                                  ROOT / "tools" / "wgmma_probe.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def test_the_descriptor_puts_each_field_in_its_bits():
    d = wgmma.descriptor(0x1230, 128, 4096)
    assert d == 0x123 | (128 >> 4) << 16 | (4096 >> 4) << 32
    assert wgmma.fields(d) == {"address": 0x1230, "lbo": 128, "sbo": 4096, "base_offset": 0,
                               "swizzle": 0}
    # shared-memory addresses keep their low 18 bits (the window a CTA addresses)
    assert wgmma.fields(wgmma.descriptor(0x41230, 16, 16))["address"] == 0x1230


@pytest.mark.parametrize("address,lbo,sbo", [(8, 128, 128), (0, 100, 128), (0, 128, 1 << 18)])
def test_a_field_off_the_16_byte_grid_or_past_14_bits_is_refused(address, lbo, sbo):
    with pytest.raises(ValueError, match="multiple of 16"):
        wgmma.descriptor(address, lbo, sbo)


def _read(flat: np.ndarray, desc: int, rows: int) -> np.ndarray:
    """What one instruction reads (rows x 32 bytes of K) through ``desc``, as the PTX ISA
    defines the fields: core matrices ``lbo`` apart along K, ``sbo`` apart down the rows."""
    f = wgmma.fields(desc)
    r, k = np.meshgrid(np.arange(rows), np.arange(wgmma.K_BYTES), indexing="ij")
    return flat[f["address"] + wgmma.offset(r, k, f["lbo"], f["sbo"])]


@pytest.mark.parametrize("layout", ["k", "rows"])
@pytest.mark.parametrize("rows,kbytes", [(64, 512), (32, 1024), (8, 32)])
def test_each_chunks_descriptor_reads_its_32_bytes_of_k_from_the_packed_operand(layout, rows,
                                                                                kbytes):
    rng = np.random.default_rng(rows + kbytes)
    m = rng.integers(0, 256, (rows, kbytes), dtype=np.uint8)
    flat = wgmma.pack(m, layout)
    assert sorted(flat) == sorted(m.ravel())  # every byte placed once
    for c in range(kbytes // wgmma.K_BYTES):
        got = _read(flat, wgmma.chunk_descriptor(0, c, rows, kbytes, layout), rows)
        np.testing.assert_array_equal(got, m[:, 32 * c:32 * c + 32])


@pytest.mark.parametrize("layout", ["k", "rows"])
def test_a_core_matrix_is_128_contiguous_bytes_and_swapped_strides_read_other_bytes(layout):
    rows, kbytes = 64, 512
    m = np.arange(rows * kbytes, dtype=np.int64).reshape(rows, kbytes) % 251
    flat = wgmma.pack(m.astype(np.uint8), layout)
    along_k, along_rows = wgmma.strides(rows, kbytes, layout)
    first = flat[:128].reshape(8, 16)  # rows 0-7, bytes 0-15
    np.testing.assert_array_equal(first, m[:8, :16])
    swapped = _read(flat, wgmma.chunk_descriptor(0, 1, rows, kbytes, layout, swapped=True), 8)
    assert not np.array_equal(swapped, m[:8, 32:64])


@pytest.mark.parametrize("layout,rows,kbytes", [("k", 12, 64), ("rows", 16, 48), ("x", 8, 32)])
def test_an_operand_of_part_core_matrices_or_an_unknown_layout_is_refused(layout, rows, kbytes):
    with pytest.raises(ValueError, match="core matrices|no wgmma operand layout"):
        wgmma.strides(rows, kbytes, layout)


def _user(fmt: str, n: int) -> str:
    """A kernel calling both forms of the instruction, so that ptxas assembles them."""
    from cudnn_rnn.lowbit import persistent
    acc = "int" if fmt == "int8" else "float"
    return (persistent.HELPERS.read_text() + wgmma.source(fmt, n) + f"""
extern "C" __global__ void use({acc}* out, const unsigned* in) {{
    __shared__ __align__(128) unsigned char s[16384];
    {acc} d[{n // 2}];
    for (int i = 0; i < {n // 2}; ++i) d[i] = 0;
    const unsigned a[4] = {{in[0], in[1], in[2], in[3]}};
    wg_fence();
    wg_mma_s(d, wg_desc(s, 128, 1024), wg_desc(s + 8192, 128, 1024), 0);
    wg_mma_r(d, a, wg_desc(s + 8192, 128, 1024), 1);
    wg_commit();
    wg_wait<0>();
    for (int i = 0; i < {n // 2}; ++i) out[threadIdx.x * {n // 2} + i] = d[i];
}}
""")


@pytest.mark.parametrize("fmt", sorted(wgmma.FORMATS))
@pytest.mark.parametrize("n", [8, 24, 32, 40, 56, 64, 256])
def test_the_instruction_compiles_for_sm_90a_in_every_format_and_width_it_lists(fmt, n,
                                                                              monkeypatch):
    """ptxas takes s8 at N 8, 16, 24 and multiples of 16 only (m64n40k32 s8 is an illegal
    shape); the floats at every multiple of 8."""
    _nvrtc_or_skip()
    if n in wgmma.widths(fmt):
        assert compile_source(_user(fmt, n), "t.cu", "sm_90a")[:4] == b"\x7fELF"
        return
    assert fmt == "int8" and n in (40, 56)
    with pytest.raises(ValueError, match="no wgmma for format"):
        wgmma.instruction(fmt, n, True)
    monkeypatch.setattr(wgmma, "INT_WIDTHS", wgmma.WIDTHS)  # written anyway: ptxas refuses
    with pytest.raises(RuntimeError, match="Illegal matrix shape"):
        compile_source(_user(fmt, n), "t.cu", "sm_90a")


def test_plain_sm_90_refuses_wgmma_so_its_kernels_name_sm_90a():
    _nvrtc_or_skip()
    with pytest.raises(RuntimeError, match="not supported on .target 'sm_90'"):
        compile_source(_user("int8", 32), "t.cu", "sm_90")


@pytest.mark.parametrize("fmt,n", [("bf16", 12), ("fp32", 32), ("int8", 264), ("int8", 40)])
def test_a_format_or_width_the_instruction_lacks_is_refused(fmt, n):
    with pytest.raises(ValueError, match="no wgmma for format"):
        wgmma.instruction(fmt, n, True)


@pytest.mark.parametrize("fmt", ["fp16", "int8", "e4m3"])
@pytest.mark.parametrize("mode,layout,swapped", [("mma", "k", False), ("wgmma_smem", "k", False),
                                                 ("wgmma_smem", "rows", True),
                                                 ("wgmma_regs", "k", False),
                                                 ("wgmma_regs_bulk", "k", False),
                                                 ("wgmma_regs", "rows", True)])
def test_the_probes_kernel_compiles_for_every_path_it_measures_without_spills(fmt, mode, layout,
                                                                                swapped):
    _nvrtc_or_skip()
    log: list = []
    compile_source(_tool().source(fmt, 32, 512, 8, mode, layout, swapped), "p.cu", "sm_90a", log)
    log = "\n".join(log)
    assert "Compiling entry function 'wgmma_probe'" in log
    assert "0 bytes spill stores" in log


@pytest.mark.parametrize("args,needle", [
    (["--formats", "fp32"], "--formats takes fp16,bf16,int8,e4m3"),
    (["--widths", "12"], "--widths: multiples of 8 up to 64"),
    (["--widths", "40"], "with int8: 8, 16, 24, 32, 48 or 64"),
    (["--kbytes", "2048"], "--kbytes: multiples of 32 from 32 to 1024"),
    (["--steps", "1"], "--steps: 2 to 256"),
    (["--steps", "many"], "take whole numbers"),
    (["--out", "README.md"], "--out 'README.md' is a file"),
])
def test_the_probe_tool_refuses_bad_input_in_one_line_and_writes_nothing(tmp_path, args, needle):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "wgmma_probe.py"),
                           "--out", str(out), *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert_one_line_exit_2(proc, needle)
    assert not out.exists()
