"""The 8-bit engine's elementwise kernels (CuPy), generated per cell and operand format.

Two kernels do all the non-GEMM work of a forward:

* :func:`quantizer` writes a float32 tensor in a GEMM's operand format (the layer input
  before the input GEMM, hx before the first recurrent one);
* :func:`gates` runs one time step of one direction: it dequantizes each GEMM output
  column (``acc * dq[col]``, with ``dq`` = activation scale x that weight row's scale, 1
  for a float GEMM), adds the biases, applies the cell's gate math in FP32, updates h
  (and c) in place, writes h into y, and writes h again in the operand format the next
  step's recurrent GEMM reads. One launch per step and direction.

The rounding rules are those of :mod:`cudnn_rnn.lowbit.quant`, written out in device code:
INT8 ``clamp(rint(v / s), -127, 127)`` (rintf rounds half to even); E4M3 nearest with
ties to even, saturating to ±448 beyond 464 (``encode_e4m3`` with ``saturate=True``),
from a float32 ``v / s`` (the host divides in float64, so a value within one float32
rounding of a tie may round the other way); BF16 round-to-nearest-even of the float32
bits; FP16 CUDA's ``__float2half_rn`` (through CuPy's ``float16``). Sigmoid is
``1 / (1 + exp(-a))`` and tanh ``2 * sigmoid(2a) - 1``, from the hardware's exp2 and
reciprocal (within 3e-7 of the float64 values the host model computes). The persistent
kernel's forms (:data:`PERSISTENT_PREAMBLE`) are faster and coarser: tanh.approx.f32 and
the fast division.
"""
from __future__ import annotations

from functools import lru_cache

from cudnn_rnn.bindings.enums import RNNMode

# the engine's precision names -> (operand format, CuPy dtype of a GEMM's output)
OPERANDS = {"fp32": "fp32", "tf32": "fp32", "fp16": "fp16", "bf16": "bf16", "int8": "int8",
            "fp8": "e4m3"}
OUTPUT_DTYPE = {"fp32": "float32", "tf32": "float32", "fp16": "float32", "bf16": "float32",
                "int8": "int32", "fp8": "float32"}
# operand format -> (CuPy dtype of the buffer, device expression of float v with scale s)
FORMATS = {
    "fp32": ("float32", "v"),
    "fp16": ("float16", "(float16)(v)"),
    "bf16": ("uint16", "lb_bf16(v)"),
    "int8": ("int8", "lb_int8(v, s)"),
    "e4m3": ("uint8", "lb_e4m3(v, s)"),
}
_CTYPE = {"float32": "float32", "int32": "int32"}


def int32_output(precision: str) -> bool:
    """Whether a GEMM of ``precision`` writes int32 (INT8), which its reader dequantizes: so
    layer 0's input projection reaches the persistent kernel (its ``GXINT``)."""
    return OUTPUT_DTYPE[precision] == "int32"

