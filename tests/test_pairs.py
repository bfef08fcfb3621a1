"""Two batch slices a CTA ('d', :mod:`cudnn_rnn.lowbit.pairs`, the kernel's DUAL) on the CPU:
who pairs with whom, where the second half's buffers lie, what is refused and why, the
numpy model of the kernel on such a partition, and the kernel compiled for sm_90a."""
import pytest

from cudnn_rnn.bindings.enums import RNNMode
from cudnn_rnn.lowbit import partition, ptxas
from cudnn_rnn.lowbit import persistent as P
from cudnn_rnn.lowbit.launch import Settings
from cudnn_rnn.lowbit.pairs import ALIGN

from tests.test_persistent import SMEM, _cfg, _close, _nvrtc_or_skip, _run_model

SEED = dict(mode=RNNMode.LSTM, layers=2, bi=False, H=512, B=64, T=20, I=512)


def _plan(cfg, settings, fmt="fp16", sms=132, smem=SMEM - P.STATIC_SMEM):
    return partition.plan(cfg, fmt if cfg.num_layers > 1 else None, fmt, sm_count=sms,
                          smem_per_block=smem, **Settings.parse(settings).partition_args())


@pytest.mark.parametrize("cfg,settings,fmt", [
    (_cfg(**SEED), "b4t256u16wbed", "fp16"),
    (_cfg(RNNMode.GRU, 3, True, H=64, B=30), "b4t256u8wbd", "fp16"),
    (_cfg(RNNMode.LSTM, 1, False, H=2048, B=128), "b2t256u16wbged", "int8")])
def test_a_ctas_two_slices_are_the_same_rows_of_two_consecutive_batch_slices(cfg, settings,
                                                                             fmt):
    part = _plan(cfg, settings, fmt)
    single = _plan(cfg, settings[:-1], fmt, sms=264, smem=1 << 20)  # a slice a CTA
    assert part.blocks == (part.grid // 2, 512) and part.grid == single.grid
    key = lambda s: (s.k, s.j0, s.nu, s.bs, s.b0, s.nb)  # noqa: E731
    assert sorted(map(key, part.slices)) == sorted(map(key, single.slices))
    for a, b in zip(part.slices[::2], part.slices[1::2]):
        assert (a.k, a.j0, a.nu, a.mpad, a.nc, a.blob != b.blob) == \
            (b.k, b.j0, b.nu, b.mpad, b.nc, True)
        assert (a.bs % 2, b.bs) == (0, a.bs + 1)
    assert part.weight_bytes() * 2 == single.weight_bytes()


def test_the_second_halfs_buffers_lie_past_the_first_ones_and_alike():
    part = _plan(_cfg(**SEED), "b4t256u16wbed")
    for a, b in zip(part.slices[::2], part.slices[1::2]):
        assert b.off_dq >= a.smem and (b.off_dq - a.off_dq) % ALIGN == 0
        offsets = lambda s: (s.off_own - s.off_dq, s.off_gx - s.off_dq,  # noqa: E731
                             s.off_ring - s.off_dq, s.smem - s.off_dq)
        assert offsets(a) == offsets(b)
    assert part.smem == max(s.smem for s in part.slices[1::2]) <= SMEM - P.STATIC_SMEM


@pytest.mark.parametrize("settings,kw,message", [
    ("b3t256u16wbd", {}, "an even number, not 3"),
    ("b2c130t256u16wbd", dict(sms=60), "130 slices: a persistent launch takes 1 to 120 "
                                       "(two per multiprocessor, all resident)"),
    ("b4t256u16wbed", dict(smem=150 * 1024), "a CTA needs"),
])
def test_what_two_slices_a_cta_cannot_take_is_refused_with_the_reason(settings, kw, message):
    with pytest.raises(partition.DoesNotFit, match=message.replace("(", r"\(").replace(
            ")", r"\)")):
        _plan(_cfg(**SEED), settings, **kw)
    with pytest.raises(partition.DoesNotFit, match="bulk staging's"):
        partition.plan(_cfg(**SEED), "fp16", "fp16", sm_count=132, smem_per_block=SMEM,
                       batch_slices=4, units=16, wg=True, dual=True)


@pytest.mark.parametrize("name", ["b4t256u16d", "b4t256u16wd", "b4t256u16wbdm2"])
def test_a_launch_shape_names_two_slices_a_cta_only_after_bulk_staging(name):
    with pytest.raises(ValueError):
        Settings.parse(name)
    assert Settings.parse("b4t256u16wbged").name == "b4t256u16wbged"
    assert Settings.parse("b4t256u16wbged").dual and not Settings.parse("b4t256u16wbg").dual


@pytest.mark.parametrize("fmt,parts", [(None, None), ("int8", "both"), ("e4m3", "both")])
@pytest.mark.parametrize("mode,layers,bi", [(RNNMode.LSTM, 2, True), (RNNMode.GRU, 3, False),
                                            (RNNMode.RNN_TANH, 1, True)])
def test_the_model_of_the_kernel_on_paired_slices_equals_the_twin(mode, layers, bi, fmt, parts):
    got, want, part = _run_model(_cfg(mode, layers, bi, H=32, B=16), fmt, parts, sms=40,
                                 batch_slices=4, units=8, wg=True, bulk=True, dual=True)
    assert part.dual and part.blocks[1] == 512
    _close(got, want)


def test_the_kernel_of_two_slices_a_cta_compiles_for_sm_90a_and_the_others_are_unchanged():
    """DUAL is defined only for 'd' (every other shape's source as it was); its kernel takes
    at most 128 registers a thread (512 threads a CTA, one CTA a multiprocessor)."""
    _nvrtc_or_skip()
    cfg = _cfg(RNNMode.GRU, 2, False, H=64, B=64)
    dual = P.defines(cfg, _plan(cfg, "b4t256u16wbed", "int8"), gx_int=True)
    single = P.defines(cfg, _plan(cfg, "b4t256u16wbe", "int8", sms=264), gx_int=True)
    assert dual["DUAL"] == 1 and "DUAL" not in single
    assert "#define DUAL 1" in P.source(dual) and "#define DUAL 1" not in P.source(single)
    assert ptxas.ptxas_info(dual, "sm_90a")["registers"] <= 128
