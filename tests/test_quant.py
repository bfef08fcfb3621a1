"""cudnn_rnn.lowbit.quant against independent computations: the E4M3 bit fields by the
textbook formula, a brute-force nearest-value encoder, exact integer arithmetic."""
import math

import numpy as np
import pytest

from cudnn_rnn.lowbit import quant as Q

CODES = np.arange(256, dtype=np.uint8)


def _textbook(code: int) -> float:
    s, e, m = code >> 7, (code >> 3) & 0xF, code & 0x7
    if e == 0xF and m == 0x7:
        return math.nan
    mag = 2.0 ** -6 * m / 8 if e == 0 else 2.0 ** (e - 7) * (1 + m / 8)
    return -mag if s else mag


TEXTBOOK = np.array([_textbook(c) for c in range(256)])
POS = TEXTBOOK[:0x7F]  # magnitude codes 0..126, increasing


def _brute_encode(x, saturate=True):
    """The nearest finite magnitude code (ties: the even code), searched over all 127."""
    x = np.asarray(x, dtype=np.float64)
    d = np.abs(np.abs(x)[:, None] - POS[None, :])
    best = d.min(axis=1, keepdims=True)
    tied = d == best
    # among the (at most two, adjacent) nearest codes take the even one
    even = tied & (np.arange(0x7F) % 2 == 0)
    mag = np.where(even.any(axis=1), even.argmax(axis=1), tied.argmax(axis=1))
    if not saturate:
        mag = np.where(np.abs(x) > 464.0, 0x7F, mag)
    return (mag | (np.signbit(x) << 7)).astype(np.uint8)


# ---------------------------------------------------------------- FP8 E4M3

def test_decode_matches_the_bit_fields():
    got = Q.decode_e4m3(CODES)
    assert got.dtype == np.float32
    assert np.array_equal(got.astype(np.float64), TEXTBOOK, equal_nan=True)
    assert np.flatnonzero(np.isnan(got)).tolist() == [0x7F, 0xFF]
    assert np.signbit(got[0x80]) and not np.signbit(got[0x00])
    assert np.nanmax(got) == 448.0 == Q.E4M3_MAX and np.nanmin(got) == -448.0
    assert got[got > 0].min() == 2.0 ** -9


def test_every_code_round_trips():
    finite = CODES[~np.isnan(TEXTBOOK)]
    assert finite.size == 254
    for saturate in (True, False):
        assert np.array_equal(Q.encode_e4m3(Q.decode_e4m3(finite), saturate), finite)
    assert Q.encode_e4m3(np.array([0.0, -0.0])).tolist() == [0x00, 0x80]


def test_midpoints_tie_to_even_and_a_hair_off_goes_to_the_nearest():
    lo, hi = np.arange(0x7E), np.arange(1, 0x7F)
    mid = (POS[lo] + POS[hi]) / 2  # exact in float64
    assert np.array_equal((mid - POS[lo]), (POS[hi] - mid))
    even = np.where(lo % 2 == 0, lo, hi)
    for sign in (1.0, -1.0):
        s = 0x80 if sign < 0 else 0
        assert np.array_equal(Q.encode_e4m3(sign * mid), even | s)
        assert np.array_equal(Q.encode_e4m3(sign * np.nextafter(mid, np.inf)), hi | s)
        assert np.array_equal(Q.encode_e4m3(sign * np.nextafter(mid, -np.inf)), lo | s)
        up32 = np.nextafter(mid.astype(np.float32), np.float32(np.inf))  # float32 inputs too
        assert np.array_equal(Q.encode_e4m3(sign * up32), hi | s)


