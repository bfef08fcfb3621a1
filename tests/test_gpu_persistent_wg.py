"""The persistent kernel's wgmma products on a GPU (marker ``gpu``; sm_90a: launch shapes
with 'w', not in the tuner's list until measured): every cell x {uni, bi} x {1, 2, 3 layers}
x {FP16, BF16, INT8, E4M3} (A from shared memory in 16 bits, from registers in 8) verified
against the float64 reference (original weights and as seen) and an 8-bit one against its
twin, replayed in a graph bit for bit; the seed's shape; the same function as the mma.sync
kernel of the same plan; a deliberately broken slice caught, in both A paths."""
import numpy as np
import pytest

from cudnn_rnn.bindings.enums import DirectionMode, RNNMode
from cudnn_rnn.lowbit import candidates as C
from cudnn_rnn.lowbit import model
from cudnn_rnn.lowbit.engine import capability
from cudnn_rnn.lowbit.persistent import PersistentEngine, Settings, Stalled

from tests.test_gpu_persistent import _cfg, _verify_all

pytestmark = pytest.mark.gpu

NAMES = ["persistent:fp16", "persistent:bf16", "persistent:int8/both", "persistent:e4m3/both"]


def _shape(spec):
    """(cell, config) of ``"LSTM 5/1/1024/256"`` (cell T/L/H/B, input size H), one direction."""
    mode = RNNMode[spec.split()[0]]
    T, L, H, B = (int(v) for v in spec.split()[1].split("/"))
    return mode, _cfg(mode, DirectionMode.UNIDIRECTIONAL, L, seq=T, hidden=H, batch=B,
                      input_size=H)


def _verify_at(cuda, spec, names, settings,
               why="this shape takes 128 CTAs, one a multiprocessor"):
    """Every candidate of ``names`` at ``settings`` on ``spec`` (see :func:`_shape`), all
    verified and replayed; skipped, saying ``why``, on a GPU of fewer than 128
    multiprocessors. The records by name."""
    if cuda.cuda.Device().attributes["MultiProcessorCount"] < 128:
        pytest.skip(why)
    mode, cfg = _shape(spec)
    by_name = _verify_all(cfg, names, settings, mode, True)
    assert [rec["outcome"] for rec in by_name.values()] == ["OK"] * len(names)
    return by_name


@pytest.fixture(scope="module")
def hopper(cuda):
    if capability(cuda) != (9, 0):
        pytest.skip("wgmma runs sm_90a code: compute capability 9.0 (H100, H200)")
    return True


@pytest.mark.parametrize("settings", ["b2t256u8w", "b2t256u8wb", "b2t256u8wbm2", "b2t256u8wbg"])
@pytest.mark.parametrize("layers", [1, 2, 3])
@pytest.mark.parametrize("direction", [DirectionMode.UNIDIRECTIONAL,
                                       DirectionMode.BIDIRECTIONAL], ids=lambda d: d.name[:3])
@pytest.mark.parametrize("mode", list(RNNMode), ids=lambda c: c.name)
def test_every_cell_direction_depth_and_format_verifies_and_replays(cuda, hopper, mode,
                                                                   direction, layers, settings):
    """Staged by every thread ('w'), by bulk copies ('wb'), by bulk copies each shared by
    two cluster-mates ('wbm2'), and with layer 0's input projection read from global
    memory ('wbg')."""
    by_name = _verify_all(_cfg(mode, direction, layers), NAMES, settings, mode, True)
    assert all(rec["outcome"] == "OK" for rec in by_name.values())
    shape = Settings.parse(settings)
    assert {rec["algorithms"][-1]["copy_shared_by"] for rec in by_name.values()} == {shape.mcast}
    assert {rec["algorithms"][-1]["input_projection_from"] for rec in by_name.values()} == \
        {"global" if shape.gx_global else "shared"}


@pytest.mark.parametrize("settings", ["b2t256u16w", "b2t256u16wb", "b2t256u16wbm2",
                                      "b2t256u16wbg"])
