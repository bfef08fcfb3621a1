"""Host encodings of cuDNN data types: element size, and float64 ⇄ raw bits.

NumPy has no bfloat16 or FP8, so those are encoded by hand (round to nearest
even for bfloat16; nearest representable value, saturating, for FP8). Integer
types are rounded and clipped. ``quantize`` returns what the device will
really hold, as float64, so the reference sees the same inputs as cuDNN.
"""
from __future__ import annotations

import numpy as np

from cudnn_rnn.bindings.enums import DataType

_NUMPY = {
    DataType.FLOAT: np.float32, DataType.DOUBLE: np.float64, DataType.HALF: np.float16,
    DataType.INT8: np.int8, DataType.UINT8: np.uint8, DataType.INT32: np.int32,
    DataType.INT64: np.int64, DataType.UINT32: np.uint32, DataType.BOOLEAN: np.uint8,
}


class NoHostEncoding(TypeError):
    """This data type has no host encoding here (INT8x4, complex types, ...): its values
    cannot be drawn or read back, so a flow stops at the stage that needed them."""


_STORAGE = {DataType.BFLOAT16: np.uint16, DataType.FP8_E4M3: np.uint8, DataType.FP8_E5M2: np.uint8}

# Element sizes in bytes for every data type an RNN descriptor might be asked about.
ITEMSIZE = {dt: np.dtype(t).itemsize for dt, t in {**_NUMPY, **_STORAGE}.items()}
ITEMSIZE.update({DataType.INT8x4: 4, DataType.UINT8x4: 4, DataType.INT8x32: 32,
                 DataType.FAST_FLOAT_FOR_FP8: 4, DataType.FP8_E8M0: 1, DataType.FP8_E5M3: 1,
                 DataType.COMPLEX_FP32: 8, DataType.COMPLEX_FP64: 16,
                 DataType.BYTE_BOOLEAN: 1})


def _fp8_table(exp_bits: int, man_bits: int, bias: int, e4m3: bool) -> np.ndarray:
    """float64 value of every FP8 code 0..255 (NaN for NaN codes, no infinities kept)."""
    values = np.empty(256)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        e = (code >> man_bits) & ((1 << exp_bits) - 1)
        m = code & ((1 << man_bits) - 1)
        if e4m3 and e == 0xF and m == 0x7:
            values[code] = np.nan
            continue
        if not e4m3 and e == 0x1F:
            values[code] = np.nan  # inf/nan codes: never produced by encode
            continue
        if e == 0:
            values[code] = sign * (m / (1 << man_bits)) * 2.0 ** (1 - bias)
        else:
            values[code] = sign * (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)
    return values


_FP8 = {DataType.FP8_E4M3: _fp8_table(4, 3, 7, True), DataType.FP8_E5M2: _fp8_table(5, 2, 15, False)}


def itemsize(dt: DataType) -> int:
    """Bytes per element of ``dt``; :class:`NoHostEncoding` for sub-byte types."""
    try:
        return ITEMSIZE[dt]
    except KeyError:
        raise NoHostEncoding(f"no host encoding for CUDNN_DATA_{dt.name} "
                             "(less than a byte per element)") from None


def storage_dtype(dt: DataType) -> np.dtype:
    if dt in _NUMPY:
        return np.dtype(_NUMPY[dt])
    if dt in _STORAGE:
        return np.dtype(_STORAGE[dt])
    raise NoHostEncoding(f"no host encoding for CUDNN_DATA_{dt.name}")


