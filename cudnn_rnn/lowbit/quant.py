"""The quantization arithmetic of the 8-bit engine, defined on the host in numpy.

The GPU engine (cuBLASLt INT8/FP8 GEMMs, cupy elementwise kernels) is checked against
these functions, so every rounding rule is stated and exact:

* INT8 is symmetric: ``q = clip(rint(x / scale), -127, 127)``, ``x ~ q * scale``,
  ``scale = amax / 127``; -128 is never produced. Rounding is half to even, as
  ``numpy.rint`` and CUDA's ``__float2int_rn``.
* FP8 is E4M3 in the OCP "e4m3fn" form of CUDA's ``__nv_fp8_e4m3``: 1 sign, 4 exponent
  bits (bias 7), 3 mantissa bits, no infinities, NaN only at S.1111.111 (0x7F, 0xFF),
  largest finite 448, smallest subnormal 2**-9. ``x ~ decode(code) * scale``,
  ``scale = amax / 448``.
* Scales are float64; the division ``x / scale`` is done in float64.
* A scale is per tensor (a scalar) or per output channel: ``amax(w, axis=0)`` of a weight
  ``w[out, in]`` has shape ``[out, 1]`` and so broadcasts over ``w``'s rows; ``.ravel()``
  gives the length-``out`` vector a GEMM epilogue takes.
* The rules take numpy or cupy arrays (the float64 twin then runs on the GPU); scales are
  numpy (they come from calibration on the host) and are checked there.
"""
import numpy as np

from cudnn_rnn.check.reference import array_module

INT8_MAX = 127
E4M3_MAX = 448.0
# 127 * 127 * K <= 2**31 - 1 exactly when K <= 133144: no int32 sum of K products of
# values in [-127, 127], partial or final, can overflow.
INT8_GEMM_SAFE_K = (2 ** 31 - 1) // (INT8_MAX * INT8_MAX)


def _check_scale(scale) -> np.ndarray:
    s = np.asarray(scale, dtype=np.float64)
    if not (np.isfinite(s).all() and (s > 0).all()):
        raise ValueError(f"a scale must be finite and > 0, got {s.ravel()[:4]}")
    return s


def _scale(amax_, top: float):
    a = np.asarray(amax_, dtype=np.float64)
    if not (np.isfinite(a).all() and (a >= 0).all()):
        raise ValueError(f"amax must be finite and >= 0, got {a.ravel()[:4]}")
    return np.where(a == 0, 1.0, a / top)[()]


def amax(x, axis=None):
    """max |x| as float64: over all of ``x`` when ``axis`` is None (a scalar), else per
    index of ``axis``, reduced over every other axis and kept broadcastable (``keepdims``).
    A NaN in ``x`` raises ValueError. A cupy array is reduced on the GPU (the result is
    then a cupy array; ``float()`` of a scalar one reads it back)."""
    xp = array_module(x)
    x = xp.asarray(x, dtype=xp.float64)
    if bool(xp.isnan(x).any()):
        raise ValueError("amax of an array containing NaN")
    if axis is None:
        return xp.abs(x).max()
    axis = axis % x.ndim
    others = tuple(i for i in range(x.ndim) if i != axis)
    return xp.abs(x).max(axis=others, keepdims=True)


# ---------------------------------------------------------------- INT8

def int8_scale(amax_):
    """``amax / 127`` (float64; scalar or array). An amax of 0 gives scale 1.0, so an
    all-zero tensor quantizes to 0s; a negative, NaN or infinite amax raises ValueError."""
    return _scale(amax_, INT8_MAX)


def quantize_int8(x, scale) -> np.ndarray:
    """int8 codes ``clip(rint(x / scale), -127, 127)``, rounding half to even; ``scale``
    broadcasts against ``x``. ±inf clip to ±127; a NaN in ``x`` raises ValueError."""
    xp = array_module(x)
    x = xp.asarray(x, dtype=xp.float64)
    if bool(xp.isnan(x).any()):
        raise ValueError("NaN has no int8 code")
    scale = xp.asarray(_check_scale(scale))
    return xp.clip(xp.rint(x / scale), -INT8_MAX, INT8_MAX).astype(xp.int8)


def dequantize_int8(q, scale) -> np.ndarray:
    """``q * scale`` in float64."""
    xp = array_module(q)
    return xp.asarray(q, dtype=xp.float64) * xp.asarray(_check_scale(scale))


