// The resident RNN forward: one layer (each direction) in one thread-block cluster for the
// whole sequence, its recurrent weights in registers, h handed from step to step through
// distributed shared memory and the cluster's hardware barrier (no counter in global memory,
// no copy from L2). cudnn_rnn/lowbit/resident.py lays the weights out and compiles this file
// with NVRTC, defining:
//   CELL     0 RNN_RELU, 1 RNN_TANH, 2 LSTM, 3 GRU;  GATES 1, 1, 4, 3
//   FH       the recurrent operand's format: 0 fp16, 1 bf16, 2 int8, 3 e4m3
//   GXINT    1: the input projection (cuBLASLt, before the launch) is int32, else float32
//   H, B     hidden size and batch; NT = ceil(B / 8) n-tiles of 8 batch rows
//   WARPS    warps a CTA; CL CTAs a cluster (CL * WARPS * UPW = H)
//   KT       32-byte chunks of K (H * BPE(FH) / 32): a warp's weight fragments, 4 registers
//            each, loaded once (resident.fragments lays them out)
// Warp w of CTA r holds one m-tile, 16 rows: an LSTM's or GRU's units r U + 4 w .. + 3, row
// i gate ((i >> 2) & 1) + 2 (i >> 3) of unit i & 3 (a GRU's gate 3 zeros), so that after
// the products lane l holds gates 0 and 2 (lanes 0-15) or 1 and 3 (16-31) of unit (l >> 2)
// & 3 and trades half of them with lane l ^ 16 (persistent.cu's GR does the same); an RNN's
// 16 units r U + 16 w + i, a lane's four sums four cells. Each step: the wait for h(s) in
// buffer s & 1 (every CTA's part), the products (A from registers, B by ldmatrix from the
// buffer), the gate math in registers, this CTA's h codes to a stage, handed to buffer
// (s + 1) & 1 of every CTA of the cluster, y stored. BULK (where a CTA's codes fill 32-byte
// chunks): one bulk copy a mate from a double stage into that mate's block of the buffer,
// completing the buffer's mbarrier, which each CTA re-arms once its warps have read it; a
// mate's copies of h(s + 2) can only follow this CTA's h(s + 1), which follows every warp's
// reads of buffer s & 1 (a cluster barrier at the end keeps a CTA from leaving while its
// copies read its stage). Otherwise 16-byte stores to shared::cluster and the cluster
// barrier (arrive.release, wait.acquire) each step, whose release waits for the thread's
// earlier stores (docs/lowbit.md: the slower form). The last step hands nothing on. The
// waits do not give up: the cluster is scheduled whole, the clusters (directions) share
// nothing, and a CTA waits only for what every mate hands on at every step.
// The rounding and gate helpers are kernels.PERSISTENT_PREAMBLE, device.cuh and cells.cuh,
// prepended.

#define THREADS (WARPS * 32)
#define UPW (GATES == 1 ? 16 : 4)            // units a warp
#define U (WARPS * UPW)                      // units a CTA
#define NT ((B + 7) / 8)
#define BROWS (16 * ((NT + 1) / 2))          // a buffer's rows: ldmatrix takes n-tiles in pairs
#define HB (H * BPE(FH))                     // bytes of one batch row's h codes
#define ROW (HB + 16)                        // ... in the buffer (rows meet no bank twice)
#define UB (U * BPE(FH))                     // bytes of this CTA's units in a row
#define CELLS_A (GATES == 1 ? 4 * NT : NT)   // cells a lane computes
#define KG 4                                 // chunks whose B fragments are loaded at once
#ifndef BULK
#define BULK 0
#endif
#if CL * U != H || HB % 32 || UB % 16 || NT > 4 || (BULK && UB % 32)
#error "resident.py checks the shape: CL * U == H, K in 32-byte chunks, 16-byte pieces, B <= 32"
#endif
#if BULK
// BULK: each CTA's block of h, B rows of RB bytes, lies whole in every buffer, so that one
// bulk copy (the copy engine, shared::cta to shared::cluster) takes it to each CTA; a 32-byte
// chunk of K lies in one block (UB a multiple of 32), its rows RB apart (16 bytes past UB:
// ldmatrix's rows meet no bank twice)
#define RB (UB + 16)
#define BUFB (CL * BROWS * RB)               // a buffer: [CL][BROWS][RB]
#define STAGEB (B * RB)                      // a stage: [B][RB], two of them
#else
#define BUFB (BROWS * ROW)                   // a buffer: [BROWS][ROW]
#define STAGEB (B * UB)                      // the stage: [B][UB]
#endif

