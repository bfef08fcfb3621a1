"""A step's first ring stages copied at once (the kernel's FANOUT, with bulk staging): each
stage's copy issued by a thread of its own, and the kernel as it was before, one thread
issuing every copy in turn, kept as the probe's ``one_issuer`` variant (their outputs on a
GPU: every bulk-staging test of tests/test_gpu_persistent_wg.py,
tests/test_gpu_persistent_slab.py and tests/test_gpu_persistent_prefetch.py)."""
import pytest

from cudnn_rnn.lowbit import persistent as P

from tests.test_clusters import _ptx
from tests.test_persistent import _nvrtc_or_skip, _probe_tool
from tests.test_persistent_inside import _plan, compiles_clean
from tests.test_persistent_wg import _shape

# the launch shapes that won at LSTM 50/1/1024/256 and 50/1/2048/128 (H100, 2026-12-07),
# the 'x' one, and a 16-bit GRU
SHAPES = [("LSTM 50/1/1024/256", "b2t256u16wbeis2", "int8"),
          ("LSTM 50/1/1024/256", "b2t256u16wbeixs2", "int8"),
          ("LSTM 50/1/2048/128", "b1t256u16wbes2", "int8"),
          ("GRU 50/1/1024/256", "b2t256u16wbe", "fp16")]


def _consts(spec, name, fmt):
    cfg = _shape(spec)
    return P.defines(cfg, _plan(cfg, name, fmt), gx_int=fmt == "int8")


@pytest.mark.parametrize("spec,name,fmt", SHAPES)
def test_the_kernels_issuing_each_stage_from_its_own_thread_compile_clean(spec, name, fmt):
    """No spills and no serialized wgmma (ptxas's C7520) with the copies issued under a
    branch on the thread's place in its warpgroup."""
    consts = _consts(spec, name, fmt)
    assert consts["WGB"] == 1 and "FANOUT" not in consts  # bulk staging, the default: on
    compiles_clean(spec, name, fmt)


@pytest.mark.parametrize("spec,name,fmt", SHAPES[:3])
def test_the_probe_tools_one_issuer_variant_is_the_kernel_with_fanout_off(spec, name, fmt):
    """tools/persistent_probe.py --variants one_issuer: the PTX of the kernel with FANOUT
    defined 0, which differs from the kernel's own, so the probe measures the two side by
    side."""
    _nvrtc_or_skip()
    consts = _consts(spec, name, fmt)
    varied = _probe_tool().varied("one_issuer")(consts)
    off = _ptx(P.source({**consts, "FANOUT": 0}), "compute_90a")
    assert _ptx(varied, "compute_90a") == off
    assert _ptx(P.source(consts), "compute_90a") != off