def test_random_float32_encode_to_a_nearest_value():
    rng = np.random.default_rng(14)
    mag = np.exp2(rng.uniform(-12, 10, 100_000))
    x = (mag * rng.choice([-1.0, 1.0], mag.size)).astype(np.float32)
    mid = ((POS[:-1] + POS[1:]) / 2).astype(np.float32)  # float32-exact ties
    x = np.concatenate([x, mid, -mid, np.float32([464.0, 465.0, -470.0, 2.0 ** -10])])
    for saturate in (True, False):
        got = Q.encode_e4m3(x, saturate)
        for i in range(0, x.size, 10_000):
            assert np.array_equal(got[i:i + 10_000], _brute_encode(x[i:i + 10_000], saturate))
    # the property itself: no finite value is nearer than the chosen one
    got = Q.decode_e4m3(Q.encode_e4m3(x[:20_000])).astype(np.float64)
    x64 = np.clip(x[:20_000].astype(np.float64), -448, 448)
    nearest = np.abs(x64[:, None] - TEXTBOOK[~np.isnan(TEXTBOOK)][None, :]).min(axis=1)
    assert np.array_equal(np.abs(x64 - got), nearest)


def test_saturation_and_nan():
    big = np.array([449.0, 464.0, 1e6, np.inf])
    assert Q.encode_e4m3(big).tolist() == [0x7E] * 4
    assert Q.encode_e4m3(-big).tolist() == [0xFE] * 4
    # without saturation, 464 still ties down to 448 (even mantissa); beyond it NaN
    edge = np.array([449.0, 464.0, np.nextafter(464.0, np.inf), 480.0, 1e6, np.inf])
    assert Q.encode_e4m3(edge, saturate=False).tolist() == [0x7E, 0x7E, 0x7F, 0x7F, 0x7F, 0x7F]
    assert Q.encode_e4m3(-edge, saturate=False).tolist() == [0xFE, 0xFE, 0xFF, 0xFF, 0xFF, 0xFF]
    for saturate in (True, False):
        assert Q.encode_e4m3(np.array([np.nan, -np.nan]), saturate).tolist() == [0x7F, 0x7F]
    # below half the smallest subnormal: zero with the sign; at it, the tie goes to 0
    assert Q.encode_e4m3(np.array([2.0 ** -10, -2.0 ** -10, -1e-30])).tolist() == [0, 0x80, 0x80]


def test_ml_dtypes_agrees():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(5)
    x = (np.exp2(rng.uniform(-12, 10, 50_000)) * rng.choice([-1, 1], 50_000)).astype(np.float32)
    x = np.concatenate([x, np.float32([464, 465, -464, -465, np.inf, -np.inf])])
    theirs = x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)  # overflow: NaN, as saturate=False
    assert np.array_equal(Q.encode_e4m3(x, saturate=False), theirs)
    assert np.array_equal(Q.decode_e4m3(CODES), CODES.view(ml_dtypes.float8_e4m3fn)
                          .astype(np.float32), equal_nan=True)


def test_e4m3_scale_and_fake_quant():
    assert Q.e4m3_scale(896.0) == 2.0 and Q.e4m3_scale(0.0) == 1.0
    for bad in (-1.0, np.nan, np.inf):
        with pytest.raises(ValueError):
            Q.e4m3_scale(bad)
    rng = np.random.default_rng(3)
    x = rng.standard_normal(10_000) * 7
    s = Q.e4m3_scale(Q.amax(x))
    fq = Q.fake_quant_e4m3(x, s)
    assert fq.dtype == np.float64 and math.isclose(np.abs(fq).max(), np.abs(x).max())
    assert np.array_equal(fq, TEXTBOOK[_brute_encode(x / s)] * s)
    normal = np.abs(x / s) >= 2.0 ** -6
    assert (np.abs(fq - x)[normal] <= 2.0 ** -4 * np.abs(x)[normal]).all()  # 3 mantissa bits
    assert np.array_equal(Q.dequantize_e4m3(Q.quantize_e4m3(x, s), s), fq)


# ---------------------------------------------------------------- INT8

