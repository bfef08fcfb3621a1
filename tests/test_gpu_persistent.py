"""The persistent kernel on a GPU (marker ``gpu``): every cell x {uni, bi} x {1, 2, 3 layers}
x {FP16, BF16, INT8, E4M3} verified against the float64 reference (original weights and as
seen) and an 8-bit one against its twin, captured in a graph whose replay writes the plain
launch's bytes; every launch shape; the same function as the GEMM engine of the same plan;
a deliberately broken slice caught; a wait that can never be met ends the launch."""
import re

import numpy as np
import pytest

from cudnn_rnn.bindings.enums import DirectionMode, RNNMode
from cudnn_rnn.check import reference
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.lowbit import candidates as C
from cudnn_rnn.lowbit import model, persistent
from cudnn_rnn.lowbit.engine import GemmEngine, Unsupported, capability
from cudnn_rnn.lowbit.persistent import PersistentEngine, Settings, Stalled

pytestmark = pytest.mark.gpu

NAMES = ["persistent:fp16", "persistent:bf16", "persistent:int8/both", "persistent:e4m3/both"]


def _cfg(mode, direction, layers, seq=9, hidden=64, batch=16, input_size=48):
    return RNNConfig(seq_length=seq, num_layers=layers, hidden_size=hidden, mini_batch=batch,
                     input_size=input_size, mode=mode, direction=direction)


@pytest.fixture(scope="module")
def fp8_capable(cuda):
    return capability(cuda) >= (8, 9)


def _check(rec, mode, fp8_capable):
    if rec["format"] == "e4m3" and not fp8_capable:
        assert rec["outcome"] == "NOT_SUPPORTED" and "8.9" in rec["reason"]
        return
    assert rec["outcome"] == "OK", (rec["config"], rec.get("reason"), rec.get("errors"))
    outputs = {"y", "hy", "cy"} if mode == RNNMode.LSTM else {"y", "hy"}
    for errors in (rec["errors"], rec["errors_seen"]):
        assert set(errors) == outputs and max(errors.values()) <= rec["bound"]
    if rec["format"]:
        assert max(rec["errors_twin"].values()) <= C.TWIN_BOUNDS[rec["format"]]
        assert max(rec["errors"].values()) > 1e-4  # the 8-bit error is there
    assert "graph_refused" not in rec, rec.get("graph_refused")
    assert rec["graph_timings"]["forward_inference"]["median_ms"] > 0


@pytest.mark.parametrize("layers", [1, 2, 3])
@pytest.mark.parametrize("direction", [DirectionMode.UNIDIRECTIONAL,
                                       DirectionMode.BIDIRECTIONAL], ids=lambda d: d.name[:3])
@pytest.mark.parametrize("mode", list(RNNMode), ids=lambda c: c.name)
def test_every_cell_direction_depth_and_format_verifies_and_replays(cuda, fp8_capable, mode,
                                                                   direction, layers):
    _verify_all(_cfg(mode, direction, layers), NAMES, "b1t256", mode, fp8_capable)


def _verify_all(cfg, names, settings, mode, fp8_capable):
    """Every candidate of ``names`` at launch shape ``settings``: one record each, verified
    and replayed (:func:`_check`), the OK ones at that shape."""
    result = C.run_configs(cfg, names, reps=3, warmup=1, budget_s=None, settings=[settings])
    by_name = {r["config"]: r for r in result["records"]}
    assert sorted(by_name) == sorted(names)
    for rec in by_name.values():
        _check(rec, mode, fp8_capable)
        if rec["outcome"] == "OK":
            assert rec["settings"] == settings
    return by_name


