"""Hopper's warpgroup MMA on the GPU (marker ``gpu``; sm_90a): ``tools/wgmma_probe.py``'s
kernel, run in this process, reads the canonical operand layouts through descriptors whose
two strides are assigned as the PTX ISA says (and not swapped), takes A from registers in
mma.sync's fragment layout, returns the accumulators in mma.sync's layout, and computes the
same sums as mma.sync, exactly in int8 and within FP32 accumulation in fp16, at the
persistent kernel's widths, B staged by every thread or by one bulk copy."""
import pytest

from cudnn_rnn.lowbit.engine import capability
from cudnn_rnn.lowbit.cubin import compile_source

from tests.test_wgmma import _tool

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def probe(cuda):
    if capability(cuda) != (9, 0):
        pytest.skip("wgmma needs sm_90a (compute capability 9.0: H100, H200)")
    return _tool()


def _run(cuda, probe, fmt, n, kbytes, mode, layout="k", swapped=False, steps=4):
    text = probe.source(fmt, n, kbytes, steps, mode, layout, swapped)
    cubin = compile_source(text, "wgmma_probe.cu", "sm_90a")
    return probe.run(cuda, fmt, n, kbytes, steps, mode, layout, swapped, cubin, 1)


@pytest.mark.parametrize("fmt", ["int8", "fp16"])
@pytest.mark.parametrize("mode", ["wgmma_smem", "wgmma_regs"])
@pytest.mark.parametrize("layout", ["k", "rows"])
def test_the_descriptors_strides_are_read_as_the_ptx_isa_assigns_them(cuda, probe, fmt, mode,
                                                                       layout):
    right = _run(cuda, probe, fmt, 32, 512, mode, layout)
    assert right["verified"], right["error"]
    wrong = _run(cuda, probe, fmt, 32, 512, mode, layout, swapped=True)
    assert not wrong["verified"], wrong["error"]


@pytest.mark.parametrize("fmt", ["int8", "e4m3", "bf16"])
@pytest.mark.parametrize("n", [8, 32, 64])
@pytest.mark.parametrize("mode", ["mma", "wgmma_smem", "wgmma_regs", "wgmma_regs_bulk"])
def test_every_path_computes_the_sums_at_the_persistent_kernels_widths(cuda, probe, fmt, n,
                                                                       mode):
    r = _run(cuda, probe, fmt, n, 512, mode)
    assert r["verified"], r["error"]
    assert r["phases"]["product"]["cycles"] > 0