@pytest.mark.parametrize("mode", [RNNMode.LSTM, RNNMode.GRU])
def test_the_seeds_shape_verifies_and_replays_on_wgmma(cuda, hopper, mode, settings):
    """Every format, 16 bits with bulk staging on a ring 8 stages deep (every slab of a
    step in it)."""
    if cuda.cuda.Device().attributes["MultiProcessorCount"] < 128:
        pytest.skip("this shape takes 128 CTAs, one a multiprocessor")
    cfg = _cfg(mode, DirectionMode.UNIDIRECTIONAL, 2, seq=20, hidden=512, batch=64,
               input_size=512)
    by_name = _verify_all(cfg, NAMES, settings, mode, True)
    assert all(rec["outcome"] == "OK" for rec in by_name.values())


@pytest.mark.parametrize("spec,names", [
    ("LSTM 20/2/512/128", ["persistent:fp16", "persistent:bf16"]),  # 8 slabs, 5 stages
    ("GRU 20/2/512/128", ["persistent:fp16", "persistent:bf16"]),
    ("LSTM 5/1/1024/256", ["persistent:int8/both", "persistent:e4m3/both"]),  # 4 slabs, 3
])
def test_a_ring_shallower_than_a_steps_slabs_verifies_and_replays(cuda, hopper, spec, names):
    """Bulk staging where the ring holds fewer stages than a step's slabs: each warpgroup
    refills a stage once its slab's products are done, the stage's phases counted across
    steps (tests/test_persistent_wg.py plans these rings)."""
    by_name = _verify_at(cuda, spec, names, "b2t256u16wb")
    for rec in by_name.values():  # the ring that ran: shallower than the step's slabs
        launch = rec["algorithms"][-1]
        assert launch["bulk_staging"]
        assert launch["ring_stages"] == (5 if _shape(spec)[1].hidden_size == 512 else 3)


@pytest.mark.parametrize("spec,names,settings", [
    ("LSTM 5/1/1024/256", ["persistent:fp16", "persistent:bf16"], "b2t256u16wbg"),
    ("GRU 5/1/1024/256", ["persistent:fp16"], "b2t256u16wbg"),
    ("LSTM 5/1/2048/128", ["persistent:int8/both", "persistent:e4m3/both"], "b1t256u16wbg"),
])
def test_where_only_the_projection_from_global_memory_leaves_room_it_verifies(
        cuda, hopper, spec, names, settings):
    """Bulk staging at shapes where a step's staged input projection left no room for the
    ring (tests/test_persistent_gxg.py plans them): the gate math reads it from global
    memory, on a ring of two stages or more."""
    by_name = _verify_at(cuda, spec, names, settings)
    for rec in by_name.values():
        launch = rec["algorithms"][-1]
        assert launch["bulk_staging"] and launch["input_projection_from"] == "global"
        assert launch["ring_stages"] >= 2


@pytest.mark.parametrize("settings", ["b2t256u8w", "b2t256u8wb"])
@pytest.mark.parametrize("name", ["persistent:e4m3/both", "persistent:fp16"])
def test_a_nan_in_one_batch_row_stays_in_that_row_and_leaves_no_trace(cuda, hopper, name,
                                                                      settings):
    """A group's chunks past its own multiply zeros, never codes that lie next to them in
    memory (another batch row's, another slot's: with bulk staging the copy brings them):
    a NaN in one row of x is NaN in that row of y only, and the next forward, on clean
    inputs, is finite everywhere."""
    cfg = _cfg(RNNMode.LSTM, DirectionMode.UNIDIRECTIONAL, 2)
    values = C.draw(cfg, seed=3)
    config = C.parse(name)
    plan = None
    if config.fmt:
        cal = values["calibration"]
        plan = model.plan(cfg, values["stacked"],
                          model.calibrate(cfg, values["stacked"], **cal), config.fmt,
                          config.parts)
    io = values["io"]
    x = np.array(io["x"], copy=True)
    x[:, 12, :] = np.nan  # batch row 12 (the second slice's row 4), every step
    with PersistentEngine(cfg, values["stacked"], config.precision, plan,
                          settings=Settings.parse(settings)) as engine:
        engine.set_inputs(x, io["hx"], io["cx"])
        engine.forward()
        y = engine.outputs()["y"].get()
        rows = sorted({int(b) for b in np.argwhere(~np.isfinite(y))[:, 1]})
        assert rows == [12], rows
        engine.set_inputs(io["x"], io["hx"], io["cx"])
        engine.forward()
        assert all(np.isfinite(a.get()).all() for a in engine.outputs().values())