def test_every_launch_shape_and_mixed_formats_verify(cuda, fp8_capable):
    cfg = _cfg(RNNMode.LSTM, DirectionMode.UNIDIRECTIONAL, 2, seq=12, hidden=128, batch=32)
    names = ["persistent:fp16", "persistent:int8/input", "persistent:int8/recurrent",
             "persistent:e4m3/input"]
    result = C.run_configs(cfg, names, reps=3, warmup=1, budget_s=None)
    for rec in result["records"]:
        _check(rec, RNNMode.LSTM, fp8_capable)
        if rec["outcome"] == "OK":
            tried = {t["settings"]: t for t in rec["settings_tried"]}
            assert set(tried) == {s.name for s in persistent.SETTINGS}
            timed = {n for n, t in tried.items() if t["outcome"] == "OK" and t["ms"]}
            for s in persistent.SETTINGS:  # 'g' not tried exactly where one staged was timed
                if s.gx_global:
                    assert (tried[s.name]["outcome"] == "NOT_TRIED") == bool(
                        timed & {x.name for x in persistent.SETTINGS
                                 if x.bulk and not x.gx_global}), tried
            if rec["config"] == "persistent:fp16" and capability(cuda) == (9, 0):
                # K in one format, an LSTM of one direction: 'e', 'i' and 'q' take it, their
                # twins are skipped
                assert "b2t256u16wbeiq" in timed, tried
                for twin in ("b2t256u16wb", "b2t256u16wbi", "b2t256u16wbiq", "b2t256u16wbe",
                             "b2t256u16wbei"):
                    assert tried[twin]["outcome"] == "NOT_TRIED", tried
            one_format = rec["config"] == "persistent:fp16"
            for name, t in tried.items():
                # wgmma's shapes refuse what they cannot take (a GPU not sm_90, two formats
                # on K), with the reason, before any launch; every other shape verifies, and
                # on sm_90 wgmma's too where K is in one format
                if t["outcome"] == "NOT_TRIED":
                    continue
                if Settings.parse(name).resident:  # one layer only: these have two
                    assert t["outcome"] == "NOT_SUPPORTED" and "one layer" in t["reason"], t
                    continue
                if (Settings.parse(name).wg and t["outcome"] == "NOT_SUPPORTED"
                        and not (one_format and capability(cuda) == (9, 0))):
                    assert re.search("sm_90a code|in one format", t["reason"]), t
                    assert t["ms"] is None, t
                    continue
                assert t["outcome"] == "OK" and t["ms"] > 0, (name, t)


@pytest.mark.parametrize("fmt", model.FORMATS)
def test_the_persistent_kernel_computes_what_the_gemm_engine_computes(cuda, fp8_capable, fmt):
    """The same plan on both engines: identical codes and scales, so their outputs differ
    only by the order of FP32 sums, the persistent kernel's faster gate forms and division
    (kernels.PERSISTENT_PREAMBLE), and the codes those move across a rounding boundary:
    far below the 8-bit error itself."""
    if fmt == "e4m3" and not fp8_capable:
        pytest.skip("FP8 needs compute capability 8.9+")
    cfg = _cfg(RNNMode.GRU, DirectionMode.BIDIRECTIONAL, 2)
    values = C.draw(cfg, seed=5)
    cal, io = values["calibration"], values["io"]
    plan = model.plan(cfg, values["stacked"], model.calibrate(cfg, values["stacked"], **cal),
                      fmt, "both")
    outs = []
    for make in (lambda: GemmEngine(cfg, values["stacked"], "fp16", plan),
                 lambda: PersistentEngine(cfg, values["stacked"], "fp16", plan)):
        with make() as engine:
            engine.set_inputs(io["x"], io["hx"], io["cx"])
            engine.forward()
            outs.append({n: a.get() for n, a in engine.outputs().items()})
    ref = model.forward(cfg, values["stacked"], io["x"], io["hx"], io["cx"], None)[0]
    apart = np.linalg.norm(outs[0]["y"] - outs[1]["y"]) / np.linalg.norm(outs[0]["y"])
    quantized = np.linalg.norm(outs[0]["y"] - ref) / np.linalg.norm(ref)
    print(f"{fmt}: engines apart {apart:.3g}, 8-bit error {quantized:.3g}")
    assert apart < quantized / 5