# exp2 and reciprocal on the special-function unit: within 3e-7 of the exact values, a
# fifth of the instructions of tanhf (the GEMM engine's gate kernels; the reference's
# accuracy at no cost there, as they wait on memory)
EXACT_GATES = r"""
__device__ __forceinline__ float lb_sig(float a) { return __fdividef(1.0f, 1.0f + __expf(-a)); }
__device__ __forceinline__ float lb_tanh(float a) { return 2.0f * lb_sig(2.0f * a) - 1.0f; }
"""
# the persistent kernel's gate math is latency-bound (a step waits for it): tanh on one
# special-function instruction (tanh.approx.f32, relative error about 5e-4, 2^-10.987 by
# the PTX ISA), sigmoid as 0.5 + 0.5 tanh(a/2) (absolute error about 2.5e-4), and the 8-bit
# codes' v / s by the fast division (reciprocal and multiply, 2 ulp: a code differs only
# where v / s lies within 2 ulp of a rounding boundary); the verification judges them. Seed
# LSTM INT8 on an H100 (tools/persistent_probe.py, b2t256u16wb): 0.0976 ms against 0.1036
# with the exact forms (tree 832d2aa, as the variants tanh_approx+quant_fast), 0.0963 against
# 0.1027 with y_after_signal too (tree e8c69c5, --variants gates_exact+quant_exact+y_in_gates)
FAST_GATES = r"""
__device__ __forceinline__ float lb_tanh(float a) {
    float r;
    asm("tanh.approx.f32 %0, %1;" : "=f"(r) : "f"(a));
    return r;
}
__device__ __forceinline__ float lb_sig(float a) { return fmaf(0.5f, lb_tanh(0.5f * a), 0.5f); }
"""
ROUNDING = r"""
__device__ __forceinline__ unsigned short lb_bf16(float v) {
    unsigned int u = __float_as_uint(v);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}
__device__ __forceinline__ signed char lb_int8_of(float x) {  // x: v / s
    float q = rintf(x);
    q = fminf(fmaxf(q, -127.0f), 127.0f);
    return (signed char)q;
}
__device__ __forceinline__ signed char lb_int8(float v, float s) {
    return lb_int8_of(LB_DIV(v, s));
}
__device__ __forceinline__ unsigned char lb_e4m3_of(float x) {  // x: v / s
    unsigned int sign = (__float_as_uint(x) >> 24) & 0x80u;
    if (isnan(x)) return 0x7Fu;
    float a = fabsf(x);
    if (a > 464.0f) return (unsigned char)(sign | 0x7Eu);
    int ex = a < 0.015625f ? -6 : ilogbf(a);
    int mag = (ex + 6) * 8 + (int)rintf(ldexpf(a, 3 - ex));
    if (mag > 0x7E) mag = 0x7E;
    return (unsigned char)(sign | (unsigned int)mag);
}
__device__ __forceinline__ unsigned char lb_e4m3(float v, float s) {
    return lb_e4m3_of(LB_DIV(v, s));
}
"""
EXACT_DIV = "#define LB_DIV(a, b) ((a) / (b))\n"  # correctly rounded
FAST_DIV = "#define LB_DIV(a, b) __fdividef((a), (b))\n"  # reciprocal and multiply, 2 ulp
# the GEMM engine's kernels: the exact forms
PREAMBLE = EXACT_DIV + EXACT_GATES + ROUNDING
# the persistent kernel's: the fast forms
PERSISTENT_PREAMBLE = FAST_DIV + FAST_GATES + ROUNDING


def _cupy():
    from cudnn_rnn.engine.gpu import cupy_or_raise
    return cupy_or_raise()


# a format's C type in CuPy's kernels, and the vector that stores four of its codes at once
_C_TYPE = {"float32": ("float", "float4"), "float16": ("float16", "uint2"),
           "uint16": ("unsigned short", "uint2"), "int8": ("signed char", "unsigned int"),
           "uint8": ("unsigned char", "unsigned int")}


@lru_cache(maxsize=None)
def _quantize4(fmt: str):
    """The quantizer's kernel: element i takes codes 4i .. 4i + 3, with ``vec`` from one
    16-byte load of x and one store of the four codes (x and q aligned for them), else one
    by one; the last takes what is left of n."""
    dtype, expr = FORMATS[fmt]
    ctype, vector = _C_TYPE[dtype]
    body = f"""
    const long long i0 = (long long)i * 4;
    if (vec && i0 + 4 <= n) {{
        const float4 v4 = *reinterpret_cast<const float4*>(&x[i0]);
        __align__(16) {ctype} o[4];
        {{ const float v = v4.x; o[0] = {expr}; }}
        {{ const float v = v4.y; o[1] = {expr}; }}
        {{ const float v = v4.z; o[2] = {expr}; }}
        {{ const float v = v4.w; o[3] = {expr}; }}
        *reinterpret_cast<{vector}*>(&q[i0]) = *reinterpret_cast<const {vector}*>(o);
    }} else {{
        for (long long k = i0; k < i0 + 4 && k < n; ++k) {{ const float v = x[k]; q[k] = {expr}; }}
    }}"""
    return _cupy().ElementwiseKernel(
        "raw float32 x, float32 s, int64 n, bool vec", f"raw {dtype} q", body,
        f"lowbit_quantize4_{fmt}", preamble=PREAMBLE)