// (the cluster, mbarrier and bulk-copy helpers, bulk_to_mate among them, are device.cuh's)

extern "C" __global__ void __cluster_dims__(CL, 1, 1) __launch_bounds__(THREADS, 1)
resident_rnn(const uint4* __restrict__ frags, const float* __restrict__ rowf,
             const void* __restrict__ gx0, const void* __restrict__ gx1,
             const float* __restrict__ hx, const float* __restrict__ cx, float* y, float* hy,
             float* cy, const float hscale0, const float hscale1, const int T,
             const int D)
{
    // frags: [D][CL][WARPS][KT][32 lanes] 16 bytes (resident.fragments); rowf: [D][4][GATES H]
    // the per-row dequantization of the input projection and of the recurrent products, then
    // the two biases; gx0, gx1: each direction's (T B, GATES H) input projection; hx, cx, hy,
    // cy: (D, B, H); y (T, B, D H); hscale0, hscale1: each direction's h scale
    extern __shared__ __align__(128) unsigned char smem[];
    unsigned char* const buf = smem;                    // [2] buffers of every CTA's h codes
    unsigned char* const stage = smem + 2 * BUFB;       // this CTA's, to hand on
#if BULK
    // BULK: mbarrier p completes when buffer p holds every CTA's block (one arrival: this
    // CTA's thread 0 arming it with the bytes expected)
    __shared__ __align__(8) unsigned long long mbar[2];
    const unsigned bar0 = smem_addr(&mbar[0]);
#endif
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int gq = lane >> 2, gr = lane & 3;
    const unsigned rank = cl_rank();
    const int dir = blockIdx.x / CL;
    const float* gx = (const float*)(dir ? gx1 : gx0);
    const float hscale = dir ? hscale1 : hscale0;
    const int gH = GATES * H;
    const float* const dqx = rowf + (unsigned)dir * 4 * gH;
    const float* const dqh = dqx + gH;
    const float* const bw = dqh + gH;
    const float* const br = bw + gH;

    // this warp's weight fragments, for the whole sequence
    unsigned a[KT][4];
    {
        const uint4* f = frags + ((unsigned)(dir * CL + rank) * WARPS + warp) * KT * 32 + lane;
#pragma unroll
        for (int k = 0; k < KT; ++k) {
            const uint4 v = __ldg(f + k * 32);
            a[k][0] = v.x; a[k][1] = v.y; a[k][2] = v.z; a[k][3] = v.w;
        }
    }
    // the zero rows past the batch (read by ldmatrix, never written) and the first buffer
    for (int i = tid; i < 2 * BUFB / 16; i += THREADS)
        ((uint4*)buf)[i] = make_uint4(0u, 0u, 0u, 0u);
#if BULK
    if (tid == 0) {
        mbar_init(bar0);
        mbar_init(bar0 + 8);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        mbar_expect(bar0, CL * STAGEB);  // h(0), h(1)
        if (T > 1) mbar_expect(bar0 + 8, CL * STAGEB);
    }
#endif

    // this lane's cells: cell i is unit cu[i] (of H) at batch row cb[i]
    int cu[CELLS_A], cb[CELLS_A];
#pragma unroll
    for (int i = 0; i < CELLS_A; ++i) {
        if (GATES == 1) {  // cell 4 n + e: unit gq + 8 (e >> 1), column 2 gr + (e & 1)
            cu[i] = rank * U + warp * 16 + gq + 8 * ((i & 3) >> 1);
            cb[i] = (i >> 2) * 8 + 2 * gr + (i & 1);
        } else {           // n-tile i: unit gq & 3, the column of the lane's half
            cu[i] = rank * U + warp * 4 + (gq & 3);
            cb[i] = i * 8 + 2 * gr + (gq >> 2);
        }
    }
    // its units' factors, all gates
    float fdx[CELLS_A][GATES], fdh[CELLS_A][GATES], fbw[CELLS_A][GATES], fbr[CELLS_A][GATES];
#pragma unroll
    for (int i = 0; i < CELLS_A; ++i)
#pragma unroll
        for (int q = 0; q < GATES; ++q) {
            const int row = q * H + cu[i];
            fdx[i][q] = dqx[row];
            fdh[i][q] = dqh[row];
            fbw[i][q] = bw[row];
            fbr[i][q] = br[row];
        }
    float h_r[CELLS_A], c_r[CELLS_A];
#pragma unroll
    for (int i = 0; i < CELLS_A; ++i) {
        const bool real = cb[i] < B;
        const unsigned g = ((unsigned)dir * B + (real ? cb[i] : 0)) * H + cu[i];
        h_r[i] = real ? hx[g] : 0.0f;
        c_r[i] = real && CELL == 2 ? cx[g] : 0.0f;
    }
    // this lane's codes into the stage, then the stage handed to buffer `to` of every CTA
    auto hand_on = [&](int to) {
#if BULK
        unsigned char* const st = stage + to * STAGEB;
#else
        unsigned char* const st = stage;
#endif
#pragma unroll
        for (int i = 0; i < CELLS_A; ++i) {
            if (cb[i] >= B) continue;
            const unsigned v = bits<FH>(h_r[i], hscale);
#if BULK
            unsigned char* p = st + cb[i] * RB + (cu[i] - rank * U) * BPE(FH);
#else
            unsigned char* p = st + cb[i] * UB + (cu[i] - rank * U) * BPE(FH);
#endif
            if (BPE(FH) == 2) *(unsigned short*)p = (unsigned short)v;
            else *p = (unsigned char)v;
        }
#if BULK
        // the stage's generic writes, for the copy engine's reads; then one copy a mate
        fence_proxy_async();
        __syncthreads();
        if (tid < CL)
            bulk_to_mate(cl_mapa(smem_addr(buf + to * BUFB + rank * BROWS * RB), tid),
                         smem_addr(st), STAGEB, cl_mapa(bar0 + 8 * to, tid));
#else
        __syncthreads();
        const int pieces = B * (UB / 16);
        const unsigned dst = smem_addr(buf + to * BUFB + rank * UB);
#pragma unroll 1
        for (int i = tid; i < pieces * CL; i += THREADS) {
            const int mate = i / pieces, p = i - mate * pieces;
            const int b = p / (UB / 16), c = p - b * (UB / 16);
            const uint4 v = *(const uint4*)(st + b * UB + c * 16);
            cl_store16(cl_mapa(dst + b * ROW + c * 16, mate), v);
        }
#endif
    };
#if BULK
    // the zeros (generic proxy) before the mates' copies (async proxy) into those buffers
    fence_proxy_async();
#endif
    __syncthreads();  // the buffers' zeros before any mate's push lands in them
    cl_arrive();
    cl_wait();        // every CTA's zeros written (BULK: and mbarriers set)
    hand_on(0);
#if !BULK
    cl_arrive();      // h(0) pushed
#endif

    // this lane's B fragments: ldmatrix x4 of rows (lane & 7) + 8 ((lane >> 4) & 1), bytes
    // 16 ((lane >> 3) & 1) of a chunk: n-tile pairs (2 j, 2 j + 1) in registers 0-1, 2-3
#if BULK
    const unsigned b_lane = (unsigned)((lane & 7) + ((lane >> 4) & 1) * 8) * RB
                            + ((lane >> 3) & 1) * 16;
    // chunk k of K: in block k 32 / UB, at byte k 32 % UB of its rows
    auto chunk_at = [](int k, int j) {
        return (k * 32 / UB) * BROWS * RB + j * 16 * RB + k * 32 % UB;
    };
#else
    const unsigned b_lane = (unsigned)((lane & 7) + ((lane >> 4) & 1) * 8) * ROW
                            + ((lane >> 3) & 1) * 16;
    auto chunk_at = [](int k, int j) { return j * 16 * ROW + k * 32; };
#endif
    // the input projection of this lane's cells at step time t (nothing in the launch writes
    // it), loaded a step ahead: in flight through the hand-off, the wait and the products
    float gxv[CELLS_A][GATES];
    auto load_gx = [&](int t) {
#pragma unroll
        for (int i = 0; i < CELLS_A; ++i)
#pragma unroll
            for (int q = 0; q < GATES; ++q)
                gxv[i][q] = __ldg(gx + (unsigned)(t * B + min(cb[i], B - 1)) * gH + q * H
                                  + cu[i]);
    };
    load_gx(dir ? T - 1 : 0);
#pragma unroll 1
    for (int s = 0; s < T; ++s) {
        const int t = dir ? T - 1 - s : s;
#if BULK
        mbar_wait(bar0 + 8 * (s & 1), (s >> 1) & 1);  // h(s) in buffer s & 1, every block
#else
        cl_wait();  // h(s) in buffer s & 1 of this CTA, from every CTA of the cluster
#endif
        const unsigned char* hb = buf + (s & 1) * BUFB + b_lane;
        // the products: KG chunks' B fragments loaded at once, then their products into two
        // sets of sums by turns (each product waits for its set's last, not for the one before)
        float acc[NT][4], acc2[NT][4];
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[n][r] = acc2[n][r] = 0.0f;
#pragma unroll
        for (int k0 = 0; k0 < KT; k0 += KG) {
            unsigned bf[KG][(NT + 1) / 2][4];
#pragma unroll
            for (int k = k0; k < k0 + KG && k < KT; ++k)
#pragma unroll
                for (int j = 0; j < (NT + 1) / 2; ++j) ldsm_x4(bf[k - k0][j], hb + chunk_at(k, j));
#pragma unroll
            for (int k = k0; k < k0 + KG && k < KT; ++k)
#pragma unroll
                for (int j = 0; j < (NT + 1) / 2; ++j) {
                    const unsigned b0[2] = {bf[k - k0][j][0], bf[k - k0][j][1]};
                    const unsigned b1[2] = {bf[k - k0][j][2], bf[k - k0][j][3]};
                    mma<FH>(k & 1 ? acc2[2 * j] : acc[2 * j], a[k], b0);
                    if (2 * j + 1 < NT)
                        mma<FH>(k & 1 ? acc2[2 * j + 1] : acc[2 * j + 1], a[k], b1);
                }
        }
#pragma unroll
        for (int n = 0; n < NT; ++n)  // (int8: the int32 sums' bits, added as integers)
#pragma unroll
            for (int r = 0; r < 4; ++r)
                acc[n][r] = FH == 2 ? __int_as_float(__float_as_int(acc[n][r])
                                                     + __float_as_int(acc2[n][r]))
                                    : acc[n][r] + acc2[n][r];
        // the gate math: X (projection) and R (products) of every gate of each cell
        float X[CELLS_A][GATES], R[CELLS_A][GATES];
#pragma unroll
        for (int i = 0; i < CELLS_A; ++i) {
            float v[4];
            if (GATES == 1) {
                v[0] = acc[i >> 2][i & 3];
            } else {  // lanes 0-15 keep column 2 gr, lanes 16-31 column 2 gr + 1
                trade_gates(acc[i], gq >> 2, v);
            }
#pragma unroll
            for (int q = 0; q < GATES; ++q) {
                R[i][q] = value<FH>(v[q]) * fdh[i][q] + fbr[i][q];
                const float g = gxv[i][q];
                X[i][q] = (GXINT ? (float)__float_as_int(g) : g) * fdx[i][q] + fbw[i][q];
            }
        }
        if (s + 1 < T) load_gx(dir ? T - 2 - s : s + 1);  // the next step's, a step ahead
#pragma unroll
        for (int i = 0; i < CELLS_A; ++i) {
            float c = c_r[i];
            h_r[i] = cell(X[i], R[i], h_r[i], c);
            c_r[i] = c;
        }
        if (s + 1 < T) {
            hand_on((s + 1) & 1);
#if BULK
            // every warp's products of this step done (hand_on's barrier): buffer s & 1
            // armed for h(s + 2). A mate may have it all and send h(s + 2) before this (the
            // copies of h(s + 1) are issued by threads 1 .. CL - 1 too): the phase's byte
            // count then goes below zero until armed, which the PTX ISA allows (down to
            // -(2^20 - 1); CL STAGEB is far less), and its one arrival, this, keeps it open
            if (tid == 0 && s + 2 < T) mbar_expect(bar0 + 8 * (s & 1), CL * STAGEB);
#else
            cl_arrive();  // release: the pushes, before any CTA's wait of step s + 1
#endif
        }
#pragma unroll
        for (int i = 0; i < CELLS_A; ++i)
            if (cb[i] < B) y[(unsigned)(t * B + cb[i]) * D * H + dir * H + cu[i]] = h_r[i];
    }
#if BULK
    // no CTA leaves while its copies may still read its stage: every mate has received
    // them (its wait of the last step) before it arrives here
    cl_arrive();
    cl_wait();
#endif
#pragma unroll
    for (int i = 0; i < CELLS_A; ++i) {
        if (cb[i] >= B) continue;
        const unsigned g = ((unsigned)dir * B + cb[i]) * H + cu[i];
        hy[g] = h_r[i];
        if (CELL == 2) cy[g] = c_r[i];
    }
}