# (layers, hidden, batch, settings): each of the kernel's product paths, EXACT (every CTA
# fills the tiles, no bound checked) x STRADDLE (one k-group on both parts of K)
PATHS = {(False, False): (2, 64, 16, Settings(ctas=7)),
         (False, True): (2, 64, 32, Settings(ctas=7, threads=64)),
         (True, False): (2, 128, 16, Settings()),
         (True, True): (2, 128, 32, Settings(threads=64))}


@pytest.mark.parametrize("exact,straddle", sorted(PATHS), ids=lambda v: str(int(v)))
@pytest.mark.parametrize("name", ["persistent:fp16", "persistent:int8/input"])
def test_each_product_path_of_the_kernel_verifies(cuda, exact, straddle, name):
    layers, hidden, batch, settings = PATHS[(exact, straddle)]
    cfg = _cfg(RNNMode.GRU, DirectionMode.UNIDIRECTIONAL, layers, hidden=hidden, batch=batch)
    values = C.draw(cfg, seed=4)
    config = C.parse(name)
    plan = twin = None
    if config.fmt:
        cal = values["calibration"]
        plan = model.plan(cfg, values["stacked"],
                          model.calibrate(cfg, values["stacked"], **cal), config.fmt,
                          config.parts)
        twin = C.twins(cuda, cfg, values)(plan)
    ref = C.expected(cuda, cfg, values["stacked"], values["io"])
    with PersistentEngine(cfg, values["stacked"], config.precision, plan, settings) as engine:
        assert (engine.consts["EXACT"], engine.consts["STRADDLE"]) == (exact, straddle)
        facts, wrong = C.verify(cuda, cfg, config, engine, values, ref, twin)
        assert wrong is None, facts


@pytest.mark.parametrize("mode,direction,hidden,names", [
    (RNNMode.LSTM, DirectionMode.UNIDIRECTIONAL, 24, ["persistent:fp16", "persistent:int8/both",
                                                     "persistent:e4m3/both"]),
    (RNNMode.GRU, DirectionMode.BIDIRECTIONAL, 64, ["persistent:bf16", "persistent:e4m3/both",
                                                    "persistent:int8/input"])],
    ids=["LSTM-UNI-H24", "GRU-BID-H64"])
def test_the_polling_kernel_verifies_and_replays(cuda, fp8_capable, mode, direction, hidden,
                                                 names):
    """POLL: no counters, every slot starts as the sentinel and a consumer reads its inputs
    again until none is left; verified and replayed as every candidate, in each format (H 24:
    rows with padding past their codes, which must stay zero)."""
    cfg = _cfg(mode, direction, 2, hidden=hidden)
    result = C.run_configs(cfg, names, reps=3, warmup=1, budget_s=None, settings=["b1t256p"])
    for rec in result["records"]:
        _check(rec, mode, fp8_capable)
        if rec["outcome"] == "OK":
            assert rec["settings"] == "b1t256p"


@pytest.mark.parametrize("mode", list(RNNMode)[:4])
@pytest.mark.parametrize("layers,direction,hidden,batch", [
    (2, DirectionMode.UNIDIRECTIONAL, 512, 64),  # the seed's shape: 2 slabs of fragments
    (1, DirectionMode.BIDIRECTIONAL, 96, 64)])
def test_the_kernel_with_weights_in_registers_verifies_and_replays(cuda, fp8_capable, mode,
                                                                   layers, direction, hidden,
                                                                   batch):
    """AREG (b1t256r): each warp's weight fragments in registers for the whole sequence,
    verified and replayed as every candidate, in 8 bits (where they fit registers)."""
    cfg = _cfg(mode, direction, layers, hidden=hidden, batch=batch, input_size=hidden)
    result = C.run_configs(cfg, ["persistent:int8/both", "persistent:e4m3/both"], reps=3,
                           warmup=1, budget_s=None, settings=["b1t256r"])
    for rec in result["records"]:
        _check(rec, mode, fp8_capable)
        if rec["outcome"] == "OK":  # the kernel that ran kept its fragments in registers
            assert rec["settings"] == "b1t256r" and rec["algorithms"][-1]["register_slabs"] > 0