@pytest.mark.parametrize("fmt", model.FORMATS)
def test_wgmma_computes_what_mma_sync_computes_of_the_same_plan(cuda, hopper, fmt):
    """The same codes and scales through both product paths: their outputs differ only by
    the order of the sums (and the codes that moves across a rounding boundary), far below
    the 8-bit error itself."""
    cfg = _cfg(RNNMode.LSTM, DirectionMode.BIDIRECTIONAL, 2)
    values = C.draw(cfg, seed=5)
    cal, io = values["calibration"], values["io"]
    plan = model.plan(cfg, values["stacked"], model.calibrate(cfg, values["stacked"], **cal),
                      fmt, "both")
    outs = []
    for name in ("b2t256u8", "b2t256u8w"):
        with PersistentEngine(cfg, values["stacked"], "fp16", plan,
                              settings=Settings.parse(name)) as engine:
            engine.set_inputs(io["x"], io["hx"], io["cx"])
            engine.forward()
            outs.append({n: a.get() for n, a in engine.outputs().items()})
            assert engine.describe()["products"] == ("wgmma" if name.endswith("w")
                                                     else "mma.sync")
    ref = model.forward(cfg, values["stacked"], io["x"], io["hx"], io["cx"], None)[0]
    apart = np.linalg.norm(outs[0]["y"] - outs[1]["y"]) / np.linalg.norm(outs[0]["y"])
    quantized = np.linalg.norm(outs[0]["y"] - ref) / np.linalg.norm(ref)
    print(f"{fmt}: paths apart {apart:.3g}, 8-bit error {quantized:.3g}")
    assert apart < quantized / 5


