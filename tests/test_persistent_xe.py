"""Each warpgroup's own wait (the kernel's XE: bulk staging above the first layer, no shared
copies): which launches define it, what each warpgroup waits for, and the kernel with it
compiled for sm_90a without spills or serialized wgmma (its behaviour on a GPU, a
warpgroup's wait given up among it: tests/test_gpu_persistent_wg.py)."""
import pytest

from cudnn_rnn.bindings.enums import RNNMode
from cudnn_rnn.lowbit import persistent as P
from cudnn_rnn.lowbit import tables

from tests.test_persistent import _cfg, _nvrtc_or_skip
from tests.test_persistent_wg import SERIALIZED, _ptxas_log, _seed, _wg


@pytest.mark.parametrize("layers,kw,defined", [
    (2, dict(bulk=True), True), (3, dict(bulk=True, reg_gates=True), True),
    (1, dict(bulk=True), False),  # no input part: both warpgroups wait for the own group
    (2, dict(bulk=True, mcast=2), False),  # a mate copies for both: one wait a CTA
    (2, dict(), False),  # staged by every thread: one wait a CTA
])
def test_each_warpgroup_waits_on_its_own_where_bulk_staging_has_an_input_part(layers, kw,
                                                                               defined):
    cfg = _cfg(RNNMode.LSTM, layers, False, H=64, B=32, T=6, I=64)
    part = _wg(cfg, "fp16", sm_count=132, **kw)
    assert P.defines(cfg, part, gx_int=False).get("XE", 0) == int(defined)


def test_the_input_parts_warpgroup_waits_only_for_the_layer_below_and_the_other_for_its_group():
    """The kernel's split (XE: warpgroup g < kx takes waits 1.. , the others wait 0) against
    the wait table: wait 0 of every step is the CTA's own group, the others the layer
    below's, and above the first layer warpgroup 0 multiplies the input part (kx 1)."""
    cfg = _cfg(RNNMode.GRU, 2, True, H=64, B=32, T=5, I=64)
    part = _wg(cfg, "fp16", sm_count=132, bulk=True)
    waits = tables.waits(part)
    for c, s in enumerate(part.slices):
        assert s.kx == (1 if s.k >= 2 else 0)  # pseudo-layers 2, 3: layer 1's directions
        own = part.counter(s.k, s.bs)
        below = {part.counter(k, s.bs) for k in (0, 1)}
        for step in waits[c]:
            assert step[0][0] == own
            assert {int(w[0]) for w in step[1:] if w[0] >= 0} == (below if s.kx else set())


@pytest.mark.parametrize("mode,fmt,settings", [(RNNMode.LSTM, "fp16", dict(reg_gates=True)),
                                               (RNNMode.GRU, "int8", dict(reg_gates=True)),
                                               (RNNMode.LSTM, "int8", dict(gx_global=True))])
def test_the_seeds_kernel_with_each_warpgroups_own_wait_compiles_unserialized(mode, fmt,
                                                                                settings):
    _nvrtc_or_skip()
    cfg = _seed(mode)
    part = _wg(cfg, fmt, bulk=True, **settings)
    assert P.defines(cfg, part, gx_int=fmt == "int8")["XE"] == 1
    log = _ptxas_log(cfg, part, fmt)
    assert "0 bytes spill stores" in log and SERIALIZED not in log


def test_the_probe_tools_one_wait_variant_is_the_kernel_without_each_warpgroups_own_wait():
    """tools/persistent_probe.py --variants one_wait: the same PTX as the kernel whose
    launch never defined XE, so the probe measures the kernel as it was beside it."""
    _nvrtc_or_skip()
    from tests.test_clusters import _ptx
    from tests.test_persistent import _probe_tool
    cfg = _seed(RNNMode.GRU)
    part = _wg(cfg, "int8", bulk=True, reg_gates=True)
    consts = P.defines(cfg, part, gx_int=True)
    before = {k: v for k, v in consts.items() if k != "XE"}
    varied = _probe_tool().varied("one_wait")(consts)
    assert consts["XE"] == 1 and varied != P.source(before)
    assert _ptx(varied, "compute_90a") == _ptx(P.source(before), "compute_90a")
    assert _ptx(P.source(consts), "compute_90a") != _ptx(P.source(before), "compute_90a")