@pytest.mark.parametrize("settings", ["b2t512u16", "b4t256u32"])
@pytest.mark.parametrize("mode", list(RNNMode), ids=lambda c: c.name)
def test_units_given_a_cta_verify_and_replay_at_the_seeds_shape(cuda, fp8_capable, mode,
                                                                settings):
    """Settings.units (not in the tuner's list until measured): the seed's shape with every
    CTA on 16 units of 32 batch rows, or 32 units of 16, in 8 bits (16-bit weights of 32
    units do not fit), verified and replayed as every candidate."""
    if cuda.cuda.Device().attributes["MultiProcessorCount"] < 128:
        pytest.skip("these shapes take 128 CTAs, one a multiprocessor")
    cfg = _cfg(mode, DirectionMode.UNIDIRECTIONAL, 2, hidden=512, batch=64, input_size=512)
    result = C.run_configs(cfg, ["persistent:int8/both", "persistent:e4m3/both"], reps=3,
                           warmup=1, budget_s=None, settings=[settings])
    for rec in result["records"]:
        _check(rec, mode, fp8_capable)
        if rec["outcome"] == "OK":
            assert rec["settings"] == settings


@pytest.mark.parametrize("mode", [RNNMode.LSTM, RNNMode.GRU])
def test_a_launch_reads_and_writes_the_arrays_bound_to_it(cuda, mode):
    """The states and outputs are launch arguments: bound to the caller's arrays (as
    cudnn_rnn.torch binds PyTorch's tensors), a forward reads that x, h0 (c0) and writes
    there what the same inputs give through its own buffers, which it then leaves alone
    (they hold NaN: a launch that read them would compute NaN, one that wrote them would
    leave numbers)."""
    cfg = _cfg(mode, DirectionMode.BIDIRECTIONAL, 2)
    values = C.draw(cfg, seed=5)
    io = C.draw(cfg, seed=6)["io"]  # other inputs than the engine's own last held
    with PersistentEngine(cfg, values["stacked"], "fp16") as engine:
        engine.set_inputs(io["x"], io["hx"], io["cx"])
        engine.forward()
        want = {n: a.get() for n, a in engine.outputs().items()}
        assert all(np.isfinite(v).all() for v in want.values())
        names = [n for n in ("x", "hx", "cx", "y", "hy", "cy") if getattr(engine, n) is not None]
        own = {n: getattr(engine, n) for n in names}
        with engine.stream:
            for a in own.values():
                a.fill(np.nan)
            mine = {n: cuda.full_like(a, np.nan) for n, a in own.items()}
            for n in ("x", "hx", "cx"):
                if n in mine:
                    mine[n][...] = cuda.asarray(io[n], dtype=cuda.float32)
        engine.bind(None, **mine)
        engine.forward()
        engine.check()
        assert sorted(want) == sorted(n for n in names if n in ("y", "hy", "cy"))
        for n, v in want.items():
            assert (mine[n].get() == v).all(), n
        for n, a in own.items():
            assert np.isnan(a.get()).all(), n


