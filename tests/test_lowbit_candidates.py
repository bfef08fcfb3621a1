"""One candidate of the GEMM engine, verified, captured and timed (lowbit.candidates.run_one)
without a GPU: the engine is replaced, where run_one builds it, by its arithmetic on the
host (tests/host_twin.HostEngine); the records, bounds, verification and capture check
are the real ones. The engine on the GPU is tests/test_gpu_lowbit.py's."""
import numpy as np
import pytest

from cudnn_rnn.bindings.enums import DirectionMode, RNNInputMode, RNNMode
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.lowbit import candidates as C
from cudnn_rnn.lowbit import configs as K
from cudnn_rnn.lowbit import model, persistent

from .host_twin import HOST_CUPY, HostEngine

CFG = RNNConfig(seq_length=5, num_layers=2, hidden_size=16, mini_batch=4, input_size=8,
                mode=RNNMode.LSTM, direction=DirectionMode.BIDIRECTIONAL)


def _inputs(cfg, seed=2):
    """run_one's arguments but the configuration: values, calibration, the reference."""
    values = C.draw(cfg, seed)
    cal = values["calibration"]
    amaxes = model.calibrate(cfg, values["stacked"], cal["x"], cal["hx"], cal["cx"])
    return values, amaxes, C.expected(HOST_CUPY, cfg, values["stacked"], values["io"])


@pytest.fixture(scope="module")
def inputs():
    return _inputs(CFG)


@pytest.fixture
def engines(monkeypatch):
    """Every engine run_one builds is ``HostEngine`` (or the class a test sets), kept here."""
    built = []

    def install(cls=HostEngine):
        def build(*args, **kw):
            built.append(cls(*args, **kw))
            return built[-1]

        def build_persistent(cfg, stacked, precision, plan=None, settings=None):
            return build(cfg, stacked, precision, plan)  # one launch shape is another's twin
        monkeypatch.setattr(C, "GemmEngine", build)
        monkeypatch.setattr(C, "PersistentEngine", build_persistent)
        monkeypatch.setattr(C, "ResidentEngine", build_persistent)  # (the resident kernel's)
        # the twin compiles no kernel: what a candidate asked to compile is kept
        monkeypatch.setattr(C, "precompile", lambda cp, cfg, stacked, precision, plan, shapes:
                            install.precompiled.append((precision, tuple(shapes))) or 0)
        return built
    install.precompiled = []
    return install


def _run(cfg, name, inputs, graphs=True):
    values, amaxes, ref = inputs
    return C.run_one(HOST_CUPY, cfg, K.parse(name), values, amaxes, ref, reps=3, warmup=1,
                     budget_s=None, graphs=graphs)


def test_errors_are_relative_norms_of_the_outputs_the_reference_has():
    rng = np.random.default_rng(0)
    ref = {"y": rng.standard_normal((3, 2, 4)), "hy": rng.standard_normal((2, 2, 4)),
           "cy": None}
    out = {"y": ref["y"] * 1.01, "hy": ref["hy"] + 0.1, "cy": np.ones(1)}
    got = C.errors(out, ref)
    assert set(got) == {"y", "hy"}
    assert got["y"] == pytest.approx(0.01, rel=1e-9)
    assert got["hy"] == pytest.approx(0.1 * np.sqrt(16) / np.linalg.norm(ref["hy"]), rel=1e-9)
    assert C.errors(ref, ref) == {"y": 0.0, "hy": 0.0}


