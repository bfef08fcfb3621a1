// What both persistent kernels (persistent.cu, resident.cu) round and compute the same
// way: a value's code in an operand format, and one cell's step (CELL, GATES defined
// before; BPE(F) bytes a code).
#define BPE(F) ((F) < 2 ? 2 : 1)

// the bits of v in format F with scale s (s is 1 for the 16-bit formats), the rules of
// kernels.FORMATS, in the low BPE(F) bytes; RN: v / s correctly rounded (the quantizers
// before the launch, kernels.PREAMBLE), not the kernel's fast division (LB_DIV)
template <int F, bool RN = false> __device__ __forceinline__ unsigned bits(float v, float s) {
    if constexpr (F == 0) {
        unsigned short h;
        asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
        return h;
    } else if constexpr (F == 1) {
        return lb_bf16(v);
    } else if constexpr (F == 2) {
        return (unsigned char)lb_int8_of(RN ? __fdiv_rn(v, s) : LB_DIV(v, s));
    } else {
        return lb_e4m3_of(RN ? __fdiv_rn(v, s) : LB_DIV(v, s));
    }
}
// v in format F with scale s, stored at p
template <int F> __device__ __forceinline__ void put(unsigned char* p, float v, float s) {
    if constexpr (F < 2) *(unsigned short*)p = (unsigned short)bits<F>(v, s);
    else *p = (unsigned char)bits<F>(v, s);
}

__device__ __forceinline__ float cell(const float (&X)[GATES], const float (&R)[GATES],
                                      float h, float& c) {
#if CELL == 0
    return fmaxf(X[0] + R[0], 0.0f);
#elif CELL == 1
    return lb_tanh(X[0] + R[0]);
#elif CELL == 2
    const float ig = lb_sig(X[0] + R[0]), fg = lb_sig(X[1] + R[1]);
    const float gg = lb_tanh(X[2] + R[2]), og = lb_sig(X[3] + R[3]);
    c = fg * c + ig * gg;
    return og * lb_tanh(c);
#else
    const float r = lb_sig(X[0] + R[0]), z = lb_sig(X[1] + R[1]);
    const float n = lb_tanh(X[2] + r * R[2]);
    return (1.0f - z) * n + z * h;
#endif
}
