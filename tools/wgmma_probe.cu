// The wgmma probe's kernel (tools/wgmma_probe.py compiles it with NVRTC for sm_90a, after
// cudnn_rnn/lowbit/device.cuh and wgmma.source(FMT, NB)): one warpgroup per CTA multiplies a
// 64 x KB-byte A (weight rows, loaded once) by a fresh NB x KB-byte B (batch rows of a
// state) every step, as the persistent kernel's products do, and writes every step's
// 64 x NB sums, so the host checks them against numpy. Defines:
//   FMT    0 fp16, 1 bf16, 2 int8, 3 e4m3;  NB the batch rows (B's), KB the bytes of K
//   STEPS  steps (a fresh B each, from B + s * NB * KB)
//   MODE   0 mma.sync (each warp 16 rows by every n-tile over all of K, fragments by
//          ldmatrix from rows padded by 16 bytes: the persistent kernel's path); 1 wgmma,
//          A and B from shared memory; 2 wgmma, A from registers (loaded once), B shared
//   LAYOUT 0: the canonical operands' 8-row groups contiguous along K (wgmma.strides "k");
//          1: their 16-byte columns contiguous down the rows ("rows")
//   SWAP   0: the K stride in the descriptor's leading-dimension field, as the PTX ISA
//          says; 1: the two strides swapped (one of the two must give wrong sums)
//   BULK   1 (wgmma, LAYOUT 0): B is in global memory already in the canonical layout (as a
//          producer could write the state), and thread 0 stages a step's B with one bulk
//          copy (cp.async.bulk, the copy engine) completing on an mbarrier the others wait
//          on; 0: every thread copies 16-byte pieces (cp.async), as the kernel does
// Thread 0 writes the clock at a step's start, once B is staged and once its sums are in
// registers: trace[(cta * STEPS + s) * 3 + i].
#if FMT == 2
typedef int acc_t;
#else
typedef float acc_t;
#endif
#define KCH (KB / 32)
#define PADB (KB + 16)
#if MODE == 0
#define APLACE(r, k) ((unsigned)(r) * PADB + (k))
#define BPLACE(r, k) ((unsigned)(r) * PADB + (k))
#else
#if LAYOUT == 0
#define AK 128u
#define AR (8u * KB)
#define BK 128u
#define BR (8u * KB)
#else
#define AK (64u * 16u)
#define AR 128u
#define BK ((unsigned)NB * 16u)
#define BR 128u
#endif
#define APLACE(r, k) wg_place((r), (k), AK, AR)
#define BPLACE(r, k) wg_place((r), (k), BK, BR)
#endif

extern "C" __global__ void __launch_bounds__(128, 1)
wgmma_probe(const unsigned char* __restrict__ A, const unsigned char* __restrict__ B,
            acc_t* out, long long* trace)
{
    extern __shared__ __align__(128) unsigned char smem[];
#if BULK
    __shared__ __align__(8) unsigned long long mbar;
    const unsigned bar = smem_addr(&mbar);
    if (threadIdx.x == 0) mbar_init(bar);
    __syncthreads();
#endif
    unsigned char* as = smem;
    unsigned char* bs = smem + 64 * PADB;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gq = lane >> 2, gr = lane & 3;
    constexpr int P = KB / 16;  // 16-byte pieces of a row
#pragma unroll 1
    for (int i = tid; i < 64 * P; i += 128) cp16(as + APLACE(i / P, (i % P) * 16), A + 16 * i, 16);
    cp_commit();
    cp_wait<0>();
#if MODE == 2
    // this warp's fragment of every chunk: mma.sync's A layout, rows 16 warp + gq (+ 8),
    // bytes 4 gr (+ 16) of the chunk
    unsigned ar[KCH][4];
#pragma unroll
    for (int c = 0; c < KCH; ++c)
#pragma unroll
        for (int j = 0; j < 4; ++j)
            ar[c][j] = *(const unsigned*)(A + (16 * warp + gq + 8 * (j & 1)) * KB + 32 * c
                                          + 16 * (j >> 1) + 4 * gr);
#endif
#if MODE != 0
    fence_proxy_async();
#endif
    __syncthreads();
    const unsigned a_lane = (unsigned)((lane & 7) + ((lane >> 3) & 1) * 8) * PADB + (lane >> 4) * 16;
    const unsigned b_lane = (unsigned)(lane & 7) * PADB + ((lane >> 3) & 1) * 16;

#pragma unroll 1
    for (int s = 0; s < STEPS; ++s) {
        const long long t0 = clock64();
        const unsigned char* src = B + (size_t)s * NB * KB;
#if BULK
        if (tid == 0) bulk_load(bar, smem_addr(bs), src, NB * KB);
        mbar_wait(bar, s & 1);  // every thread: until the copy's bytes have landed
#else
#pragma unroll 1
        for (int i = tid; i < NB * P; i += 128) cp16(bs + BPLACE(i / P, (i % P) * 16), src + 16 * i, 16);
        cp_commit();
        cp_wait<0>();
#if MODE != 0
        fence_proxy_async();
#endif
        __syncthreads();
#endif
        const long long t1 = clock64();
        acc_t d[NB / 2];
#pragma unroll
        for (int i = 0; i < NB / 2; ++i) d[i] = 0;
#if MODE == 0
        float c4[NB / 8][4];
#pragma unroll
        for (int j = 0; j < NB / 8; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r) c4[j][r] = 0.0f;
#pragma unroll 4
        for (int c = 0; c < KCH; ++c) {
            unsigned af[4];
            ldsm_x4(af, as + a_lane + (unsigned)warp * 16 * PADB + c * 32);
#pragma unroll
            for (int j = 0; j < NB / 8; ++j) {
                unsigned bf[2];
                ldsm_x2(bf, bs + b_lane + (unsigned)j * 8 * PADB + c * 32);
                mma<FMT>(c4[j], af, bf);
            }
        }
#pragma unroll
        for (int j = 0; j < NB / 8; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r) {
#if FMT == 2
                d[4 * j + r] = __float_as_int(c4[j][r]);
#else
                d[4 * j + r] = c4[j][r];
#endif
            }
#else
        wg_fence();
#pragma unroll
        for (int c = 0; c < KCH; ++c) {
#if SWAP
            const unsigned long long bdesc = wg_desc(bs + c * 2 * BK, BR, BK);
#else
            const unsigned long long bdesc = wg_desc(bs + c * 2 * BK, BK, BR);
#endif
#if MODE == 2
            wg_mma_r(d, ar[c], bdesc, c > 0);
#else
#if SWAP
            wg_mma_s(d, wg_desc(as + c * 2 * AK, AR, AK), bdesc, c > 0);
#else
            wg_mma_s(d, wg_desc(as + c * 2 * AK, AK, AR), bdesc, c > 0);
#endif
#endif
        }
        wg_commit();
        wg_wait<0>();
#endif
        const long long t2 = clock64();
        // the accumulators in mma.sync's layout: tile j holds rows 16 warp + gq (+ 8),
        // columns 8 j + 2 gr (+ 1)
        acc_t* o = out + (size_t)s * 64 * NB;
#pragma unroll
        for (int j = 0; j < NB / 8; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r)
                o[(16 * warp + gq + (r & 2 ? 8 : 0)) * NB + 8 * j + 2 * gr + (r & 1)] = d[4 * j + r];
        if (tid == 0) {
            long long* t = trace + ((size_t)blockIdx.x * STEPS + s) * 3;
            t[0] = t0;
            t[1] = t1;
            t[2] = t2;
        }
        __syncthreads();  // every warp's reads of B done before the next step restages it
    }
}