@pytest.mark.parametrize("settings", ["b2t256u8w", "b2t256u16wbe", "b2t256u16wbei"])
@pytest.mark.parametrize("name", ["persistent:int8/both", "persistent:fp16"])
def test_a_broken_slice_is_caught_by_the_verification_on_wgmma(cuda, hopper, name, settings):
    """With the gate math in registers ('e') too, and layer 0's input products in the kernel
    ('i': the broken CTA is one of layer 0's)."""
    cfg = _cfg(RNNMode.LSTM, DirectionMode.UNIDIRECTIONAL, 2, batch=32)
    values = C.draw(cfg, seed=2)
    ref = C.expected(cuda, cfg, values["stacked"], values["io"])
    config = C.parse(name)
    plan = twin = None
    if config.fmt:
        cal = values["calibration"]
        plan = model.plan(cfg, values["stacked"],
                          model.calibrate(cfg, values["stacked"], **cal), config.fmt,
                          config.parts)
        twin = C.twins(cuda, cfg, values)(plan)
    with PersistentEngine(cfg, values["stacked"], config.precision, plan,
                          settings=Settings.parse(settings)) as engine:
        assert engine.consts["WG"] == (1 if config.fmt else 2)
        assert engine.consts.get("GR", 0) == Settings.parse(settings).reg_gates
        facts, wrong = C.verify(cuda, cfg, config, engine, values, ref, twin)
        assert wrong is None, facts
        s = engine.part.slices[len(engine.part.slices) // 2]
        engine.tables["blob"][s.blob:s.blob + s.mpad * s.rowb] = 0  # one CTA's weights
        facts, wrong = C.verify(cuda, cfg, config, engine, values, ref, twin)
        assert wrong and "bound" in wrong, facts


@pytest.mark.parametrize("mode,settings,batch,blocks", [
    (RNNMode.LSTM, "b2t256u32w", 16, 2),  # 128 weight rows: two instructions a chunk
    (RNNMode.GRU, "b2t256u8w", 80, 1),    # 40 batch rows: int8 padded to N 48 (E4M3 40)
])
def test_two_instructions_a_chunk_and_padded_widths_verify_and_replay(cuda, hopper, mode,
                                                                      settings, batch, blocks):
    cfg = _cfg(mode, DirectionMode.UNIDIRECTIONAL, 2, batch=batch)
    for rec in _verify_all(cfg, NAMES, settings, mode, True).values():
        assert rec["outcome"] == "OK"
        launch = [a for a in rec["algorithms"] if a.get("kernel") == "persistent"][0]
        assert launch["products"] == "wgmma"
    with PersistentEngine(cfg, C.draw(cfg, seed=1)["stacked"], "fp16",
                          settings=Settings.parse(settings)) as engine:
        assert engine.part.wg_blocks == blocks


def test_a_cta_that_gives_up_ends_its_cluster_mates_waits_for_its_share_of_the_copies(cuda,
                                                                                   hopper):
    """With shared copies ('m2') a CTA's mate waits for the slabs the CTA copies for both:
    when only the first CTA's last wait is never met, its mate gives up on the status (it
    does not hang) and gives up its step too (its h_n NaN, not finite numbers of a state it
    never had whole), they meet at the cluster barrier, the launch ends, Stalled, the other
    CTAs' h_n are finite, and the next forward on the repaired table is the first's."""
    cfg = _cfg(RNNMode.LSTM, DirectionMode.UNIDIRECTIONAL, 1)
    values = C.draw(cfg, seed=5)
    io = values["io"]
    with PersistentEngine(cfg, values["stacked"], "fp16", spin_limit=1 << 14,
                          settings=Settings.parse("b2t256u8wbm2")) as engine:
        assert engine.describe()["copy_shared_by"] == 2
        engine.set_inputs(io["x"], io["hx"], io["cx"])
        engine.forward()
        good = engine.outputs()["y"].get()
        waits = engine.tables["waits"]
        waits[0, -1, 0, 1] += 1 << 20  # CTA 0's last step waits for steps nobody takes
        engine.set_inputs(io["x"], io["hx"], io["cx"])
        engine.forward()
        with pytest.raises(Stalled, match="gave up"):
            engine.outputs()
        hy = engine.buf["hy"].get()[0]  # (B, H): one layer, one direction
        for c, sl in enumerate(engine.part.slices[:3]):  # CTA 0, its mate, a CTA of another
            mine = hy[sl.b0:sl.b0 + sl.nb, sl.j0:sl.j0 + sl.nu]  # cluster
            assert np.isnan(mine).all() if c < 2 else np.isfinite(mine).all(), c
        waits[0, -1, 0, 1] -= 1 << 20
        engine.set_inputs(io["x"], io["hx"], io["cx"])
        engine.forward()
        np.testing.assert_array_equal(engine.outputs()["y"].get(), good)


@pytest.mark.parametrize("settings", ["b2t256u16wbe", "b2t256u16wbge"])
@pytest.mark.parametrize("layers", [1, 2, 3])
@pytest.mark.parametrize("direction", [DirectionMode.UNIDIRECTIONAL,
                                       DirectionMode.BIDIRECTIONAL], ids=lambda d: d.name[:3])
@pytest.mark.parametrize("mode", [RNNMode.LSTM, RNNMode.GRU], ids=lambda c: c.name)
def test_the_gate_math_in_registers_verifies_and_replays(cuda, hopper, mode, direction, layers,
                                                         settings):
    """'e' (an LSTM or a GRU, 16 units a CTA, batch slices of 16): every format, depth and
    direction, the projection staged or read from global memory; the launch says where the
    sums went."""
    cfg = _cfg(mode, direction, layers, hidden=64, batch=32)
    by_name = _verify_all(cfg, NAMES, settings, mode, True)
    assert all(rec["outcome"] == "OK" for rec in by_name.values())
    assert {rec["algorithms"][-1]["gate_sums_in"] for rec in by_name.values()} == {"registers"}


@pytest.mark.parametrize("spec,names,settings", [
    ("LSTM 20/2/512/64", NAMES, "b2t256u16wbe"), ("GRU 20/2/512/64", NAMES, "b2t256u16wbe"),
    ("GRU 5/1/1024/256", ["persistent:int8/both", "persistent:fp16"], "b2t256u16wbge"),
    ("LSTM 5/1/1024/256", ["persistent:int8/both", "persistent:e4m3/both"], "b2t256u16wbe"),
    ("LSTM 5/1/1024/256", ["persistent:fp16"], "b2t256u16wbge"),
    ("LSTM 5/1/2048/128", ["persistent:int8/both"], "b1t256u16wbge"),
])
def test_the_gate_math_in_registers_verifies_at_the_issues_shapes(cuda, hopper, spec, names,
                                                                  settings):
    _verify_at(cuda, spec, names, settings)


@pytest.mark.parametrize("settings", ["b4t256u16wbeo2", "b4t256u16wbo2"])
@pytest.mark.parametrize("layers", [1, 2, 3])
@pytest.mark.parametrize("direction", [DirectionMode.UNIDIRECTIONAL,
                                       DirectionMode.BIDIRECTIONAL], ids=lambda d: d.name[:3])
@pytest.mark.parametrize("mode", [RNNMode.LSTM, RNNMode.GRU], ids=lambda c: c.name)
def test_two_ctas_a_multiprocessor_verify_and_replay(cuda, hopper, mode, direction, layers,
                                                     settings):
    """'o2' (each CTA within half a multiprocessor's shared memory and registers): every
    8-bit format, depth and direction, the gate math in registers or not (at most 96 CTAs
    here: two on one multiprocessor only at the issue's shapes, below)."""
    cfg = _cfg(mode, direction, layers, hidden=64, batch=64)
    names = ["persistent:int8/both", "persistent:e4m3/both"]
    by_name = _verify_all(cfg, names, settings, mode, True)
    assert all(rec["outcome"] == "OK" for rec in by_name.values())
    assert {rec["algorithms"][-1]["ctas_per_multiprocessor"] for rec in by_name.values()} == {2}


@pytest.mark.parametrize("spec,names,settings", [
    ("LSTM 20/2/512/64", ["persistent:int8/both", "persistent:e4m3/both"], "b4t256u16wbeo2"),
    ("GRU 20/2/512/64", ["persistent:int8/both"], "b4t256u16wbeo2"),
    ("LSTM 5/1/1024/256", ["persistent:int8/both"], "b4t256u16wbgeo2"),
    ("GRU 5/1/1024/256", ["persistent:int8/both"], "b4t256u16wbgeo2"),
])
def test_two_ctas_a_multiprocessor_verify_at_the_issues_shapes(cuda, hopper, spec, names,
                                                               settings):
    """256 CTAs: more than one a multiprocessor, all resident (a cooperative launch refuses
    a grid that is not)."""
    by_name = _verify_at(cuda, spec, names, settings,
                         "these shapes take 256 CTAs, two a multiprocessor")
    assert {rec["algorithms"][-1]["grid"] for rec in by_name.values()} == {256}


@pytest.mark.parametrize("settings", ["b2t256u8wbi", "b2t256u16wbei"])
@pytest.mark.parametrize("layers", [1, 2, 3])
@pytest.mark.parametrize("direction", [DirectionMode.UNIDIRECTIONAL,
                                       DirectionMode.BIDIRECTIONAL], ids=lambda d: d.name[:3])
@pytest.mark.parametrize("mode", list(RNNMode), ids=lambda c: c.name)
def test_layer_0s_input_products_in_the_kernel_verify_and_replay(cuda, hopper, mode, direction,
                                                                 layers, settings):
    """'i': no input GEMM, layer 0 multiplies its input codes (input size 48 against H 64:
    a row's padding) as a layer above; every format, depth and direction, the gate math in
    shared memory ('wbi', every cell) or in registers ('wbei', an LSTM or a GRU)."""
    if Settings.parse(settings).reg_gates and mode not in (RNNMode.LSTM, RNNMode.GRU):
        pytest.skip("the gate math in registers is an LSTM's or a GRU's")
    cfg = _cfg(mode, direction, layers, batch=32)
    by_name = _verify_all(cfg, NAMES, settings, mode, True)
    assert all(rec["outcome"] == "OK" for rec in by_name.values())
    for rec in by_name.values():  # the launch alone: no GEMM before it
        assert [a.get("input_projection_from") for a in rec["algorithms"]] == ["kernel"]


@pytest.mark.parametrize("input_size", [50, 52])
def test_layer_0s_input_codes_of_a_row_that_ends_inside_a_column_verify(cuda, hopper,
                                                                      input_size):
    """'i' where a row's values end inside its last 16 bytes of codes: 50 values (no 16-byte
    loads: kernels.wgmma_quantizer's values read one at a time) and 52 (16-byte loads, the
    last column's past the row's end zero codes), batch 63 (a short last slice)."""
    cfg = _cfg(RNNMode.LSTM, DirectionMode.UNIDIRECTIONAL, 1, batch=63, input_size=input_size)
    by_name = _verify_all(cfg, NAMES, "b2t256u16wbei", RNNMode.LSTM, True)
    assert all(rec["outcome"] == "OK" for rec in by_name.values())


@pytest.mark.parametrize("spec,names", [
    ("LSTM 20/2/512/64", NAMES), ("GRU 20/2/512/64", NAMES),
    ("LSTM 5/1/1024/256", ["persistent:int8/both", "persistent:e4m3/both"]),
    ("GRU 5/1/1024/256", ["persistent:int8/both"]), ("LSTM 5/1/1024/64", ["persistent:int8/both"]),
])
def test_layer_0s_input_products_in_the_kernel_verify_at_the_issues_shapes(cuda, hopper, spec,
                                                                           names):
    _verify_at(cuda, spec, names, "b2t256u16wbei")


@pytest.mark.parametrize("wait", [0, 1])
def test_a_warpgroup_that_gives_up_its_own_wait_ends_the_launch_with_its_cta(cuda, hopper,
                                                                            wait):
    """Above the first layer with bulk staging each warpgroup waits for what it reads (XE):
    the recurrent part's for wait 0 (the own group), the input part's for wait 1 (the layer
    below). Either never met at one layer-1 CTA's last step: that warpgroup gives up while
    the other multiplies, the CTA leaves after both (no hang), the launch ends Stalled, that
    CTA's y and h_n are NaN and a layer-0 CTA's h_n finite; the repaired table's forward
    is the first one's."""
    cfg = _cfg(RNNMode.LSTM, DirectionMode.UNIDIRECTIONAL, 2)
    values = C.draw(cfg, seed=5)
    io = values["io"]
    with PersistentEngine(cfg, values["stacked"], "fp16", spin_limit=1 << 14,
                          settings=Settings.parse("b2t256u8wb")) as engine:
        assert engine.consts["XE"] == 1
        engine.set_inputs(io["x"], io["hx"], io["cx"])
        engine.forward()
        good = engine.outputs()["y"].get()
        c = next(i for i, s in enumerate(engine.part.slices) if s.k == 1)
        assert engine.part.slices[c].kx == 1  # its warpgroups on the two parts, apart
        waits = engine.tables["waits"]
        assert waits[c, -1, wait, 0] >= 0  # a wait there to break
        waits[c, -1, wait, 1] += 1 << 20
        engine.set_inputs(io["x"], io["hx"], io["cx"])
        engine.forward()
        with pytest.raises(Stalled, match="gave up"):
            engine.outputs()
        s, first = engine.part.slices[c], engine.part.slices[0]
        hy, y = engine.buf["hy"].get(), engine.buf["y"].get()
        assert np.isnan(hy[1, s.b0:s.b0 + s.nb, s.j0:s.j0 + s.nu]).all()
        assert np.isnan(y[:, s.b0:s.b0 + s.nb, s.j0:s.j0 + s.nu]).all()
        assert np.isfinite(hy[0, first.b0:first.b0 + first.nb, first.j0:first.j0 + first.nu]).all()
        waits[c, -1, wait, 1] -= 1 << 20
        engine.set_inputs(io["x"], io["hx"], io["cx"])
        engine.forward()
        np.testing.assert_array_equal(engine.outputs()["y"].get(), good)
