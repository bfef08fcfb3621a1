"""Two batch slices a CTA on one copy of its weight rows ('d', the kernel's DUAL) on a GPU
(marker ``gpu``; sm_90a, bulk staging): every cell x {uni, bi} x {1, 2, 3 layers} x {FP16,
BF16, INT8, E4M3} verified against the float64 reference and an 8-bit one against its twin,
replayed in a graph bit for bit; with the gate math in registers ('e') and the input
projection from global memory ('g'); the issue's shapes; a deliberately broken slice caught."""
from dataclasses import replace

import pytest

from cudnn_rnn.bindings.enums import DirectionMode, RNNMode
from cudnn_rnn.lowbit import candidates as C
from cudnn_rnn.lowbit import partition
from cudnn_rnn.lowbit.persistent import PersistentEngine, Settings

from tests.test_gpu_persistent import _cfg, _verify_all
from tests.test_gpu_persistent_wg import NAMES, _shape, hopper, verify_inputs  # noqa: F401

pytestmark = pytest.mark.gpu


def _verify_dual(cfg, names, settings, mode):
    """:func:`_verify_all` at ``settings``, every record OK and launched as CTAs of 512
    threads, half as many as the slices the same shape without 'd' takes on one CTA each."""
    by_name = _verify_all(cfg, names, settings, mode, True)
    assert {n: r["outcome"] for n, r in by_name.items()} == {n: "OK" for n in names}, \
        {n: r.get("reason") for n, r in by_name.items()}
    single = partition.plan(cfg, "fp16" if cfg.num_layers > 1 else None, "fp16",
                            sm_count=264, smem_per_block=1 << 20,
                            **replace(Settings.parse(settings), dual=False).partition_args())
    launched = {(r["algorithms"][-1]["grid"], r["algorithms"][-1]["threads"])
                for r in by_name.values()}
    assert launched == {(single.grid // 2, 512)}, launched
    return by_name


@pytest.mark.parametrize("layers", [1, 2, 3])
@pytest.mark.parametrize("direction", [DirectionMode.UNIDIRECTIONAL,
                                       DirectionMode.BIDIRECTIONAL], ids=lambda d: d.name[:3])
@pytest.mark.parametrize("mode", list(RNNMode), ids=lambda c: c.name)
def test_every_cell_direction_depth_and_format_verifies_and_replays(cuda, hopper, mode,
                                                                   direction, layers):
    """8 units a CTA; four batch slices of 4 rows (N 8), two a CTA."""
    _verify_dual(_cfg(mode, direction, layers), NAMES, "b4t256u8wbd", mode)


@pytest.mark.parametrize("settings", ["b4t256u16wbed", "b4t256u16wbged"])
@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("direction", [DirectionMode.UNIDIRECTIONAL,
                                       DirectionMode.BIDIRECTIONAL], ids=lambda d: d.name[:3])
@pytest.mark.parametrize("mode", [RNNMode.LSTM, RNNMode.GRU], ids=lambda c: c.name)
def test_with_the_gate_math_in_registers(cuda, hopper, mode, direction, layers, settings):
    """'e' takes batch slices of 16 rows: four of them, two a CTA."""
    by_name = _verify_dual(_cfg(mode, direction, layers, hidden=64, batch=64), NAMES,
                           settings, mode)
    assert {r["algorithms"][-1]["gate_sums_in"] for r in by_name.values()} == {"registers"}


@pytest.mark.parametrize("spec,names,settings", [
    ("LSTM 20/2/512/64", NAMES, "b4t256u16wbed"), ("GRU 20/2/512/64", NAMES, "b4t256u16wbed"),
    ("LSTM 5/1/1024/256", ["persistent:int8/both", "persistent:fp16"], "b4t256u16wbged"),
    ("LSTM 5/1/2048/128", ["persistent:int8/both"], "b2t256u16wbged"),
])
def test_the_issues_shapes_verify_and_replay(cuda, hopper, spec, names, settings):
    if cuda.cuda.Device().attributes["MultiProcessorCount"] < 128:
        pytest.skip("these shapes take 128 CTAs, one a multiprocessor")
    mode, cfg = _shape(spec)
    _verify_dual(cfg, names, settings, mode)


@pytest.mark.parametrize("half", [0, 1])
@pytest.mark.parametrize("name", ["persistent:int8/both", "persistent:fp16"])
def test_a_broken_slice_is_caught_by_the_verification(cuda, hopper, name, half):
    """One slice's weight rows in the blob zeroed: the CTA's threads of that half load
    their pieces of the one copy from it, so either half's copy broken is caught."""
    cfg = _cfg(RNNMode.LSTM, DirectionMode.UNIDIRECTIONAL, 2, batch=64)
    values, ref, config, plan, twin = verify_inputs(cuda, cfg, name)
    with PersistentEngine(cfg, values["stacked"], config.precision, plan,
                          settings=Settings.parse("b4t256u16wbed")) as engine:
        assert engine.consts["DUAL"] == 1
        facts, wrong = C.verify(cuda, cfg, config, engine, values, ref, twin)
        assert wrong is None, facts
        s = engine.part.slices[2 * (engine.part.blocks[0] // 2) + half]
        engine.tables["blob"][s.blob:s.blob + s.mpad * s.rowb] = 0
        facts, wrong = C.verify(cuda, cfg, config, engine, values, ref, twin)
        assert wrong and "bound" in wrong, facts