def test_int8_rounds_half_to_even_and_clips_symmetrically():
    s = 0.25  # x / s exact
    x = s * np.array([2.5, 3.5, -2.5, 0.5, -0.5, 1.5, 126.5, -126.5, 127.4, -127.6, 200, -1e9])
    assert Q.quantize_int8(x, s).tolist() == [2, 4, -2, 0, 0, 2, 126, -126, 127, -127, 127, -127]
    q = Q.quantize_int8(np.array([np.inf, -np.inf]), 1.0)
    assert q.dtype == np.int8 and q.tolist() == [127, -127]
    wide = np.random.default_rng(1).uniform(-1e4, 1e4, 10_000)
    assert Q.quantize_int8(wide, 1.0).min() == -127
    with pytest.raises(ValueError):
        Q.quantize_int8(np.array([1.0, np.nan]), 1.0)
    for bad in (0.0, -1.0, np.nan):
        with pytest.raises(ValueError):
            Q.quantize_int8(np.ones(2), bad)


def test_per_channel_scales_map_each_row_max_to_127():
    rng = np.random.default_rng(2)
    w = rng.standard_normal((6, 40)) * np.array([1e-3, 0.1, 1, 10, 1e3, 0])[:, None]
    a = Q.amax(w, axis=0)
    assert a.shape == (6, 1) and np.array_equal(a.ravel(), np.abs(w).max(axis=1))
    s = Q.int8_scale(a)
    assert np.array_equal(s.ravel()[:5], a.ravel()[:5] / 127) and s.ravel()[5] == 1.0
    q = Q.quantize_int8(w, s)
    rows = np.arange(5)
    at = np.abs(w[:5]).argmax(axis=1)
    assert np.array_equal(q[rows, at], 127 * np.sign(w[rows, at]).astype(np.int8))
    assert (np.abs(q[:5]).max(axis=1) == 127).all() and not q[5].any()
    assert Q.amax(rng.standard_normal((3, 4, 5)), axis=1).shape == (1, 4, 1)


def test_int8_scale_zero_and_invalid():
    assert Q.int8_scale(254.0) == 2.0
    assert Q.int8_scale(0.0) == 1.0
    z = np.zeros((3, 4))
    assert Q.amax(z) == 0 and not Q.quantize_int8(z, Q.int8_scale(Q.amax(z))).any()
    for bad in (-1.0, np.nan, np.inf, np.array([1.0, -2.0])):
        with pytest.raises(ValueError):
            Q.int8_scale(bad)
    with pytest.raises(ValueError):
        Q.amax(np.array([1.0, np.nan]))


def test_fake_quant_int8_error_is_at_most_half_a_step():
    x = np.random.default_rng(4).uniform(-3, 3, 100_000)
    s = Q.int8_scale(Q.amax(x))
    fq = Q.fake_quant_int8(x, s)
    assert fq.dtype == np.float64
    assert np.abs(fq - x).max() <= s / 2 * (1 + 1e-12)
    assert np.array_equal(fq, Q.dequantize_int8(Q.quantize_int8(x, s), s))


def test_gemm_int32_is_the_exact_product():
    rng = np.random.default_rng(6)
    a = rng.integers(-127, 128, (5, 300)).astype(np.int8)
    b = rng.integers(-127, 128, (300, 7)).astype(np.int8)
    c = Q.gemm_int32(a, b)
    assert c.dtype == np.int32
    assert np.array_equal(c.astype(np.float64), a.astype(np.float64) @ b.astype(np.float64))
    with pytest.raises(TypeError):
        Q.gemm_int32(a.astype(np.int16), b)


def test_the_overflow_bound():
    k = Q.INT8_GEMM_SAFE_K
    assert 127 * 127 * k <= 2 ** 31 - 1 < 127 * 127 * (k + 1)  # so k is the largest safe K
    assert k >= 133143
    full = np.full((1, k), 127, np.int8)
    assert Q.gemm_int32(full, full.T).item() == 127 * 127 * k
    assert Q.gemm_int32(-full, full.T).item() == -127 * 127 * k
    over = np.full((1, k + 1), 127, np.int8)
    for sign in (1, -1):
        with pytest.raises(OverflowError):
            Q.gemm_int32(sign * over, over.T)