@pytest.mark.parametrize("name", [c.name for c in K.FAMILIES["any"]])
def test_a_faithful_engine_verifies_twice_and_is_timed_plain_and_replayed(engines, inputs,
                                                                          name):
    built = engines()
    rec = _run(CFG, name, inputs)
    assert rec["outcome"] == "OK", rec.get("reason")
    assert rec["id"] == f"lowbit/{name}" and rec["bound"] == K.parse(name).bound
    if K.parse(name).engine == "persistent":  # every launch shape verified, the fastest kept
        assert rec["settings"] in {t["settings"] for t in rec["settings_tried"]}
        # but 'g', once a shape with the input projection staged has verified; 'wb', 'wbi',
        # 'wbiq' and 'wbe' once their 'e' and 'i' twin's 'q' twin has (this cell is an LSTM
        # of one direction); 'wbeis2' and 'wbei' once their 'q' twins have
        tried = {t["settings"]: t for t in rec["settings_tried"]}
        assert list(tried) == [s.name for s in persistent.SETTINGS]
        skipped = {s.name for s in persistent.SETTINGS if s.gx_global} | {
            "b2t256u16wb", "b2t256u16wbi", "b2t256u16wbiq", "b2t256u16wbe", "b2t256u16wbes2",
            "b1t256u16wbes2", "b2t256u16wbeis2", "b2t256u16wbei"}
        for s in persistent.SETTINGS:
            assert tried[s.name]["outcome"] == ("NOT_TRIED" if s.name in skipped else "OK")
        assert "b2t256u16wbeiqs2 verified" in tried["b1t256u16wbg"]["reason"]  # the first
        assert "('e', faster" in tried["b2t256u16wb"]["reason"]
        assert "b2t256u16wbeiq verified, its gate math" in tried["b2t256u16wbiq"]["reason"]
        assert "('i', faster" in tried["b2t256u16wbe"]["reason"]
        assert "('q', faster" in tried["b2t256u16wbei"]["reason"]
        assert "b2t256u16wbeiq verified, copies of 4" in tried["b2t256u16wbes2"]["reason"]
        assert "wbeiqs2 verified, bulk staging of two" in tried["b1t256u16wbes2"]["reason"]
        # their kernels compiled side by side first, once
        assert engines.precompiled == [(K.parse(name).precision, tuple(persistent.SETTINGS))]
    else:
        assert engines.precompiled == []
    if rec["format"]:  # and the quantized twin is nearer than the unquantized reference
        assert all(rec["errors_twin"][n] < rec["errors"][n] for n in rec["errors_twin"])
    for errors in (rec["errors"], rec["errors_seen"]):
        assert set(errors) == {"y", "hy", "cy"}
        assert 0 < max(errors.values()) <= rec["bound"]
    if rec["format"]:  # the 8-bit rounding shows (an engine that skipped it would be tighter)
        assert max(rec["errors"].values()) > 1e-4
    assert rec["graph_timings"]["forward_inference"]["reps"] == 3
    assert rec["timings"]["forward_inference"]["median_ms"] > 0
    assert "graph_refused" not in rec and built[-1].closed


def _persistent_twin(monkeypatch, refused=(), uncaptured=()):
    """run_one's persistent engines as the host twin (after ``engines()``), refusing the
    launch shapes ``refused`` at build as a GPU without room would, and refusing a graph
    capture of those ``uncaptured`` (they verify, and are not timed)."""
    from cudnn_rnn.engine import capture
    from cudnn_rnn.lowbit.engine import Unsupported
    twin, captured = C.PersistentEngine, capture.time_captured

    def build(cfg, stacked, precision, plan=None, settings=None):
        if settings.name in refused:
            raise Unsupported(f"{settings.name}: does not fit on this GPU")
        engine = twin(cfg, stacked, precision, plan, settings)
        engine.uncaptured = settings.name in uncaptured
        return engine

    def time_captured(flow, *args, **kw):
        if getattr(flow, "uncaptured", False):
            raise capture.CaptureRefused("its replay differs from its plain call")
        return captured(flow, *args, **kw)
    monkeypatch.setattr(C, "PersistentEngine", build)
    monkeypatch.setattr(C, "ResidentEngine", build)
    monkeypatch.setattr(C.capture, "time_captured", time_captured)


def test_where_no_bulk_staged_shape_verifies_the_g_shapes_are_tried(engines, inputs,
                                                                     monkeypatch):
    """'g' is the tuner's fallback: where the bulk shapes with the projection staged are
    refused, both 'g' shapes with 'e' are built, verified and timed like every other shape
    (and their twins without 'e' are not tried)."""
    engines()
    staged = {s.name for s in persistent.SETTINGS if s.bulk and not s.gx_global}
    _persistent_twin(monkeypatch, refused=staged)
    rec = _run(CFG, "persistent:fp16", inputs)
    assert rec["outcome"] == "OK", rec.get("reason")
    tried = {t["settings"]: t for t in rec["settings_tried"]}
    for name in staged:
        assert tried[name]["outcome"] == "NOT_SUPPORTED"
        assert "does not fit" in tried[name]["reason"]
    for s in persistent.SETTINGS:
        if s.gx_global and not s.reg_gates:
            assert tried[s.name]["outcome"] == "NOT_TRIED", tried[s.name]
        elif s.name not in staged:
            assert tried[s.name]["outcome"] == "OK" and tried[s.name]["ms"] > 0, tried[s.name]


def test_a_bulk_staged_shape_verified_but_not_timed_does_not_stand_for_one_timed(
        engines, inputs, monkeypatch):
    """A shape whose graph capture was refused verified but has no time to rank: it does
    not keep 'g' from being tried, and where nothing else could be timed the candidate is
    not reported as 'NOT_TRIED'."""
    engines()
    staged = {s.name for s in persistent.SETTINGS if s.bulk and not s.gx_global}
    _persistent_twin(monkeypatch, uncaptured=staged)
    rec = _run(CFG, "persistent:fp16", inputs)
    tried = {t["settings"]: t for t in rec["settings_tried"]}
    for name in staged:  # ('wbei' untimed does not stand for a timed one: its twins tried)
        assert tried[name]["outcome"] == "OK" and tried[name]["ms"] is None
    assert all(tried[s.name]["outcome"] == "OK" for s in persistent.SETTINGS
               if s.gx_global and s.reg_gates)
    assert rec["outcome"] == "OK" and rec["settings"] not in staged
    # every shape verified, none timed (every capture refused): none is left untried, and
    # the first is kept, its plain calls timed and why it has no replays said
    _persistent_twin(monkeypatch, uncaptured={s.name for s in persistent.SETTINGS})
    rec = _run(CFG, "persistent:fp16", inputs)
    assert {t["outcome"] for t in rec["settings_tried"]} == {"OK"}
    assert rec["outcome"] == "OK" and rec["settings"] == persistent.SETTINGS[0].name
    assert rec["timings"]["forward_inference"]["median_ms"] > 0
    assert "graph_timings" not in rec and "replay differs" in rec["graph_refused"][
        "forward_inference"]