def gemm_int32(a_q, b_q) -> np.ndarray:
    """The exact int8 x int8 -> int32 product ``a_q @ b_q``, summed in int64. A result that
    does not fit int32 raises OverflowError; with inner dimension K <= INT8_GEMM_SAFE_K
    (133144) and codes in [-127, 127] that cannot happen. Non-int8 inputs raise TypeError."""
    a_q, b_q = np.asarray(a_q), np.asarray(b_q)
    if a_q.dtype != np.int8 or b_q.dtype != np.int8:
        raise TypeError(f"gemm_int32 takes int8 arrays, got {a_q.dtype} and {b_q.dtype}")
    c = a_q.astype(np.int64) @ b_q.astype(np.int64)
    info = np.iinfo(np.int32)
    if c.size and (c.min() < info.min or c.max() > info.max):
        raise OverflowError(f"int8 GEMM result outside int32 (K = {a_q.shape[-1]})")
    return c.astype(np.int32)


# ---------------------------------------------------------------- FP8 E4M3

def _e4m3_table() -> np.ndarray:
    c = np.arange(256)
    e, m = (c >> 3) & 0xF, (c & 0x7).astype(np.float64)
    mag = np.where(e == 0, np.ldexp(m / 8, -6), np.ldexp(1 + m / 8, e - 7))
    value = np.where(c >> 7, -mag, mag).astype(np.float32)
    value[[0x7F, 0xFF]] = np.nan
    return value


_E4M3 = _e4m3_table()


def decode_e4m3(codes) -> np.ndarray:
    """float32 values of E4M3 codes (uint8): subnormal (exponent field 0)
    ``(-1)**s * 2**-6 * m/8``, normal ``(-1)**s * 2**(e-7) * (1 + m/8)``; 0x7F/0xFF NaN."""
    xp = array_module(codes)
    table = _E4M3 if xp is np else xp.asarray(_E4M3)
    return table[xp.asarray(codes, dtype=xp.uint8)]


def encode_e4m3(x, saturate: bool = True) -> np.ndarray:
    """uint8 E4M3 codes of ``x``, rounded to the nearest value, ties to the even mantissa,
    exactly for every float32 or float64 input (one rounding, in float64, never through
    float16). The sign is kept, so -0.0 and negatives that round to 0 give 0x80.

    Overflow follows CUDA's ``__nv_cvt_*_to_fp8``: |x| <= 464 (the midpoint between 448 and
    the step 480 beyond it) rounds to 448 by the tie rule. Beyond that, and for ±inf,
    ``saturate=True`` (``__NV_SATFINITE``, the conversion cuBLASLt-side kernels use) gives
    ±448 (0x7E/0xFE), ``saturate=False`` NaN with the sign (0x7F/0xFF). NaN gives 0x7F."""
    xp = array_module(x)
    x = xp.asarray(x, dtype=xp.float64)
    a = xp.abs(x)
    a = xp.where(xp.isfinite(a), a, 0.0)
    # unbiased exponent; the subnormals and 0 share the quantum 2**-9 of exponent -6
    ex = xp.where(a < 2.0 ** -6, -6, xp.frexp(a)[1] - 1).astype(xp.int64)
    n = xp.rint(xp.ldexp(a, (3 - ex).astype(xp.int32))).astype(xp.int64)  # [8, 16] normal, [0, 8] sub
    # consecutive magnitude codes are consecutive grid points, so n's parity is the code's
    # and n == 16 carries into the next exponent's mantissa 0
    mag = (ex + 6) * 8 + n
    over = (mag > 0x7E) | xp.isinf(x)
    mag = xp.where(over, 0x7E if saturate else 0x7F, mag)
    code = xp.where(xp.isnan(x), 0x7F, mag | (xp.signbit(x).astype(xp.int64) << 7))
    return code.astype(xp.uint8)


def e4m3_scale(amax_):
    """``amax / 448`` with int8_scale's rules (0 gives 1.0; negative/NaN/inf raise)."""
    return _scale(amax_, E4M3_MAX)


def quantize_e4m3(x, scale) -> np.ndarray:
    """``encode_e4m3(x / scale)``, saturating (NaN stays NaN, 0x7F)."""
    xp = array_module(x)
    return encode_e4m3(xp.asarray(x, dtype=xp.float64) / xp.asarray(_check_scale(scale)),
                       saturate=True)


def dequantize_e4m3(codes, scale) -> np.ndarray:
    """``decode_e4m3(codes) * scale`` in float64."""
    xp = array_module(codes)
    return decode_e4m3(codes).astype(xp.float64) * xp.asarray(_check_scale(scale))


# ---------------------------------------------------------------- the float64 model

def fake_quant_int8(x, scale) -> np.ndarray:
    """``dequantize_int8(quantize_int8(x, scale), scale)``: float64 ``x`` as the INT8
    engine sees it."""
    return dequantize_int8(quantize_int8(x, scale), scale)


def fake_quant_e4m3(x, scale) -> np.ndarray:
    """``dequantize_e4m3(quantize_e4m3(x, scale), scale)``: float64 ``x`` as the FP8
    engine sees it."""
    return dequantize_e4m3(quantize_e4m3(x, scale), scale)