@pytest.mark.parametrize("fmt", ["int8", "e4m3", "fp16", "bf16"])
def test_no_value_rounds_to_the_polling_sentinel(cuda, fp8_capable, fmt):
    """The rounding rules h is written with (kernels.PREAMBLE's, as the quantizer kernel
    runs them, and the persistent kernel's own, kernels.PERSISTENT_PREAMBLE's fast division)
    never make persistent.SENTINEL's code, whatever the value: else a consumer would wait
    for a slot that is written."""
    if fmt == "e4m3" and not fp8_capable:
        pytest.skip("FP8 needs compute capability 8.9+")
    from cudnn_rnn.lowbit import kernels
    nans = np.array([0xFFFFFFFF, 0x7FFFFFFF, 0xFFC00000, 0xFF800001], np.uint32).view(np.float32)
    v = np.concatenate([np.array([np.inf, -np.inf, 0.0, -0.0, 3e38, -3e38], np.float32), nans,
                        np.random.default_rng(0).standard_normal(1 << 16).astype(np.float32)
                        * np.float32(1e3)])
    dtype, expr = kernels.FORMATS[fmt]
    own = cuda.ElementwiseKernel(  # the quantizer with the persistent kernel's rules
        "raw float32 x, float32 s", f"raw {dtype} q", f"const float v = x[i]; q[i] = {expr};",
        f"sentinel_{fmt}", preamble=kernels.PERSISTENT_PREAMBLE)
    for quantize in (kernels.quantizer(fmt), own):
        out = cuda.empty(v.size, dtype)
        quantize(cuda.asarray(v), np.float32(0.5), out, size=v.size)
        codes = out.get().view(np.uint8).reshape(v.size, -1)
        hit = (codes == persistent.SENTINEL[fmt]).all(axis=1)
        if fmt == "bf16":  # only a NaN keeps its sign and top bits (a user's h0 of one
            assert not hit[~np.isnan(v)].any()  # would stall a POLL launch): never a number
        else:
            assert not hit.any(), v[hit]


def test_engines_that_share_one_compiled_kernel_each_launch_with_their_own_shared_memory(cuda):
    """Same constants, different hidden sizes: one CUfunction (CuPy memoizes the module by
    its source), two shared-memory sizes. The larger engine, built first, must still launch
    after the smaller one is built (found by accelerate(), which builds a plan per shape)."""
    big, small = (_cfg(RNNMode.RNN_TANH, DirectionMode.UNIDIRECTIONAL, 1, hidden=h)
                  for h in (256, 64))
    values = {c.hidden_size: C.draw(c, seed=3) for c in (big, small)}
    with PersistentEngine(big, values[256]["stacked"], "fp16") as first, \
            PersistentEngine(small, values[64]["stacked"], "fp16") as second:
        assert first.consts == second.consts and first.part.smem > second.part.smem
        for engine, cfg in ((first, big), (second, small), (first, big)):
            v = values[cfg.hidden_size]
            ref = C.expected(cuda, cfg, v["stacked"], v["io"])
            facts, wrong = C.verify(cuda, cfg, C.parse("persistent:fp16"), engine, v, ref, None)
            assert wrong is None, facts


@pytest.mark.parametrize("fmt,parts", [(None, None), ("int8", "input")])
def test_precompile_compiles_the_kernels_the_engines_of_its_shapes_load(cuda, monkeypatch, fmt,
                                                                        parts):
    cfg = _cfg(RNNMode.LSTM, DirectionMode.UNIDIRECTIONAL, 2)
    values = C.draw(cfg, seed=4)
    plan = None if fmt is None else model.plan(
        cfg, values["stacked"], model.calibrate(cfg, values["stacked"], **values["calibration"]),
        fmt, parts)
    seen = {"precompile": [], "engines": []}
    real = persistent.compiled
    where = "precompile"

    def recording(cp, consts):
        seen[where].append(persistent.source(consts))
        return real(cp, consts)
    monkeypatch.setattr(persistent, "compiled", recording)
    n = persistent.precompile(cuda, cfg, values["stacked"], "fp16", plan, persistent.SETTINGS)
    assert n == len(set(seen["precompile"])) > 1
    where, built = "engines", []  # the shapes the tuner builds, in its order
    for settings in persistent.SETTINGS:
        if persistent.not_tried(settings, built, persistent.SETTINGS):
            continue
        try:  # (the resident kernel's shape, refused for two layers, is not persistent.cu's)
            C.build(cfg, C.parse("persistent:fp16"), values["stacked"], plan, settings).close()
        except Unsupported:
            continue
        built.append(settings)
    assert seen["engines"] and set(seen["engines"]) <= set(seen["precompile"])
    assert any(s.gx_global for s in persistent.SETTINGS) and not any(s.gx_global for s in built)


