import numpy as np
import pytest

from cudnn_rnn.bindings.enums import DataType
from cudnn_rnn.engine import dtypes


def test_bfloat16_rounds_to_nearest_even():
    v = np.array([1.0, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, -3.0, 65504.0])
    got = dtypes.quantize(v, DataType.BFLOAT16)
    assert got.tolist() == [1.0, 1.0, 1.0 + 2 ** -6, -3.0, 65536.0]


@pytest.mark.parametrize("dt,maximum", [(DataType.FP8_E4M3, 448.0), (DataType.FP8_E5M2, 57344.0)])
def test_fp8_saturates_and_round_trips(dt, maximum):
    v = np.array([0.0, 1.0, -1.5, 1e6, -1e6])
    got = dtypes.quantize(v, dt)
    assert got.tolist() == [0.0, 1.0, -1.5, maximum, -maximum]
    codes = np.arange(256, dtype=np.uint8)
    vals = dtypes.decode(codes, dt)
    finite = np.isfinite(vals)
    again = dtypes.encode(vals[finite], dt)
    assert np.array_equal(dtypes.decode(again, dt), vals[finite])


def test_poison_reads_as_nan():
    for dt in (DataType.FLOAT, DataType.DOUBLE, DataType.HALF, DataType.BFLOAT16):
        assert np.isnan(dtypes.decode(dtypes.nan_bits(dt), dt)).all()
    assert dtypes.nan_bits(DataType.INT8) is None


def test_no_codec_is_a_type_error():
    with pytest.raises(TypeError):
        dtypes.encode(np.ones(2), DataType.INT8x4)


def _encode_through_float64(values, dt):
    """The encoding as it was defined before the float32 fast path: every value through
    float64 first (bfloat16 rounded in 64-bit integers)."""
    values = np.asarray(values, dtype=np.float64)
    if dt == DataType.BFLOAT16:
        bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
        out = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
        out[np.isnan(values)] = 0x7FC0
        return out
    return values.astype(dtypes.storage_dtype(dt))


@pytest.mark.parametrize("dt", [DataType.FLOAT, DataType.HALF, DataType.BFLOAT16,
                                DataType.DOUBLE], ids=lambda d: d.name)
def test_float32_values_encode_to_the_same_bits_as_through_float64(dt):
    rng = np.random.default_rng(0)
    f32 = np.finfo(np.float32)
    edges = np.array([0.0, -0.0, 1.0, -1.0, f32.max, -f32.max, f32.tiny, f32.tiny / 3,
                      65504.0, 65520.0, 1e-8, 6.1e-5, 5.96e-8, np.inf, -np.inf, np.nan,
                      1.0 + 2.0 ** -8, 1.0 + 2.0 ** -7 + 2.0 ** -8, 1.0 + 2.0 ** -11],
                     dtype=np.float32)
    # every float32 bit pattern's neighbourhood of a bfloat16 tie, and random values
    ties = (np.arange(0, 1 << 16, 7, dtype=np.uint32) << 16 | 0x8000).view(np.float32)
    values = np.concatenate([edges, ties, rng.standard_normal(200_000).astype(np.float32),
                             (rng.random(100_000, dtype=np.float32) - 0.5) * 1e-6])
    with np.errstate(over="ignore", invalid="ignore"):  # the edges overflow on purpose
        got, want = dtypes.encode(values, dt), _encode_through_float64(values, dt)
    assert got.dtype == want.dtype
    nan = np.isnan(values)  # a NaN's payload may differ (float64 quiets it): NaN either way
    with np.errstate(invalid="ignore"):
        assert nan.sum() > 10 and np.isnan(dtypes.decode(got[nan], dt)).all()
    np.testing.assert_array_equal(got[~nan], want[~nan])