class NoBias(HostEngine):
    """An engine that forgets the biases."""

    def __init__(self, cfg, stacked, *args, **kw):
        super().__init__(cfg, stacked, *args, **kw)
        self.weights = [model.Stacked(s.W, s.R, 0 * s.bW, 0 * s.bR, s.P) for s in self.weights]


class Silent(HostEngine):
    """An engine whose forward writes nothing."""

    def compute(self):
        pass


@pytest.mark.parametrize("engine, name", [(NoBias, "fp16"), (NoBias, "int8/both"),
                                          (Silent, "fp32")])
def test_an_engine_that_computes_wrongly_is_a_wrong_result_and_not_timed(engines, inputs,
                                                                        engine, name):
    built = engines(engine)
    rec = _run(CFG, name, inputs)
    assert rec["outcome"] == "WRONG_RESULT" and "> bound" in rec["reason"]
    assert max(rec["errors"].values()) > rec["bound"]
    assert "timings" not in rec and "graph_timings" not in rec and built[-1].closed


def test_a_configuration_the_engine_does_not_build_is_refused_at_build(engines):
    engines()
    cfg = CFG.replace(input_mode=RNNInputMode.SKIP_INPUT, input_size=16)
    rec = _run(cfg, "fp16", _inputs(cfg))
    assert (rec["outcome"], rec["failed_stage"], rec["status"]) == (
        "NOT_SUPPORTED", "build", "NOT_SUPPORTED")
    assert "SKIP_INPUT" in rec["reason"]


def test_without_graphs_only_plain_calls_are_timed(engines, inputs):
    engines()
    rec = _run(CFG, "int8/recurrent", inputs, graphs=False)
    assert rec["outcome"] == "OK" and "graph_timings" not in rec and "graph_refused" not in rec


class StallsWhenTimed(HostEngine):
    """A persistent engine whose last build (the one verified and timed, after a build per
    launch shape) verifies, then gives up a wait once timed: its status set and its outputs
    NaN, whose bytes a replay matches."""

    built = 0

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        type(self).built += 1
        tried = []  # the tuner's walk, each shape it builds verifying and timed here
        for s in persistent.SETTINGS:
            if not persistent.not_tried(s, tried, persistent.SETTINGS, CFG):
                tried.append(s)
        self.last = type(self).built == len(tried) + 1
        self.forwards, self.stalled = 0, False

    def forward(self):
        self.forwards += 1
        self.stalled = self.last and self.forwards > 1  # after its verifying forward
        super().forward()

    def compute(self):
        super().compute()
        if self.stalled:
            for a in self.buf.values():
                a[...] = np.nan

    def check(self):
        if self.stalled:
            raise persistent.Stalled("a wait of the persistent kernel gave up")


def test_a_persistent_engine_that_stalls_while_timed_is_no_measurement(engines, inputs):
    """Verified, then stalled while timed: the record says STALLED and keeps no times (a
    NaN replay matches a NaN plain call, so only the status can tell)."""
    StallsWhenTimed.built = 0
    engines(StallsWhenTimed)
    rec = _run(CFG, "persistent:fp16", inputs)
    assert (rec["outcome"], rec["status"], rec["failed_call"]) == (
        "ERROR", "STALLED", "persistent_rnn")
    assert not {"timings", "graph_timings", "graph_refused"} & set(rec)


def test_a_launch_shape_the_driver_refuses_is_a_refusal_of_that_shape():
    """cuOccupancyMaxActiveClusters refusing a cluster's size (the real error class of the
    driver mirror): the shape's record says so (NOT_SUPPORTED, the call, the driver's
    status), and the other shapes go on, where it ended the whole candidate's job."""
    from cudnn_rnn.bindings.driver import errors as driver
    exc = driver.error_for("cuOccupancyMaxActiveClusters", 912, "cluster of 32 CTAs")
    facts = C.failure(exc, HOST_CUPY, "build")
    assert facts == {"outcome": "NOT_SUPPORTED", "failed_stage": "build",
                     "failed_call": "cuOccupancyMaxActiveClusters",
                     "status": "ERROR_INVALID_CLUSTER_SIZE", "reason": str(exc)}
    assert C.failure(KeyError("a bug"), HOST_CUPY, "build") is None  # a bug stays one