def encode(values: np.ndarray, dt: DataType) -> np.ndarray:
    """float values → the bits the device stores for ``dt``. float32 values (what the random
    init draws) go to FLOAT, HALF, DOUBLE and BFLOAT16 without a float64 copy: each is
    exactly a float64 too, so the bits are the same, in a fraction of the time. A cupy
    array is encoded on the GPU (these four types; any other through the host)."""
    if type(values).__module__.split(".")[0] == "cupy":
        import cupy  # here, not at the top: already imported wherever a cupy array exists
        if dt not in (DataType.FLOAT, DataType.DOUBLE, DataType.HALF, DataType.BFLOAT16):
            return cupy.asarray(encode(cupy.asnumpy(values), dt))
        return _encode_float(values, dt, cupy)
    values = np.asarray(values)
    fast = values.dtype == np.float32 and dt in (DataType.FLOAT, DataType.DOUBLE,
                                                 DataType.HALF, DataType.BFLOAT16)
    if not fast:
        values = values.astype(np.float64, copy=False)
    if dt in (DataType.FLOAT, DataType.DOUBLE, DataType.HALF, DataType.BFLOAT16):
        return _encode_float(values, dt, np)
    if dt in _NUMPY:
        info = np.iinfo(_NUMPY[dt])
        return np.clip(np.rint(values), info.min, info.max).astype(_NUMPY[dt])
    if dt in _FP8:
        table = _FP8[dt]
        finite = np.where(np.isfinite(table), table, np.inf)
        order = np.argsort(finite)
        sorted_vals = finite[order]
        n_finite = int(np.isfinite(sorted_vals).sum())
        sorted_vals, order = sorted_vals[:n_finite], order[:n_finite]
        idx = np.clip(np.searchsorted(sorted_vals, values), 1, n_finite - 1)
        lower, upper = sorted_vals[idx - 1], sorted_vals[idx]
        pick = np.where(np.abs(values - lower) <= np.abs(upper - values), idx - 1, idx)
        return order[pick].astype(np.uint8)
    raise NoHostEncoding(f"no host encoding for CUDNN_DATA_{dt.name}")


def _encode_float(values, dt: DataType, xp):
    """FLOAT, DOUBLE and HALF by a cast; BFLOAT16 rounded to nearest even on the upper 16
    bits of float32 (only NaN bit patterns, 0xFFFF8000 and up, can wrap in uint32, and NaN
    is set afterwards)."""
    if dt != DataType.BFLOAT16:
        return values.astype(_NUMPY[dt])
    bits = values.astype(xp.float32, copy=False).view(xp.uint32)
    rounded = bits + xp.uint32(0x7FFF) + ((bits >> xp.uint32(16)) & xp.uint32(1))
    out = (rounded >> xp.uint32(16)).astype(xp.uint16)
    return xp.where(xp.isnan(values), xp.uint16(0x7FC0), out)  # no mask sync on a GPU


def decode(bits, dt: DataType):
    """Stored bits of ``dt`` → float64; a cupy array is decoded on the GPU."""
    xp = np
    if type(bits).__module__.split(".")[0] == "cupy":
        import cupy as xp  # here: already imported wherever a cupy array exists
    bits = xp.asarray(bits)
    if dt in _NUMPY:
        return bits.astype(xp.float64)
    if dt == DataType.BFLOAT16:
        return (bits.astype(xp.uint32) << 16).view(xp.float32).astype(xp.float64)
    if dt in _FP8:
        return xp.asarray(_FP8[dt])[bits.astype(xp.intp)]
    raise NoHostEncoding(f"no host encoding for CUDNN_DATA_{dt.name}")


def quantize(values: np.ndarray, dt: DataType) -> np.ndarray:
    """What ``values`` become once stored as ``dt``, as float64."""
    return decode(encode(values, dt), dt)


def nan_bits(dt: DataType) -> np.ndarray | None:
    """One element of ``dt`` that reads as NaN (poison for unwritten outputs), if any."""
    if dt in (DataType.FLOAT, DataType.DOUBLE, DataType.HALF, DataType.BFLOAT16):
        return encode(np.array([np.nan]), dt)
    if dt == DataType.FP8_E4M3:
        return np.array([0x7F], dtype=np.uint8)
    if dt == DataType.FP8_E5M2:
        return np.array([0x7F], dtype=np.uint8)
    return None
