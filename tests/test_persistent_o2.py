"""Two CTAs a multiprocessor (launch shapes with 'o2', the kernel's ``MINB``) without a GPU:
the name and its refusals, each CTA's share of a multiprocessor's shared memory and
registers (the weight fragments then in shared memory), the grid past one CTA a
multiprocessor, and the kernels compiled for sm_90a within 128 registers a thread and no
spills at the issue's shapes, every other kernel's source untouched."""
import pytest

from cudnn_rnn.bindings.enums import RNNMode
from cudnn_rnn.lowbit import fits, limits, partition
from cudnn_rnn.lowbit import persistent as P
from cudnn_rnn.lowbit.launch import MAX_PER_SM, Settings
from cudnn_rnn.lowbit.ptxas import ptxas_info

from tests.test_persistent import _nvrtc_or_skip
from tests.test_persistent_wg import SERIALIZED, _ptxas_log, _seed, _shape

# an H200's (and an H100's) cudaDeviceAttr values: 227 KB a block, 228 KB a multiprocessor
H200 = {"sm_count": 132, "smem_per_block": 232448 - P.STATIC_SMEM, "smem_per_sm": 233472,
        "smem_reserved": 1024, "cooperative": True, "capability": (9, 0)}


def _plan(cfg, name, fmt="int8"):
    s = Settings.parse(name)
    return partition.plan(cfg, fmt if cfg.num_layers > 1 else None, fmt, sm_count=132,
                          smem_per_block=limits.smem_share(H200, s.per_sm),
                          **s.partition_args())


def test_the_launch_shape_names_its_ctas_a_multiprocessor_last():
    for name in ("b4t256u16wbeo2", "b4t256u16wbgeo2", "b4t256o2", "b2t256u16wbo2"):
        s = Settings.parse(name)
        assert s.name == name and s.per_sm == 2 and s.partition_args()["per_sm"] == 2
    assert Settings.parse("b2t256u16wbe").per_sm == 1
    assert "o" not in Settings.parse("b2t256u16wbe").name
    for name in ("b4t256o2u16wbe", "b4t256u16wbeo0", "b4t256u16wbeo"):
        with pytest.raises(ValueError, match="no launch shape"):
            Settings.parse(name)
    with pytest.raises(ValueError, match=f"1 to {MAX_PER_SM} CTAs a multiprocessor"):
        Settings.parse(f"b4t256u16wbeo{MAX_PER_SM + 1}")
    with pytest.raises(ValueError, match="not for clusters"):
        Settings.parse("b2t256k16o2")
    with pytest.raises(ValueError, match="not for clusters"):
        Settings.parse("b4t256u16wbm2o2")


def test_each_cta_takes_its_share_of_a_multiprocessors_shared_memory():
    assert limits.smem_share(H200, 1) == H200["smem_per_block"]
    # two blocks, each with its 1 KB reserve and the kernel's own variables
    share = limits.smem_share(H200, 2)
    assert share == 233472 // 2 - 1024 - P.STATIC_SMEM == 114688
    assert 2 * (share + 1024 + P.STATIC_SMEM) <= H200["smem_per_sm"]
    # a GPU whose block limit is below its share keeps the block limit
    assert limits.smem_share(dict(H200, smem_per_block=50000), 2) == 50000


def test_the_grid_goes_past_one_cta_a_multiprocessor_and_each_fits_its_share():
    cfg = _shape("LSTM 50/1/1024/256")
    part = _plan(cfg, "b4t256u16wbgeo2")
    assert part.grid == 256 > 132 and part.per_sm == 2
    assert part.smem <= limits.smem_share(H200, 2)
    with pytest.raises(partition.DoesNotFit, match=r"256 CTAs: .* 1 to 132 \(1 per"):
        partition.plan(cfg, None, "int8", sm_count=132, smem_per_block=H200["smem_per_block"],
                       ctas=256, batch_slices=4, units=16)
    # the projection staged needs more than a share: the refusal names the share
    with pytest.raises(partition.DoesNotFit, match="the GPU gives a block 114688"):
        _plan(cfg, "b4t256u16wbeo2")
    # 16-bit weights of 16 units at H 1024 (128 KB) do not fit a share
    with pytest.raises(partition.DoesNotFit, match="of weights for 16 units"):
        _plan(cfg, "b4t256u16wbgeo2", "fp16")


def test_the_weight_fragments_take_their_share_of_the_registers():
    """A part of K of 512 bytes takes 64 registers of 8-bit fragments: within one CTA's
    budget (:data:`fits.AREG_REGS`), past half of it, so with two CTAs A stays in shared
    memory."""
    seed = _seed()
    alone, shared = _plan(seed, "b2t256u16wbe"), _plan(seed, "b4t256u16wbeo2")
    assert alone.wg_slabs * partition.SLAB * 4 == fits.AREG_REGS
    assert not alone.wg_shared and shared.wg_shared


def test_only_a_kernel_of_more_ctas_a_multiprocessor_names_its_launch_bounds():
    seed = _seed()
    assert "MINB" not in P.defines(seed, _plan(seed, "b2t256u16wbe"), gx_int=True)
    assert P.defines(seed, _plan(seed, "b4t256u16wbeo2"), gx_int=True)["MINB"] == 2
    assert "__launch_bounds__(THREADS, MINB)" in P.SOURCE.read_text()


@pytest.mark.parametrize("spec,name", [
    ("LSTM 20/2/512/64", "b4t256u16wbeo2"), ("GRU 20/2/512/64", "b4t256u16wbeo2"),
    ("LSTM 50/1/1024/64", "b4t256u16wbeo2"), ("LSTM 50/1/1024/256", "b4t256u16wbgeo2"),
    ("GRU 50/1/1024/256", "b4t256u16wbgeo2"), ("LSTM 50/1/1024/256", "b4t256u16wbgo2"),
])
def test_the_kernels_fit_two_a_multiprocessor_without_spills(spec, name):
    _nvrtc_or_skip()
    cfg = _shape(spec)
    part = _plan(cfg, name)
    info = ptxas_info(P.defines(cfg, part, gx_int=True), "sm_90a")
    assert info["registers"] <= 65536 // (2 * part.threads), info
    assert info["spill_stores"] == info["spill_loads"] == 0, info
    assert SERIALIZED not in _ptxas_log(cfg, part, "int8")


def test_the_launch_bounds_cap_a_thread_at_its_share_of_the_registers():
    """The seed's kernel with A in registers takes more than 128 registers a thread alone on
    a multiprocessor; bound to two, ptxas keeps it within 128."""
    _nvrtc_or_skip()
    seed = _seed()
    consts = P.defines(seed, _plan(seed, "b2t256u16wbe"), gx_int=True)
    assert ptxas_info(consts, "sm_90a")["registers"] > 128
    assert ptxas_info(dict(consts, MINB=2), "sm_90a")["registers"] <= 128