def test_a_broken_slice_is_caught_by_the_verification(cuda):
    cfg = _cfg(RNNMode.LSTM, DirectionMode.UNIDIRECTIONAL, 2)
    values = C.draw(cfg, seed=2)
    ref = C.expected(cuda, cfg, values["stacked"], values["io"])
    config = C.parse("persistent:fp16")
    with PersistentEngine(cfg, values["stacked"], "fp16") as engine:
        facts, wrong = C.verify(cuda, cfg, config, engine, values, ref, None)
        assert wrong is None, facts
        s = engine.part.slices[len(engine.part.slices) // 2]
        engine.tables["blob"][s.blob:s.blob + s.mpad * s.rowb] = 0  # one CTA's weights
        facts, wrong = C.verify(cuda, cfg, config, engine, values, ref, None)
        assert wrong and "bound" in wrong, facts


def test_a_wait_that_is_never_met_ends_the_launch_and_leaves_nan_not_stale_numbers(cuda):
    """Every CTA gives up at the last step: the launch ends, Stalled, and every output is
    NaN (written by the CTAs that gave up), not the numbers the buffers held before."""
    cfg = _cfg(RNNMode.LSTM, DirectionMode.UNIDIRECTIONAL, 2)
    values = C.draw(cfg, seed=2)
    with PersistentEngine(cfg, values["stacked"], "fp16", spin_limit=1 << 14) as engine:
        engine.set_inputs(values["io"]["x"], values["io"]["hx"], values["io"]["cx"])
        engine.forward()
        engine.check()  # a whole forward first: the buffers hold its (finite) outputs
        assert all(bool(cuda.isfinite(a).all()) for a in engine.buf.values())
        waits = engine.tables["waits"]
        waits[:, -1, 0, 1] += 1  # the last step waits for a step nobody takes
        engine.set_inputs(values["io"]["x"], values["io"]["hx"], values["io"]["cx"])
        engine.forward()
        with pytest.raises(Stalled, match="gave up"):
            engine.outputs()
        assert set(engine.buf) == {"y", "hy", "cy"}
        assert all(bool(cuda.isnan(a).all()) for a in engine.buf.values())


def test_a_polled_piece_that_never_settles_ends_the_launch(cuda):
    """POLL's way to stall: an h0 of a NaN whose BF16 code is the sentinel (0xFFFF) is a
    slot that looks unwritten for ever; the launch gives up, and says so."""
    cfg = _cfg(RNNMode.GRU, DirectionMode.UNIDIRECTIONAL, 1)
    values = C.draw(cfg, seed=2)
    hx = values["io"]["hx"].copy()
    hx.reshape(-1)[0] = np.array([0xFFFFFFFF], np.uint32).view(np.float32)[0]
    with PersistentEngine(cfg, values["stacked"], "bf16", settings=Settings(poll=True),
                          spin_limit=1 << 10) as engine:
        engine.set_inputs(values["io"]["x"], hx, None)
        engine.forward()
        with pytest.raises(Stalled, match="sentinel"):
            engine.outputs()


def test_what_does_not_fit_is_refused_before_any_launch(cuda):
    big = RNNConfig(seq_length=4, num_layers=1, hidden_size=2048, mini_batch=16,
                    mode=RNNMode.LSTM)
    stacked = model.stack(big, reference.random_params(big, np.random.default_rng(0)))
    with pytest.raises(Unsupported, match=r"does not fit .* bytes of shared memory"):
        PersistentEngine(big, stacked, "fp16", settings=Settings(batch_slices=1))


@pytest.mark.timing  # compares times, and its polls gave up twice with other test processes
# on the GPU (H100, -n 8 and, 2026-12-08, -n 6: a barrier's counter 267 arrivals short;
# alone it passed): it runs alone
def test_the_floor_microbenchmark_measures_barrier_and_state_read(cuda):
    from cudnn_rnn.lowbit.barrier import barrier_read
    r = barrier_read([0, 1 << 20], rounds=50, repeats=2)
    alone, read = r["per_round_us"]["0"], r["per_round_us"][str(1 << 20)]
    assert 0.1 < alone < 50 and r["ctas"] == cuda.cuda.Device().attributes["MultiProcessorCount"]
    assert read > alone  # every CTA reading 1 MB from L2 costs more than the barrier alone
    for written in (1, 16, 8):  # fresh slots, each written whole by the CTAs the round before
        # the barrier alone timed again in the same call, beside the read: one launch of
        # every CTA waits for whatever else runs on the GPU (other test processes), so a
        # barrier timed earlier is no baseline (H100, -n 8: the barrier alone 4.15 us
        # first, 64 KB handed on 1.86 us later)
        handed = barrier_read([0, 1 << 16], rounds=50, repeats=5, written=written)
        assert handed["handed_on"] == {str(1 << 16): True}
        assert handed["per_round_us"][str(1 << 16)] > handed["per_round_us"]["0"]
    # a flag a CTA instead of the counter: no poll gave up (a flag never set, or one missed,
    # fails the launch's polls past their limit), the flags hold the rounds done, and every
    # CTA's share is handed on
    flags = barrier_read([1 << 16], rounds=50, repeats=2, written=16, signal="flags")
    assert flags["handed_on"] == {str(1 << 16): True} and flags["met"], flags["not_met"]
    assert r["met"], r["not_met"]  # the counter's launches too: every CTA's 50 rounds counted
    # the state its own signal (no barrier): every word of every slot handed on whole, no
    # poll gave up, the counters untouched
    ll = barrier_read([1 << 12, 1 << 16], rounds=50, repeats=2, written=16, signal="ll")
    assert ll["met"], ll["not_met"]
    assert ll["handed_on"] == {str(1 << 12): True, str(1 << 16): True}
    assert all(0.1 < us < 50 for us in ll["per_round_us"].values())
    # the state read from three allocations of its own, in turn: a median each, the first's
    # the floor's, every launch's polls met
    three = barrier_read([0, 1 << 16], rounds=50, repeats=2, buffers=3)
    assert three["met"], three["not_met"]
    assert three["buffers"] == 3 and set(three["per_buffer_us"]) == {
        "0", str(1 << 16)}
    assert all(len(v) == 3 and all(0.1 < us < 50 for us in v)
               for v in three["per_buffer_us"].values())
    assert three["per_round_us"][str(1 << 16)] == three["per_buffer_us"][str(1 << 16)][0]
    assert "per_buffer_us" not in r
    # reads through a ring of 2 stages of 8 KB, at most 16 KB in flight a CTA: 1 MB takes
    # longer than with all of it in flight (timed in one call, as above)
    ring = barrier_read([1 << 20], rounds=50, repeats=2, depth=2)
    whole = barrier_read([1 << 20], rounds=50, repeats=2)
    assert ring["met"], ring["not_met"]
    assert ring["depth"] == 2 and whole["depth"] == 0
    assert ring["per_round_us"][str(1 << 20)] > whole["per_round_us"][str(1 << 20)]
    for signal in ("counter", "flags", "padded"):  # whole groups of 32 (the seed's), each
        grouped = barrier_read([0], rounds=50, repeats=2, signal=signal, group=32)
        # its own counter at 50 x 32, or flags at 50
        assert grouped["met"], (signal, grouped["not_met"])
        assert grouped["ctas"] == grouped["ctas"] // 32 * 32 > 0
