"""Calibration methods on distributions whose answer is known independently (CPU)."""
import numpy as np
import pytest

from cudnn_rnn.bindings.enums import RNNMode
from cudnn_rnn.check import reference
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.lowbit import calibration as C
from cudnn_rnn.lowbit import model, quant

RNG = np.random.default_rng(20261203)


def _sample_mse(x, t, fmt):
    """Mean squared quantization error of the samples themselves at threshold t."""
    a = np.abs(x)
    return float(np.mean((a - C.fake_quant(a, t, fmt)) ** 2))


def test_max_is_the_largest_magnitude_and_percentiles_are_quantiles():
    x = RNG.uniform(-1, 1, 400_000)
    h = C.histogram(x)
    assert C.threshold(h, "max", "int8") == np.abs(x).max()
    for name, q in C.PERCENTILES.items():
        # the bin edge at or above the quantile, within one bin of numpy's quantile
        got, want = C.threshold(h, name, "int8"), np.quantile(np.abs(x), q / 100)
        assert want <= got + 1e-12 and got - want <= h.amax / C.BINS


def test_entropy_clips_a_long_tail_that_max_keeps():
    x = np.concatenate([RNG.normal(size=1_000_000), [60.0, -55.0, 58.0]])
    h = C.histogram(x)
    assert C.threshold(h, "max", "int8") == 60.0
    for fmt in ("int8", "e4m3"):
        t = C.threshold(h, "entropy", fmt)
        # the Gaussian body reaches ~5 sigma; the three outliers are not worth the grid
        assert 2.5 < t < 8.0, (fmt, t)


def test_entropy_and_mse_keep_the_whole_range_of_a_uniform_distribution():
    h = C.histogram(RNG.uniform(-1, 1, 1_000_000))
    for method in ("entropy", "mse"):
        assert C.threshold(h, method, "int8") > 0.98 * h.amax, method


@pytest.mark.parametrize("fmt", ["int8", "e4m3"])
def test_mse_finds_the_threshold_a_search_over_the_samples_finds(fmt):
    x = RNG.laplace(size=400_000)
    h = C.histogram(x)
    got = C.threshold(h, "mse", fmt)
    grid = np.linspace(h.amax / 16, h.amax, 200)
    errors = [_sample_mse(x, t, fmt) for t in grid]
    best = grid[int(np.argmin(errors))]
    # the histogram's optimum is as good, on the samples, as the best of the search
    assert _sample_mse(x, got, fmt) <= 1.02 * min(errors)
    if fmt == "int8":  # Laplace with 127 levels a side: the optimum clips, near 10 scales
        assert 8.0 < got < 12.0 and abs(got - best) < 0.08 * best
        assert _sample_mse(x, got, fmt) < 0.9 * _sample_mse(x, h.amax, fmt)


def test_kl_is_zero_where_quantization_changes_nothing():
    counts = np.zeros(C.BINS)
    counts[[0, 1024, 2047]] = [5, 3, 2]
    h = C.Histogram(counts, 1.0)
    # three isolated bins, each its own grid value at the full range: Q equals P
    assert C.kl_divergence(h, C.BINS, "int8") == pytest.approx(0.0, abs=1e-12)
    assert C.kl_divergence(h, 1024, "int8") == np.inf  # the folded 2 counts land in an empty bin
    flat = C.Histogram(np.ones(C.BINS), 1.0)
    folded = C.kl_divergence(flat, 1024, "int8")  # 1025 counts piled into the last bin
    assert np.isfinite(folded) and folded > C.kl_divergence(flat, C.BINS, "int8") + 0.1


def test_thresholds_feed_a_plan_and_saturate_beyond_them():
    cfg = RNNConfig(seq_length=40, num_layers=1, hidden_size=16, mini_batch=64,
                          mode=RNNMode.LSTM, input_size=16)
    stacked = model.stack(cfg, reference.random_params(cfg, np.random.default_rng(1)))
    x = RNG.normal(size=cfg.x_shape())
    hx, cx = np.zeros(cfg.h_shape()), np.zeros(cfg.c_shape())
    hists = C.collect(lambda fn: model.observe(cfg, stacked, x, hx, cx, fn))
    assert hists["projection"] == [None] and hists["input"][0].amax == np.abs(x).max()
    amax = model.calibrate(cfg, stacked, x, hx, cx)
    assert C.thresholds(hists, "max", "int8") == amax
    clipped = C.thresholds(hists, "p99.9", "int8")
    assert clipped["input"][0] < amax["input"][0]
    plan = model.plan(cfg, stacked, clipped, "int8", "both", channel=True)
    assert plan.input[0].act == pytest.approx(clipped["input"][0] / quant.INT8_MAX)
    # per-channel E4M3 weights: one scale per row, each row's max maps to 448
    p8 = model.plan(cfg, stacked, clipped, "e4m3", "both", channel=True)
    w = stacked[0].W
    assert p8.input[0].weight.shape == (w.shape[0],)
    np.testing.assert_allclose(p8.input[0].weight, np.abs(w).max(axis=1) / quant.E4M3_MAX)
    assert np.ndim(model.plan(cfg, stacked, clipped, "e4m3", "both").input[0].weight) == 0


def test_bad_values_and_names_are_refused():
    with pytest.raises(ValueError, match="NaN or infinity"):
        C.histogram(np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match="no values"):
        C.histogram(np.array([]))
    h = C.histogram(np.ones(4))
    with pytest.raises(ValueError, match="unknown calibration method"):
        C.threshold(h, "median", "int8")
    with pytest.raises(ValueError, match="unknown format"):
        C.threshold(h, "max", "int4")
    assert C.threshold(C.histogram(np.zeros(3)), "entropy", "int8") == 0.0
