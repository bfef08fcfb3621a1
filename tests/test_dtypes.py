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
