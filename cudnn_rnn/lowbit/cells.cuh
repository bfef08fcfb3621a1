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

// a unit's four gates, whose sums lanes l and l ^ 16 hold at two columns (v[2 h + e]: row h,
// gates 0 and 2 or, `up`, 1 and 3; column e), gathered at one column a lane: each keeps its
// own (up: the second), takes the other two gates of it from the other lane, and gives up
// the rest; g[q]: gate q at the column kept
__device__ __forceinline__ void trade_gates(const float (&v)[4], bool up, float (&g)[4]) {
    const float k0 = up ? v[1] : v[0], k1 = up ? v[3] : v[2];
    const float g0 = __shfl_xor_sync(0xffffffffu, up ? v[0] : v[1], 16);
    const float g1 = __shfl_xor_sync(0xffffffffu, up ? v[2] : v[3], 16);
    g[0] = up ? g0 : k0;
    g[1] = up ? k0 : g0;
    g[2] = up ? g1 : k1;
    g[3] = up ? k1 : g1;
}
