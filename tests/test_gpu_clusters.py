"""The persistent kernel in thread-block clusters on a GPU (marker ``gpu``; sm_90): each
group (pseudo-layer, batch slice) one cluster whose steps meet at the cluster barrier.
Every cell x {uni, bi} x {1, 2, 3 layers} x {FP16, BF16, INT8, E4M3} verified against the
float64 reference and replayed bit for bit, in clusters of 8 and of 16 (non-portable); the
seed's shape in 8 bits; a wait that is never met ends a launch in clusters (its CTAs meet
their cluster's barriers to the end, so the launch ends); more clusters than the GPU holds
at once are refused before any launch."""
import pytest

from cudnn_rnn.bindings.enums import DirectionMode, RNNMode
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.lowbit import candidates as C
from cudnn_rnn.lowbit.engine import Unsupported, capability
from cudnn_rnn.lowbit.persistent import PersistentEngine, Settings, Stalled

from tests.test_gpu_persistent import NAMES, _cfg, _check

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def hopper(cuda):
    if capability(cuda) < (9, 0):
        pytest.skip("thread-block clusters need compute capability 9.0")
    return True


@pytest.fixture(scope="module")
def fp8_capable(cuda):
    return capability(cuda) >= (8, 9)


def _run(cfg, names, settings, fp8_capable, mode):
    result = C.run_configs(cfg, names, reps=3, warmup=1, budget_s=None, settings=[settings])
    by_name = {r["config"]: r for r in result["records"]}
    assert sorted(by_name) == sorted(names)
    for rec in by_name.values():
        _check(rec, mode, fp8_capable)
        if rec["outcome"] == "OK":
            assert rec["settings"] == settings
            launch = rec["algorithms"][-1]
            assert launch["cluster"] == Settings.parse(settings).cluster
            assert launch["grid"] % launch["cluster"] == 0
    return by_name


@pytest.mark.parametrize("layers", [1, 2, 3])
@pytest.mark.parametrize("direction", [DirectionMode.UNIDIRECTIONAL,
                                       DirectionMode.BIDIRECTIONAL], ids=lambda d: d.name[:3])
@pytest.mark.parametrize("mode", list(RNNMode), ids=lambda c: c.name)
def test_every_cell_direction_depth_and_format_verifies_and_replays_in_clusters(
        cuda, hopper, fp8_capable, mode, direction, layers):
    # H 64: 8 units a CTA in clusters of 8, 4 in clusters of 16; 2 batch slices in the
    # first so that one pseudo-layer's groups are more than one cluster
    cfg = _cfg(mode, direction, layers)
    _run(cfg, NAMES, "b2t256k8", fp8_capable, mode)
    _run(cfg, NAMES[2:], "b1t256k16", fp8_capable, mode)


@pytest.mark.parametrize("settings", ["b2t256k16", "b3t256k16"])
@pytest.mark.parametrize("mode", [RNNMode.LSTM, RNNMode.GRU], ids=lambda c: c.name)
def test_the_seed_shape_in_8_bits_verifies_and_replays_in_clusters(cuda, hopper, fp8_capable,
                                                                  mode, settings):
    cfg = RNNConfig(seq_length=20, num_layers=2, hidden_size=512, mini_batch=64,
                    input_size=512, mode=mode)
    _run(cfg, ["persistent:int8/both", "persistent:e4m3/both"], settings, fp8_capable, mode)


@pytest.mark.parametrize("ctas", ["all", "one"])
def test_a_wait_that_is_never_met_ends_a_launch_in_clusters(cuda, hopper, ctas):
    """Every CTA of layer 1's cluster, or one of them, gives up at a middle step: the one
    that gave up meets its cluster's barriers to the end, its cluster-mates give up at the
    next barrier, and the launch ends, Stalled, with NaN where nothing was computed."""
    cfg = _cfg(RNNMode.LSTM, DirectionMode.UNIDIRECTIONAL, 2)
    values = C.draw(cfg, seed=2)
    with PersistentEngine(cfg, values["stacked"], "fp16", settings=Settings.parse("b1t256k8"),
                          spin_limit=1 << 14) as engine:
        waits = engine.tables["waits"]
        top = [i for i, s in enumerate(engine.part.slices) if s.k == 1]
        assert len(top) == 8 and bool((waits[top, :, 0, 0] >= 0).all())  # on layer 0
        step = cfg.seq_length // 2
        chosen = top if ctas == "all" else top[3:4]
        waits[chosen, step, 0, 1] += 1 << 20  # a count layer 0 never reaches
        engine.set_inputs(values["io"]["x"], values["io"]["hx"], values["io"]["cx"])
        engine.forward()
        with pytest.raises(Stalled, match="gave up"):
            engine.outputs()
        # the whole cluster gives up with the CTA that did (its cluster-mates read the status
        # at the next barrier): layer 1's outputs are NaN, layer 0 (which waits for nobody
        # above it) finished
        y, hy, cy = (engine.buf[n] for n in ("y", "hy", "cy"))
        assert bool(cuda.isnan(y).all()) and bool(cuda.isnan(hy[1]).all())
        assert bool(cuda.isnan(cy[1]).all()) and bool(cuda.isfinite(hy[0]).all())


def test_more_clusters_than_the_gpu_holds_are_refused_before_any_launch(cuda, hopper):
    # clusters of 16 CTAs take whole GPCs (an H200 holds 7 such at once, not 132 / 16)
    cfg = RNNConfig(seq_length=4, num_layers=2, hidden_size=256, mini_batch=64,
                    input_size=256, mode=RNNMode.LSTM)
    values = C.draw(cfg, seed=2)
    sms = cuda.cuda.Device().attributes["MultiProcessorCount"]
    slices = sms // 32  # 2 pseudo-layers x 16 CTAs a slice: every multiprocessor's worth
    with pytest.raises(Unsupported, match=r"clusters of 16 CTAs .* runs \d+ at once"):
        PersistentEngine(cfg, values["stacked"], "fp16",
                         settings=Settings(batch_slices=slices, cluster=16))


def test_the_driver_bindings_answer_as_cupy_does_and_raise_the_drivers_own_error(cuda, hopper):
    """The driver's version through the bindings equals CuPy's; a call the driver refuses
    raises the exception generated from its CUresult, with the driver's own text; the cluster
    query answers for a kernel in clusters of 16 once the non-portable size is allowed (an
    H200 holds 7 such clusters at once)."""
    import ctypes

    from cudnn_rnn.bindings import driver
    from cudnn_rnn.lowbit import clusters
    drv = driver.load()
    assert drv.version_raw == cuda.cuda.runtime.driverGetVersion()
    assert drv.source == "system soname" and "libcuda.so" in drv.resolved_path
    kernel = cuda.RawKernel(r'''extern "C" __global__ void __cluster_dims__(16, 1, 1)
        noop(int *p) { if (p) p[0] = 1; }''', "noop")
    kernel.compile()
    with pytest.raises(driver.errors.InvalidValue, match="cuFuncSetAttribute failed") as bad:
        drv.cuFuncSetAttribute(ctypes.cast(kernel.kernel.ptr, driver.types.CUfunction), 9999, 1)
    assert bad.value.reason  # cuGetErrorString's text
    clusters.allow_non_portable(kernel)
    assert clusters.max_active(kernel, 32, 64, 0) >= 2