class _Quantizer:
    """:func:`quantizer`'s callable (one launch, capturable)."""

    def __init__(self, fmt: str):
        self.kernel, self.itemsize = _quantize4(fmt), _cupy().dtype(FORMATS[fmt][0]).itemsize

    def __call__(self, x, s, q, size: int) -> None:
        if not (x.flags.c_contiguous and q.flags.c_contiguous) or x.size < size or \
                q.size < size:
            raise ValueError(f"the quantizer takes {size} contiguous values and codes, given "
                             f"{x.size} and {q.size}")
        vec = x.data.ptr % 16 == 0 and q.data.ptr % (4 * self.itemsize) == 0
        self.kernel(x, s, size, vec, q, size=-(-size // 4))


@lru_cache(maxsize=None)
def _laid_out(fmt: str):
    """:func:`wgmma_quantizer`'s kernel: element i quantizes the 16 bytes of codes that lie
    at byte 16 i of q, column ``col`` (16 bytes of K) of row ``b`` of batch slice ``bs`` of
    step t, where the persistent kernel's ``code_at`` puts them (persistent.cu): the codes
    are stored in order, a warp's stores one run of memory; each row's values are read with
    16-byte loads where ``vec`` (x 16-byte aligned, rows a multiple of 4 values). Rows past
    a slice's or the batch's end are skipped (their zeros left as they are)."""
    dtype, expr = FORMATS[fmt]
    ctype = _C_TYPE[dtype][0]
    body = f"""
    const long long b = i % WGN, r = i / WGN;
    const long long col = r % ncol, slot = r / ncol;
    const long long bs = slot % WGS, t = slot / WGS;
    const long long bg = bs * nbf + b;
    if (b < nbf && bg < B) {{
        const int per = 16 / (int)sizeof({ctype});
        const long long f0 = col * per;
        const float* row = &x[(t * B + bg) * I];
        float in[16 / sizeof({ctype})];
        if (vec && f0 + per <= I) {{
            #pragma unroll
            for (int k = 0; k < per; k += 4) {{
                const float4 w = *reinterpret_cast<const float4*>(row + f0 + k);
                in[k] = w.x; in[k + 1] = w.y; in[k + 2] = w.z; in[k + 3] = w.w;
            }}
        }} else {{
            #pragma unroll
            for (int e = 0; e < per; ++e) in[e] = f0 + e < I ? row[f0 + e] : 0.0f;
        }}
        __align__(16) {ctype} o[16 / sizeof({ctype})];
        #pragma unroll
        for (int e = 0; e < per; ++e) {{
            const float v = in[e];
            o[e] = {expr};
        }}
        *reinterpret_cast<uint4*>(&q[i * (16 / (long long)sizeof({ctype}))]) =
            *reinterpret_cast<const uint4*>(o);
    }}"""
    return _cupy().ElementwiseKernel(
        "raw float32 x, float32 s, int64 ncol, int32 B, int32 nbf, int64 I, int32 WGS, "
        "int32 WGN, bool vec", f"raw {dtype} q", body, f"lowbit_quantize_laid_out_{fmt}",
        preamble=PREAMBLE)


def wgmma_quantizer(fmt: str, steps: int, batch: int, features: int, rowb: int,
                    slice_rows: int, width: int, slices: int):
    """``k(x, s, q)``: the (steps, batch, features) float32 x divided by s in format
    ``fmt``, into uint8 q (viewed as the format's dtype) laid out as the persistent kernel's
    bulk staging reads a layer input (``rowb`` bytes a row, batch slices of ``slice_rows``
    rows padded to ``width``; a row's bytes past its codes get zero codes; the padded rows
    and the buffer's tail are left as they are: zeros). x contiguous.
    At LSTM 50/1/1024/256 INT8 (an H100, plain calls of a traced engine) the kernel before
    this one (a value a load, its stores 16 bytes a column apart) took about 44 us of a
    0.495 ms forward (tools/persistent_probe.py --trace: forward_ms - launch_ms)."""
    kernel, ncol = _laid_out(fmt), rowb // 16

    def run(x, s, q) -> None:
        if not x.flags.c_contiguous or x.size != steps * batch * features \
                or q.nbytes < steps * slices * width * rowb:
            raise ValueError(f"the input quantizer takes {steps * batch * features} contiguous "
                             f"values and {steps * slices * width * rowb} bytes of codes, "
                             f"given {x.size} and {q.nbytes}")
        vec = x.data.ptr % 16 == 0 and features % 4 == 0
        kernel(x, s, ncol, batch, slice_rows, features, slices, width, vec,
               q.view(FORMATS[fmt][0]), size=steps * slices * ncol * width)
    return run


@lru_cache(maxsize=None)
def quantizer(fmt: str):
    """``q[i] = format(x[i] / s)`` for ``size`` elements: call as ``k(x, s, q, size=n)``
    with x float32, s a numpy float32 and q of the format's dtype, both C-contiguous.
    Four values a thread, read and written as vectors where x and q are aligned for them
    (an H100 at LSTM 50/1/1024/256's layer input, 13.1 M values to INT8: 63 us for CuPy's
    elementwise kernel of one value a thread, before)."""
    return _Quantizer(fmt)


def _pre(side: str, k: int) -> str:
    acc, dq, bias, row = (("gx", "dqx", "bW", "rx") if side == "x" else ("gh", "dqh", "bR", "rh"))
    return f"((float){acc}[{row} + {k} * H + j] * {dq}[{k} * H + j] + {bias}[{k} * H + j])"


def _cell_code(mode: RNNMode) -> str:
    X, R = (lambda k: _pre("x", k)), (lambda k: _pre("h", k))
    if mode == RNNMode.RNN_RELU:
        return f"const float v = fmaxf({X(0)} + {R(0)}, 0.0f);"
    if mode == RNNMode.RNN_TANH:
        return f"const float v = lb_tanh({X(0)} + {R(0)});"
    if mode == RNNMode.LSTM:
        return (f"const float ig = lb_sig({X(0)} + {R(0)}), fg = lb_sig({X(1)} + {R(1)});\n"
                f"const float gg = lb_tanh({X(2)} + {R(2)}), og = lb_sig({X(3)} + {R(3)});\n"
                "const float cn = fg * c[i] + ig * gg;\n"
                "c[i] = cn;\n"
                "const float v = og * lb_tanh(cn);")
    if mode == RNNMode.GRU:
        return (f"const float r = lb_sig({X(0)} + {R(0)}), z = lb_sig({X(1)} + {R(1)});\n"
                f"const float n = lb_tanh({X(2)} + r * {R(2)});\n"
                "const float v = (1.0f - z) * n + z * h[i];")
    raise ValueError(f"no gate math for {mode!r}")


@lru_cache(maxsize=None)
def gates(mode: RNNMode, x_out: str, h_out: str, fmt: str):
    """One step's gate kernel for ``mode``, GEMM outputs of dtypes ``x_out`` (input GEMM)
    and ``h_out`` (recurrent), and the recurrent operand ``fmt``. Call with ``size=B*H``::

        k(gx, dqx, bW, gh, dqh, bR, s, H, gH, gx_row0, y_off, y_stride, h, c, y, hq, size=B*H)

    gx (T*B, gH) and gh (B, gH) are the GEMM outputs, row ``gx_row0 + b`` of gx the step's;
    dq* and b* are (gH,) float32; s the operand scale (float32); h, c (B, H) float32 are
    updated in place; h goes to ``y[y_off + b*y_stride + j]`` and, as the format, to hq."""
    dtype, expr = FORMATS[fmt]
    body = ("const int b = i / H, j = i - b * H;\n"
            "const long long rx = (gx_row0 + b) * (long long)gH, rh = (long long)b * gH;\n"
            + _cell_code(mode) + "\n"
            "h[i] = v;\n"
            "y[y_off + b * y_stride + j] = v;\n"
            f"hq[i] = {expr};")
    return _cupy().ElementwiseKernel(
        f"raw {_CTYPE[x_out]} gx, raw float32 dqx, raw float32 bW, raw {_CTYPE[h_out]} gh, "
        "raw float32 dqh, raw float32 bR, float32 s, int32 H, int32 gH, int64 gx_row0, "
        "int64 y_off, int64 y_stride",
        f"raw float32 h, raw float32 c, raw float32 y, raw {dtype} hq",
        body, f"lowbit_gates_{mode.name.lower()}_{x_out}_{h_out}_{fmt}", preamble=PREAMBLE)
