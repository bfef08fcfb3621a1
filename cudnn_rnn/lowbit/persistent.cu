// The persistent RNN forward: every step of every layer in one cooperative launch, each
// CTA's weight rows in shared memory for the whole sequence. cudnn_rnn/lowbit/partition.py
// decides who computes what and when (the Slice and wait tables); persistent.py compiles
// this file with NVRTC, defining:
//   CELL     0 RNN_RELU, 1 RNN_TANH, 2 LSTM, 3 GRU;  GATES 1, 1, 4, 3
//   FX, FH   operand formats of the input part (layers above the first, and layer 0 where
//            its input products are in the kernel) and of the recurrent part: 0 fp16,
//            1 bf16, 2 int8, 3 e4m3
//   HASX     1 when some layer has an input part (more than one layer, or layer 0's input
//            products in the kernel: partition.Partition.input_inside, no projection then)
//   GXINT    1 when layer 0's input GEMM (cuBLASLt, before the launch) wrote int32
//   THREADS, MT (m-tiles per CTA at most), NTW (n-tiles per warp), SLAB, STAGES, PAD,
//   STRADDLE 1 when some CTA's single k-group multiplies both the input and the recurrent
//            part (partition.Partition.straddles): the input part's sums kept apart
//   EXACT    1 when every CTA fills MT m-tiles and its warps' n-tiles (Partition.exact): no
//            tile's bounds are checked
//   POLL     1: no counters; every state slot starts as the sentinel (persistent.SENTINEL,
//            a code no rounding makes), and a CTA stages its inputs at once, reading again
//            each 16-byte piece that still holds a sentinel byte (an experiment, not tuned)
//   AREG     1: each warp loads its k-group's weight fragments into registers once, before
//            the first step, and multiplies from them (NSLAB slabs of SLAB chunks at most:
//            partition.Partition.areg_slabs); 0: from shared memory at every step
//   WG       the products on wgmma (sm_90a; cudnn_rnn/lowbit/wgmma.py's helpers and
//            instruction, for FH and width WGN, are prepended): k-group g is warpgroup g
//            (two a CTA: the input and the recurrent part, or K in halves without one), its
//            warp w multiplies the CTA's m-tile w, NSLAB slabs a step, the state staged in
//            the canonical layout wgmma reads (8-row groups of SLAB * 32 bytes, 16-byte
//            columns of 8 rows contiguous); A, the weight rows: 1 fragments in registers for
//            the whole sequence (as AREG's), 2 from shared memory, where the blob put them
//            in the canonical layout (partition.Partition.wg_slabs, wg_shared); WGM
//            instructions a chunk, 64 rows each (A from shared memory when more than one);
//            WGZ bytes of zeros wgmma reads past a group's chunks (fits.wg_zero)
//   WGB      1 (with WG): the h and layer-input codes lie in global memory in the layout wgmma
//            reads (per slot, batch slice by batch slice of WGN rows: 16-byte columns of K,
//            each WGN rows x 16 bytes, 8-row groups 128 bytes apart), so that one thread a
//            warpgroup stages a slab with one bulk copy (cp.async.bulk) completing on an
//            mbarrier of its ring stage, which the warpgroup waits on just before that
//            slab's products (a ring shallower than a step's slabs: each stage refilled
//            once its slab's products are done); WGS batch slices
//   MCAST    (with WGB) CTAs of a thread-block cluster that share each slab's copy (1: none):
//            cluster-mates are CTAs of one group (pseudo-layer, batch slice), which stage the
//            same slabs into the same place of their rings (partition.Partition.mcast); the
//            CTA of cluster rank r copies slabs r, r + MCAST, ... and multicasts each into
//            every mate's ring, completing each mate's mbarrier of that stage, which each CTA
//            arms for every slab itself. The ring holds a whole step (STAGES >= NSLAB), so a
//            copy into a mate's stage waits for nothing but the counters: a mate signals its
//            step only after its products and gate math are done with its ring
//   GXG      1 (with WGB): layer 0's input projection is read by the gate math from global
//            memory (__ldg), each step's rows brought into L2 one step ahead, instead of
//            being staged in shared memory (partition.Partition.gx_global: room for the ring)
//   GXL2     1 (with WG, without GXG): layer 0's staged input projection is too large to
//            stay in L2 from the input GEMM on (limits.projection_streams): each step's is
//            brought into L2 by one bulk prefetch a CTA a step before its copies
//   GR       1 (with WGB; LSTM or GRU, 16 units a CTA, 64 rows): the gate math
//            on the sums in registers, no partial sums in shared memory: the rows lie so
//            that warp w of each warpgroup holds units 4w .. 4w+3, a lane gates 0 and 2 (lanes
//            0-15) or 1 and 3 (lanes 16-31) of one of them (tables.gate_rows; a GRU's gate 3
//            rows zero; its input part's sums, where it has one, traded apart); the two
//            warpgroups trade half their sums (each keeps WGN / 16 blocks of 8 columns), then
//            lanes l and l ^ 16 one column each, so that a lane holds its unit's four gates at
//            one column of each block it keeps; its h and c stay in registers
//   CLUSTER  CTAs of a thread-block cluster (0: none): each group (pseudo-layer, batch
//            slice) is one cluster (partition.Partition.cluster), and a CTA meets its group's
//            previous step at the cluster barrier (barrier.cluster arrive.release at the end
//            of a step, wait.acquire before the next stages h) instead of polling the
//            group's counter; the counters then serve the layers above only
//   KS, TS   every CTA's k-groups and n-groups of warps where all CTAs agree, so that the
//            loops over them have constant bounds (0: each CTA reads its own, Slice.ks/ts)
//   XE       1 (with WGB): each warpgroup waits for what it reads, its own thread polling:
//            where a layer has an input part the input part's warpgroups for the layer below
//            (far ahead in the wavefront: its h is there; layer 0's input was written
//            before the launch, or with XQ three steps ahead: no wait but at step 0), the
//            recurrent part's for the CTA's
//            own group, so that the input part is staged and multiplied while the recurrent
//            part still waits; a warpgroup that gives up skips its products, and the CTA
//            gives up together after the barrier that ends them
//   PREX     1 (with XE; one layer, its input products in the kernel): the input part's
//            warpgroups copy the next step's first STAGES slabs as soon as their products
//            of this step are done, so those copies are in flight through the gate math, the
//            signal and the next step's wait (layer 0's input, written before the launch or
//            with XQ three steps ahead, waits for nothing); the ring lies group by group
//            (RING_AT), the partial sums over the recurrent part's stages only (fits.prefetch)
//   FANOUT   1 unless defined 0 (with WGB): the copies that fill a step's ring stages (and
//            PREX's) issued at once, stage st's by the warpgroup's thread st, not one after
//            another by its thread 0 while the warpgroup's other warps wait for the first
//            (H100: seed LSTM INT8 0.0704 ms against 0.0746, 1024/64 0.2022 against 0.2256;
//            tools/persistent_probe.py --variants one_issuer, docs/lowbit.md)
//   STAGES0  (with WGB; not with MCAST or PREX) k-group 0's ring stages where they differ
//            from the other group's STAGES (partition.plan gives the room an equal ring
//            leaves to the groups past the first: one stage more); the ring then lies group
//            by group, and each warpgroup runs a copy of the slab loop of its own depth
//   XQ       (with WGB; layer 0's input part in the kernel, one direction) layer 0's input
//            codes written by layer 0's own CTAs, not before the launch: each quantizes its
//            share of its batch slice's rows of x three steps ahead (slots 0-2 before the
//            first signal), XQ units of 4 values a worker at most (fits.quantize_share). Its
//            loads are issued past a step's wait, its codes stored past its signal (H100,
//            LSTM 50/1/1024/256 INT8 'wbeiqs2': 0.4143 ms against 0.4477 before both); at
//            step 0 the input part's warpgroups (XE) wait for the group's first signal too
//   MAXW (waits per step), SPIN_LIMIT, TRACE (1: thread 0 of each CTA writes the clock at
//   the phases of every step into trace[(cta * T + step) * 12 + i], i as MARK's below:
//   0 step start, 1 wait met, 8 first slab landed, 2 products done, 3 partial sums, 4 gate
//   math, 5 signal, 9 y stored, 10 the next projection's copies issued (clock64); 6 and 7
//   (globaltimer) beside 1 and 5)
// The rounding and gate helpers (lb_bf16, lb_int8, lb_e4m3, lb_sig, lb_tanh) are
// kernels.PERSISTENT_PREAMBLE, the memory and ordering helpers device.cuh, a code's bits
// and a cell's step (bits, put, cell) cells.cuh (and for WG, wgmma.source), all prepended.

#define WARPS (THREADS / 32)
#define SROW (SLAB * 32 + PAD)
#ifndef WG  // persistent.defines names WG, WGN, WGM and WGZ only for a kernel on wgmma
#define WG 0
#define WGN 8
#define WGM 1
#endif
#ifndef WGB
#define WGB 0
#define WGS 1
#endif
#if WGB && !WG
#error "bulk staging feeds wgmma"
#endif
#if WGB && STAGES < 2
#error "bulk staging refills a stage while the next slab's products run: two stages at least"
#endif
#ifndef MCAST
#define MCAST 1
#endif
#ifndef GXG
#define GXG 0
#endif
#if GXG && !WGB
#error "the input projection from global memory is bulk staging's (partition.plan)"
#endif
#ifndef GXL2
#define GXL2 0
#endif
#ifndef XQ
#define XQ 0
#endif
#if XQ && !WGB
#error "XQ: layer 0's input codes in wgmma's layout, written by the kernel (bulk staging's)"
#endif
#define XQW (THREADS - THREADS / 128 * 32)  // XQ's workers: warps past each warpgroup's first
#if GXL2 && (!WG || GXG)
#error "GXL2: the staged projection's L2 prefetch is the copy engine's (wgmma's kernels)"
#endif
#ifndef GR
#define GR 0
#endif
#if GR && (!WGB || CELL < 2 || WGM != 1 || WGN % 16)
#error "the gate math in registers: bulk staging, an LSTM or GRU, 64 rows, whole blocks"
#endif
#define GRH (WGN / 16)  // GR: blocks of 8 columns each warpgroup keeps
#ifndef XE
#define XE 0
#endif
#ifndef MINB  // CTAs a multiprocessor holds at once (launch bounds: 2 caps a thread at 128 registers)
#define MINB 1
#endif
#if XE && (!WGB || MCAST > 1)
#error "XE: each warpgroup's own wait is bulk staging's, without shared copies"
#endif
#ifndef PREX
#define PREX 0
#endif
#ifndef FANOUT
#define FANOUT 1
#endif
#ifndef STAGES0
#define STAGES0 STAGES
#endif
#define ASYM (STAGES0 != STAGES)
#define MAXST (STAGES0 > STAGES ? STAGES0 : STAGES)
#if ASYM && (!WGB || PREX || MCAST > 1 || STAGES0 < 2)
#error "STAGES0: bulk staging's ring, its own copies, not copied ahead, two stages at least"
#endif
#if WGB && FANOUT && MAXST > 128
#error "FANOUT: stage st's copy is issued by the warpgroup's thread st (partition.MAX_RING)"
#endif
#if PREX && !XE
#error "PREX: the next step's input part copied ahead by its own warpgroups (XE)"
#endif
// wgmma's ring: stage st of k-group g, SBYTES each (a slab of the batch slice's rows), stage
// by stage, or (PREX) group by group, the partial sums then past the input part's groups,
// or (ASYM) group by group, k-group 0's STAGES0 stages first
#define SBYTES (WGN * SLAB * 32)
#define RING_AT(st, g) ((unsigned)(PREX ? (g) * STAGES + (st)                                \
                                   : ASYM ? ((g) ? STAGES0 + ((g) - 1) * STAGES : 0) + (st)  \
                                   : (st) * ks + (g)) * SBYTES)
// GR: the row of gate q of unit u (tables.gate_rows), and where a step's staged projection
// of (batch row b, unit u) lies in its gate's (nb, 16) block: unit blocks of 4 turned by
// (b >> 1) & 3, so that a warp's reads (4 units by 8 batch rows) meet 32 banks
__device__ __forceinline__ int gr_row(int q, int u) {
    return 16 * (u >> 2) + 4 * (q & 1) + 8 * (q >> 1) + (u & 3);
}
#define GX_AT(b, u, p) (GR ? (b) * 16 + ((u) ^ ((((b) >> 1) & 3) << 2)) : (p))
#if MCAST > 1 && (!WGB || STAGES < NSLAB)
#error "a shared copy lands in every mate's ring: bulk staging, a ring a whole step deep"
#endif
#if MCAST > 1 && CLUSTER
#error "a cluster is either a group met at its barrier (CLUSTER) or mates sharing copies"
#endif
#if WGB
// where code byte `byte` of row b of batch slice bs of slot t lies in a state buffer whose
// rows are rowb bytes, in wgmma's layout (the slots WGS * WGN rows each)
__device__ __forceinline__ unsigned code_at(int t, int bs, int b, int byte, int rowb) {
    return (unsigned)(t * WGS + bs) * WGN * rowb + (unsigned)(byte >> 4) * (WGN * 16)
           + (b >> 3) * 128 + (b & 7) * 16 + (byte & 15);
}
// the parity of slab i's phase of its ring stage at step s, in a ring of ST stages: stage
// i % ST takes slabs st, st + ST, ... (`uses` of them a step), so slab i is its use
// s uses + i / ST
__device__ __forceinline__ unsigned bulk_parity(int s, int i, const int ST) {
    const int uses = (NSLAB - i % ST + ST - 1) / ST;
    return (unsigned)(s * uses + i / ST) & 1u;
}
// mbar_wait, bounded as the counters' waits are: past SPIN_LIMIT polls, or once another CTA
// has given up, it sets the status and returns (the launch's numbers are then not read: the
// engine raises on the status, and this CTA gives up at its next step's wait), so a copy
// that never lands stalls the launch for seconds, not for ever; false where it gave up
__device__ __forceinline__ bool slab_wait(unsigned bar, unsigned parity, int* status) {
    long long spins = 0;
    unsigned done = 0;
    while (!done) {
        done = mbar_try(bar, parity);
        if (!done && (++spins > SPIN_LIMIT || ((spins & 1023) == 0 && *(volatile int*)status))) {
            atomicExch(status, 1);
            return false;
        }
    }
    return true;
}
#endif
#if WG
#if FH == 2
typedef int wacc_t;  // int8 sums: int32
#else
typedef float wacc_t;
#endif
#if AREG || POLL || CLUSTER || THREADS != 256 || (WG == 1 && WGM > 1)
#error "wgmma runs two warpgroups with their own fragments, counters and no polling"
#endif
#endif
// the input part's sums kept apart from the recurrent part's: only GRU's gate math needs
// them apart (n = tanh(X + r * R)); the other cells add them in the partial sums
#define SPLIT (HASX && CELL == 3)
// (batch row, unit) pairs a thread's gate math takes at once: 1 is 4 % faster than 4 at the
// seed shape and LSTM 50/1/1024/64 on the H200 (a third less code in the step loop); with
// GXG, whose loads from L2 all of a thread's pairs at once would put in flight together, 8
// and 1 were within 1.5 % on an H100 at LSTM 50/1/1024/256, 50/1/2048/128 (docs/lowbit.md)
#define PG 1
#if CLUSTER && POLL
#error "a launch in clusters does not poll: a polling CTA's early return skips its barriers"
#endif
#if CLUSTER || MCAST > 1
#define CLUSTER_DIMS __cluster_dims__(CLUSTER ? CLUSTER : MCAST, 1, 1)
#else
#define CLUSTER_DIMS
#endif
#if CLUSTER
// a CTA that gives up before step s's wait: the cluster's other CTAs meet it at every
// barrier to the end (step s to the last, a wait and an arrive each, then the final wait)
__device__ __forceinline__ void cl_meet_to_end(int s, int T) {
    for (int r = s; r < T; ++r) {
        cl_wait();
        cl_arrive();
    }
    cl_wait();
}
#endif
#if MCAST > 1
// the cluster's CTAs meet (every one's mbarriers initialized before a mate's copy completes
// on them; none leaves while a mate's copy may still land in it)
__device__ __forceinline__ void mc_meet() {
    cl_arrive();
    cl_wait();
}
#endif

struct Layer {                 // one pseudo-layer (persistent.LAYER)
    const float* dqx;          // (GATES*H) input part's dequantization per row
    const float* dqh;          // (GATES*H) recurrent part's
    const float* bW;
    const float* bR;
    const void* gx;            // layer 0: (T*B, GATES*H) input GEMM output; else null
    const unsigned char* xin;  // a layer's input part: (T, B, xrowb) codes in FX (XQ: its own)
    unsigned char* hq;         // (T+1, B, hrowb) h codes in FH, slot 0 from h0
    unsigned char* xout0;      // the next layer's inputs (one per reader), or null
    unsigned char* xout1;
    float hscale, xscale0, xscale1;
    int layer, dir;
    int last;                  // 1: the last layer's, which writes y
    int xqi;                   // XQ, layer 0: x's values a row (the input size); else 0
    float xqscale;             // XQ, layer 0: its input scale
};

struct Slice {                 // one CTA (partition.Slice)
    long long blob;
    int k, j0, nu, bs, b0, nb, mpad, npad, ts, ks, kx, nxc, nc, off_dq, off_own, off_gx, off_ring;
    int ctr;                   // its group's counter, which its steps advance
};

// (batch row, unit) pairs of a CTA, p = b * nu + u, visited THREADS apart from tid without
// a division in the loop: for (Pairs it(tid, nu); it.p < n; it.next()) ...
struct Pairs {
    int p, b, u, db, du, nu;
    __device__ __forceinline__ Pairs(int tid, int nu_) : p(tid), b(tid / nu_), u(tid % nu_),
        db(THREADS / nu_), du(THREADS % nu_), nu(nu_) {}
    __device__ __forceinline__ void next() {
        p += THREADS;
        b += db;
        u += du;
        if (u >= nu) { u -= nu; ++b; }
    }
};

// whether the first `real` bytes of a staged 16-byte piece in format F hold a sentinel byte
// (POLL): 0x80 for int8, 0xFF for e4m3, 0xFFFF for the 16-bit formats
__device__ __forceinline__ bool unset(const unsigned char* d, int real, int f) {
    const uint4 w = *(const uint4*)d;
    const unsigned v[4] = {w.x, w.y, w.z, w.w};
    bool any = false;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const int n = min(4, max(0, real - 4 * k));  // real bytes of this word
        const unsigned keep = n >= 4 ? 0xFFFFFFFFu : (1u << (8 * n)) - 1u;
        const unsigned hit = f < 2 ? __vcmpeq2(v[k], 0xFFFFFFFFu)
                                   : __vcmpeq4(v[k], f == 2 ? 0x80808080u : 0xFFFFFFFFu);
        any |= (hit & keep) != 0u;
    }
    return any;
}

extern "C" __global__ void CLUSTER_DIMS __launch_bounds__(THREADS, MINB)
persistent_rnn(const Layer* __restrict__ layers, const Slice* __restrict__ slices,
               const int* __restrict__ waits, const unsigned char* __restrict__ blob,
               unsigned* counters, int* status, long long* trace,
               const float* __restrict__ xq, const float* __restrict__ hx,
               const float* __restrict__ cx, float* y, float* hy, float* cy, int T, int B,
               int H, int D, int hrowb, int xrowb)
{
    // xq: x (T, B, input), which XQ's layer 0 quantizes into its xin; hx, cx, hy, cy:
    // (pseudo-layers, B, H); y (T, B, D*H). Arguments, not the layer table,
    // so that a forward reads and writes the caller's arrays (Forward.bind) as they are
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ int bail;
#if XE
    __shared__ int xbail[2];  // each warpgroup's wait given up (XE)
#endif
#if WGB
    // WGB: one mbarrier a ring stage and warpgroup, completed by that slab's bulk copy
    __shared__ __align__(8) unsigned long long mbars[MAXST][2];
    if (threadIdx.x == 0) {
        for (int i = 0; i < MAXST * 2; ++i) mbar_init(smem_addr(&mbars[i / 2][i % 2]));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
#endif
#if CLUSTER
    __shared__ int quit;  // a cluster-mate gave up: read after each step's cluster barrier
#endif
#if MCAST > 1
    __shared__ int lost;  // a slab never landed (a mate gave up before copying its share)
    const unsigned rank = cl_rank();
#endif
    const Slice S = slices[blockIdx.x];
    const Layer L = layers[S.k];
    const unsigned lb = (unsigned)S.k * B * H;  // this pseudo-layer's states

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    // KS, TS: every CTA's warp groups along K and along n, where all agree (0: read here)
    const int nu = S.nu, nb = S.nb, mpad = S.mpad, npad = S.npad, ks = KS ? KS : S.ks;
    const int nxc = S.nxc, nc = S.nc, rowb = nc * 32 + PAD, gH = GATES * H;
    const int j0 = S.j0, b0 = S.b0;
    unsigned char* ws = smem;
    // per row: dequantization of the input part (layer 0: of the input GEMM's output) and of
    // the recurrent part, then the two biases; [4][mpad]
    float* dqs = (float*)(smem + S.off_dq);
#if !GR  // GR: h and c in registers (h_r, c_r), no room for them (partition._slice)
    float* own_h = (float*)(smem + S.off_own);    // this CTA's h and c, (nb, nu)
    float* own_c = own_h + npad * nu;
#endif
#if !GXG  // GXG: no room for it (partition.plan), and nothing may read it
    float* gxs = (float*)(smem + S.off_gx);       // layer 0: this step's input projection
#endif
    unsigned char* ring = smem + S.off_ring;
    // after the product: the recurrent part's sums [ks][npad][ps] (with the input part's
    // but for GRU), then GRU's input part's
    // (ps: mpad padded to 4 past a multiple of 32, partition.pstride)
    const int ps = mpad + 4 + (mpad & 16);
    float* part = (float*)(ring + (PREX ? (unsigned)S.kx * STAGES * SBYTES : 0u));
    const int kstride = npad * ps;  // floats between two k-groups' partial sums
    float* part_x = part + (unsigned)ks * kstride;
    const int* my_waits = waits + (unsigned)blockIdx.x * T * MAXW * 2;
    unsigned* const mine = counters + S.ctr;

    // the weight rows, once for the whole sequence
    {
        const unsigned char* src = blob + S.blob;
        const int n16 = mpad * rowb / 16;
#pragma unroll 1
        for (int i = tid; i < n16; i += THREADS) cp16(ws + 16 * i, src + 16 * i, 16);
        cp_commit();
    }
#pragma unroll 1
    for (int r = tid; r < mpad; r += THREADS) {  // once: a division is no cost here
        float dx = 0.0f, dh = 0.0f, bw = 0.0f, br = 0.0f;
        // GR: row r is gate q of unit u as gr_row lays them
        const int q = GR ? ((r >> 2) & 1) | ((r >> 2) & 2) : r / nu;
        const int u = GR ? 4 * (r >> 4) + (r & 3) : r - q * nu;
        if (GR ? r < 64 && u < nu && q < GATES : r < GATES * nu) {
            const int row = q * H + j0 + u;
            dx = L.dqx[row];
            dh = L.dqh[row];
            bw = L.bW[row];
            br = L.bR[row];
        }
        dqs[r] = dx;
        dqs[mpad + r] = dh;
        dqs[2 * mpad + r] = bw;
        dqs[3 * mpad + r] = br;
    }
#pragma unroll 1
    for (Pairs it(tid, nu); it.p < nb * nu; it.next()) {  // h0, c0 in; h0's codes to slot 0
        const unsigned g = lb + (unsigned)(b0 + it.b) * H + j0 + it.u;
        const float h = hx[g];
#if !GR
        own_h[it.p] = h;
#if CELL == 2
        own_c[it.p] = cx[g];
#endif
#endif
#if WGB
        put<FH>(L.hq + code_at(0, S.bs, it.b, (j0 + it.u) * BPE(FH), hrowb), h, L.hscale);
#else
        put<FH>(L.hq + (unsigned)(b0 + it.b) * hrowb + (unsigned)(j0 + it.u) * BPE(FH), h,
                L.hscale);
#endif
    }
#if XQ
    // layer 0's input codes (XQ): this CTA's share of its batch slice's units of 4 values
    // (unit v: row v / per, its values 4 (v % per) to 4 (v % per) + 3; per = ceil(xqi / 4)
    // units a row), the share in proportion to its units of H, so that the slice's CTAs
    // together write every unit once (a row's codes past xqi, in no unit, stay the
    // buffer's zeros). Its workers are the warps past each warpgroup's first, whose threads
    // poll the counters and issue the bulk copies (no load of x in flight where they wait
    // or fence); worker w takes units w, w + XQW, ... of the share, loaded (x_load, zeros
    // past a row's end) and stored as codes (x_store: one 4- or 8-byte store a unit, within
    // a 16-byte piece; v / s correctly rounded, as the quantizer before the launch divides)
    const int xq_per = (L.xqi + 3) >> 2;
    const long long xq_n = L.xqi ? (long long)nb * xq_per : 0;
    const int xq_a = (int)(xq_n * j0 / H), xq_e = (int)(xq_n * min(j0 + nu, H) / H);
    const bool xq_vec = (L.xqi & 3) == 0 && ((size_t)xq & 15) == 0;
    const int xq_w = (tid & 127) < 32 ? -1 : (tid >> 7) * 96 + (tid & 127) - 32;
    // this worker's unit k: false past its share, else its row b and its first value f
    auto x_unit = [&](int k, int& b, int& f) {
        const int u = xq_w < 0 ? xq_e : xq_a + xq_w + k * XQW;
        if (u >= xq_e) return false;  // (xq_per is 0 where xq_e is: no division by it)
        b = u / xq_per;
        f = (u - b * xq_per) * 4;
        return true;
    };
    auto x_load = [&](int t, float (&v)[XQ][4]) {
#pragma unroll
        for (int k = 0; k < XQ; ++k) {
            int b, f;
            v[k][0] = v[k][1] = v[k][2] = v[k][3] = 0.0f;
            if (!x_unit(k, b, f)) continue;
            const float* row = xq + ((size_t)t * B + b0 + b) * L.xqi + f;
            if (xq_vec) {
                const float4 w = __ldg((const float4*)row);
                v[k][0] = w.x; v[k][1] = w.y; v[k][2] = w.z; v[k][3] = w.w;
            } else {
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    if (f + e < L.xqi) v[k][e] = __ldg(row + e);
            }
        }
    };
    auto x_store = [&](int t, const float (&v)[XQ][4]) {
#pragma unroll
        for (int k = 0; k < XQ; ++k) {
            int b, f;
            if (!x_unit(k, b, f)) continue;
            unsigned char* at = const_cast<unsigned char*>(L.xin)
                                + code_at(t, S.bs, b, f * BPE(FX), xrowb);
            unsigned c[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) c[e] = bits<FX, true>(v[k][e], L.xqscale);
            if (BPE(FX) == 1)
                *(unsigned*)at = c[0] | c[1] << 8 | c[2] << 16 | c[3] << 24;
            else
                *(uint2*)at = make_uint2(c[0] | c[1] << 16, c[2] | c[3] << 16);
        }
    };
    {  // slots 0-2, before the first signal
        float v[3][XQ][4];
#pragma unroll
        for (int t = 0; t < 3; ++t)
            if (t < T) x_load(t, v[t]);
#pragma unroll
        for (int t = 0; t < 3; ++t)
            if (t < T) x_store(t, v[t]);
    }
#endif
    // layer 0: the input projection of step s (no recurrence in it) is fetched before the
    // wait for step s, into gxs[q][b][u] (WGB: waited for before the gate math, so that its
    // copies land beside the step's products, not before its first)
    auto fetch_gx = [&](int s) {
        if (!L.gx) return;
        const int t = L.dir ? T - 1 - s : s;
        const float* src = (const float*)L.gx + (unsigned)(t * B + b0) * gH + j0;
#if GXG
        // into L2 (a long sequence's projection is not there): each (batch row, gate) run
        // of the CTA's units, a line every 32 floats and the run's last one
#pragma unroll 1
        for (int i = tid; i < nb * GATES; i += THREADS) {
            const float* run = src + (unsigned)(i / GATES) * gH + (i % GATES) * H;
#pragma unroll 1
            for (int o = 0; o < nu; o += 32)
                asm volatile("prefetch.global.L2 [%0];" :: "l"(run + o) : "memory");
            asm volatile("prefetch.global.L2 [%0];" :: "l"(run + nu - 1) : "memory");
        }
#else
#pragma unroll 1
        for (Pairs it(tid, nu); it.p < nb * nu; it.next())
#pragma unroll
            for (int q = 0; q < GATES; ++q)
                cp4(gxs + q * nb * nu + GX_AT(it.b, it.u, it.p),
                    src + (unsigned)it.b * gH + q * H + it.u);
#endif
    };
    // ... and, where it is too large to stay in L2 from the input GEMM on (GXL2, with WG:
    // Hopper's copy engine), brought into L2 a step before that, so that those copies read
    // L2, not HBM: this CTA's share of its batch slice's rows (one run of memory; the slice's
    // CTAs, together, all of its rows), one bulk prefetch by thread 0 of the bytes a to e
    // (past the projection's start, which is 16-byte aligned): the share's bounds rounded
    // inward to 16 bytes, which the prefetch takes (a row is 4 GATES H bytes, which a GRU's
    // or an RNN's H not a multiple of 4 leaves unaligned; a hint, so a few bytes may miss)
    auto gx_to_l2 = [&](int s) {
#if GXL2
        if (!L.gx || tid != 0 || s >= T) return;
        const int t = L.dir ? T - 1 - s : s;
        const int r0 = nb * j0 / H, r1 = nb * (j0 + nu) / H;
        const size_t row = (size_t)(t * B + b0);
        const size_t a = ((row + r0) * gH * 4 + 15) / 16 * 16, e = (row + r1) * gH * 4 / 16 * 16;
        if (e > a) l2_prefetch((const char*)L.gx + a, (unsigned)(e - a));
#endif
    };
    fetch_gx(0);
    cp_commit();
    gx_to_l2(1);
#if WG == 2 || WGB
    // zeros where wgmma reads A past the CTA's rows (an instruction takes 64) and, as A or
    // (WGB) as B, past a group's chunks (wz: 64 rows x 32 bytes, or WGN rows x 32 bytes if
    // more: WGZ); then every write of A, for the async proxy
    unsigned char* const wz = smem + 64 * WGM * rowb;
#pragma unroll 1
    for (int i = mpad * rowb / 4 + tid; i < (64 * WGM * rowb + WGZ) / 4; i += THREADS)
        ((unsigned*)smem)[i] = 0u;
#endif
    cp_wait<0>();
#if WG
    fence_proxy_async();
#endif
    if (tid == 0) bail = 0;
#if XE
    if (tid < 2) xbail[tid] = 0;
#endif
#if MCAST > 1
    if (tid == 0) lost = 0;
#endif
    __syncthreads();
#if MCAST > 1
    mc_meet();  // every mate's mbarriers initialized before any copy completes on them
#endif
    if (!POLL && tid == 0) red_release(mine, 1u);
#if CLUSTER
    cl_arrive();  // slot 0 of h written: the cluster's first step may read it
#endif
#if TRACE
#define MARK(i) do { if (tid == 0) trace[((unsigned)blockIdx.x * T + s) * 12 + (i)] = \
    ((i) == 6 || (i) == 7 ? globaltimer() : clock64()); } while (0)
#else
#define MARK(i) do { } while (0)
#endif

    const int ts = TS ? TS : S.ts;
    // WG: k-group kg is warpgroup kg, each of its warps on its own m-tile and every n-tile
    const int ng = WG ? 0 : warp % ts, kg = WG ? warp >> 2 : warp / ts, kx = S.kx;
    const bool active = kg < ks;
    // k-group g multiplies chunks ga(g) .. gb(g) - 1 (Slice.chunks): with an input part
    // groups 0 .. kx-1 the input part's, the others the recurrent part's (kx 0: all of K
    // evenly, the only case where one group straddles both parts)
    const int hbase = kx ? nxc : 0;
    const int spx = kx ? (nxc + kx - 1) / kx : 0, sph = (nc - hbase + ks - kx - 1) / (ks - kx);
    auto ga = [&](int g) { return g < kx ? min(nxc, g * spx) : min(nc, hbase + (g - kx) * sph); };
    auto gb = [&](int g) { return min(g < kx ? nxc : nc, ga(g) + (g < kx ? spx : sph)); };
    // WG: every CTA stages and multiplies NSLAB slabs, a group's chunks past its own zeros
    // (its A fragments are zero there too), so the issue of the step's wgmma is straight-line
    // code: ptxas waits for each instruction before the next across any branch between them
    const int nslab = WG ? NSLAB : (max(spx, sph) + SLAB - 1) / SLAB;
    const int c0 = ga(kg), c1 = gb(kg);
    const bool xg = kg < kx;  // this warp's group multiplies the input part
    const int gq = lane >> 2, gr = lane & 3, mt = mpad >> 4;
    // EXACT: every CTA fills the tiles (partition.Partition.exact), so no bound is checked
    auto m_in = [&](int m) { return EXACT || m < mt; };
    auto n_in = [&](int nn) { return EXACT || (ng * NTW + nn) * 8 < npad; };
    // this lane's byte offsets in an ldmatrix of A (weight rows) and of B (staged state)
    const unsigned a_lane = (unsigned)((lane & 7) + ((lane >> 3) & 1) * 8) * rowb + (lane >> 4) * 16;
    const unsigned b_lane = (unsigned)(lane & 7) * SROW + ((lane >> 3) & 1) * 16;
    // staging: thread tid copies 16-byte piece (tid & 7) of rows tid/8, tid/8 + THREADS/8, ...
    // of every k-group's slab (SLAB * 32 = 128 bytes a row); the source offsets of its
    // first row, set once (the step moves only the bases)
    // (WG: eight threads in a row take rows 0-7 of one piece, the 128 contiguous bytes of a
    // canonical core-matrix column: their 16-byte writes meet no bank twice)
#if WG
    const int piece = (tid >> 3) & (SLAB * 2 - 1), prow = (tid & 7) + 8 * (tid / (SLAB * 16));
#else
    const int piece = tid & (SLAB * 2 - 1), prow = tid / (SLAB * 2);
#endif
    const int pchunk = piece >> 1;
    const long long xrow0 = (long long)(b0 + min(prow, nb - 1)) * xrowb + (piece & 1) * 16;
    const long long hrow0 = (long long)(b0 + min(prow, nb - 1)) * hrowb + (piece & 1) * 16
                            - (long long)nxc * 32;
#if AREG
    // this warp's weight fragments, for the whole sequence: chunk c0 + i of m-tile m in
    // ar[m][i] (entries past the group's last chunk are never read)
    unsigned ar[MT][NSLAB * SLAB][4];
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int i = 0; i < NSLAB * SLAB; ++i)
            if (active && m_in(m) && c0 + i < c1)
                ldsm_x4(ar[m][i], ws + a_lane + (unsigned)m * 16 * rowb + (c0 + i) * 32);
#endif
#if WG == 1
    // this warp's fragments of m-tile `warp & 3` for its group's chunks (zero past the rows
    // or the chunks: a CTA of fewer rows than the instruction's 64 multiplies zeros there)
    unsigned war[NSLAB * SLAB][4];
#pragma unroll
    for (int i = 0; i < NSLAB * SLAB; ++i) {
        if (c0 + i < c1 && (warp & 3) * 16 < mpad) {
            ldsm_x4(war[i], ws + a_lane + (unsigned)(warp & 3) * 16 * rowb + (c0 + i) * 32);
        } else {
#pragma unroll
            for (int r = 0; r < 4; ++r) war[i][r] = 0u;
        }
    }
#endif

#if GR
    // this lane's unit and column half (gq >> 2), its two rows' factors (its warpgroup's
    // part of K), its unit's four gates' biases and (layer 0) projection factors, its pairs'
    // h and c, a pair a block it keeps: in registers for the whole sequence
    const int gu = 4 * (warp & 3) + (gq & 3), gup = gq >> 2;
    // the column of block jj of those this warpgroup keeps that this lane's pair takes
    auto gr_col = [&](int jj) { return (kg * GRH + jj) * 8 + 2 * gr + gup; };
    float gr_dq[2], gr_dx[4], gr_bw[4], gr_br[4], h_r[GRH], c_r[GRH];
#pragma unroll
    for (int h = 0; h < 2; ++h)
        gr_dq[h] = dqs[(kg < kx ? 0 : mpad) + 16 * (warp & 3) + gq + 8 * h];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        gr_dx[q] = dqs[gr_row(q, gu)];
        gr_bw[q] = dqs[2 * mpad + gr_row(q, gu)];
        gr_br[q] = dqs[3 * mpad + gr_row(q, gu)];
    }
#pragma unroll
    for (int jj = 0; jj < GRH; ++jj) {  // (past the slice's rows or units: never stored)
        const int col = min(gr_col(jj), nb - 1);
        const unsigned g = lb + (unsigned)(b0 + col) * H + j0 + min(gu, nu - 1);
        h_r[jj] = hx[g];
        c_r[jj] = CELL == 2 ? cx[g] : 0.0f;
    }
#endif
#pragma unroll 1
    for (int s = 0; s < T; ++s) {
        const int t = L.dir ? T - 1 - s : s;
        MARK(0);
#if WGB
        // h of batch row b, unit j at this step: its codes for the next step (FH) and for
        // the layers above (FX), each in wgmma's layout
        auto hand_on = [&](int b, int j, float v) {
            put<FH>(L.hq + code_at(s + 1, S.bs, b, j * BPE(FH), hrowb), v, L.hscale);
            const unsigned xat = code_at(t, S.bs, b, (L.dir * H + j) * BPE(FX), xrowb);
            if (L.xout0) put<FX>(L.xout0 + xat, v, L.xscale0);
            if (L.xout1) put<FX>(L.xout1 + xat, v, L.xscale1);
        };
#endif
#if XQ
        float xv[XQ][4];  // layer 0's input codes, three steps on
#endif
#if GR && GXG
        // this lane's pairs' input projection, loaded before the wait (nothing in the launch
        // writes it; brought into L2 a step ahead): its latency off the step's chain
        float gxr[GRH][GATES];
#pragma unroll
        for (int jj = 0; jj < GRH; ++jj)
#pragma unroll
            for (int q = 0; q < GATES; ++q)
                gxr[jj][q] = L.gx ? __ldg((const float*)L.gx + (unsigned)(t * B + b0 + min(
                    gr_col(jj), nb - 1)) * gH + q * H + j0 + gu) : 0.0f;
#endif
        // counters are filled from the first: none at all (a cluster's first layer) is no wait
        // (XE: thread 0 of each warpgroup, for the waits of what its warpgroup reads: wait
        // 0 is the own group's, the others the layer below's, tables.waits)
        if (!POLL && (XE ? (tid & 127) == 0 : tid == 0)
            && my_waits[(unsigned)s * MAXW * 2] >= 0) {
            int ok = 1, ctrs[MAXW];
            unsigned targets[MAXW];
#pragma unroll
            for (int i = 0; i < MAXW; ++i) {
                // (XQ: at step 0 the input part's too: slot 0 of x's codes, the group's)
                ctrs[i] = XE && kx && (kg < kx) != (i > 0) && !(XQ && s == 0 && kg < kx)
                          ? -1 : my_waits[((unsigned)s * MAXW + i) * 2];
                targets[i] = (unsigned)my_waits[((unsigned)s * MAXW + i) * 2 + 1];
            }
            long long spins = 0;
            // every counter read in one pass: one round trip once all are met (one after
            // another, a layer's second wait cost another trip: H200, seed LSTM INT8, layer
            // 1's wait 0.87 against 1.34 us, the forward 0.1459 against 0.1554 ms)
            for (;;) {
                unsigned v[MAXW];
#pragma unroll
                for (int i = 0; i < MAXW; ++i)
                    v[i] = ctrs[i] < 0 ? 0u : ld_acquire(counters + ctrs[i]);
                bool met = true;
#pragma unroll
                for (int i = 0; i < MAXW; ++i) met &= ctrs[i] < 0 || v[i] >= targets[i];
                if (met) break;
                if (++spins > SPIN_LIMIT || ((spins & 1023) == 0 && *(volatile int*)status)) {
                    ok = 0;
                    break;
                }
            }
            if (!ok) atomicExch(status, 1);
#if XE
            xbail[kg] = !ok;
#else
            bail = !ok;
#endif
        }
#if WGB
        fence_proxy_async();  // the ring's generic reads and writes of the step before, then
#endif                        // the bulk copies (async proxy) of this one
#if XE
        wg_bar(kg);  // this warpgroup's wait met, or given up: its products skipped, the
        const bool xskip = xbail[kg];  // CTA leaving together after the barrier past them
#else
        __syncthreads();
#endif
        if (!XE && bail) {
#if CLUSTER
            cl_meet_to_end(s, T);
#endif
            goto gave_up;
        }
#if CLUSTER
        cl_wait();  // the group's previous step, h's slot s, written by every CTA of it
        // ... unless one of them gave up (it still meets the barriers, so its slot s is not
        // written): the cluster gives up with it rather than read that slot. A flag of its
        // own: `bail` may not yet be read by every thread here (the barrier above waits for
        // the cluster's arrivals, not for this CTA's threads to pass their check of `bail`)
        if (tid == 0) quit = *(volatile int*)status;
        __syncthreads();
        if (quit) {
            cl_arrive();  // step s's, its wait met above
            cl_meet_to_end(s + 1, T);
            goto gave_up;
        }
#endif
        MARK(1);
        MARK(6);
#if XQ
        // layer 0's input codes of three steps on: loaded past the wait (before it, their
        // loads were in flight where the CTA's threads fence and the wait's thread polls:
        // the probe's xq_before_wait), stored past the signal (before it, the release waited
        // for them: xq_before_signal). Released by the next step's signal, they are read at
        // step s + 3 past the wait of s + 2 (and 'x''s copies of them past its products)
        if (s + 3 < T) x_load(s + 3, xv);
#endif

        // PREX: the input part's first stages of this step, copied at the end of the one before
        const bool ahead = PREX && kg < kx && s > 0;
#if WGB
        const unsigned char* xsrc = HASX ? L.xin + code_at(t, 0, 0, 0, xrowb) : nullptr;
        const unsigned char* hsrc = L.hq + code_at(s, 0, 0, 0, hrowb);
#else
        const unsigned char* xsrc = HASX ? L.xin + (unsigned)(t * B) * xrowb : nullptr;
        const unsigned char* hsrc = L.hq + (unsigned)(s * B) * hrowb;
#endif
        // this thread's 16-byte pieces of slab i (ring stage st), group by group: copied
        // (cp.async; rows past the batch slice zeros, read nothing), or with POLL and
        // `settle`, read again while a byte is still the sentinel (its producer has not
        // written it yet: only the row's codes, not its padding); a piece that never
        // settles sets status and bail
        auto stage = [&](int i, int st, bool settle, int issuer) {
#if WGB
            // one thread a warpgroup (its thread `issuer`): its group's slab i, every row of
            // the batch slice, one bulk copy (past the group's chunks, or the row's, finite
            // codes or the buffer's zero tail: they meet zero A); the slab lands in wgmma's
            // layout as it lies
            if ((tid & 127) == issuer) {
                // the codes other CTAs stored (generic proxy; acquired by this step's wait or,
                // for XE's input part, an earlier one, passed on by the barriers after it)
                // for the copy engine's reads (async proxy)
                asm volatile("fence.proxy.async.global;" ::: "memory");
                const int c = ga(kg) + i * SLAB;
                const bool x = HASX && c < nxc;
                const int rb = x ? xrowb : hrowb;
                const unsigned char* src = (x ? xsrc : hsrc) + (unsigned)S.bs * WGN * rb
                                           + (unsigned)(x ? c : c - nxc) * (WGN * 32);
                unsigned char* dst = ring + RING_AT(st, kg);
#if MCAST > 1
                // every slab armed here; this CTA's share copied once for every mate
                mbar_expect(smem_addr(&mbars[st][kg]), SBYTES);
                if (i % MCAST == (int)rank)
                    bulk_load_mc(smem_addr(&mbars[st][kg]), smem_addr(dst), src,
                                 SBYTES, (1u << MCAST) - 1u);
#else
                bulk_load(smem_addr(&mbars[st][kg]), smem_addr(dst), src, SBYTES);
#endif
            }
            return;
#endif
            const int within = i * SLAB + pchunk;  // the chunk's place in its group
#if WG  // canonical: 8-row groups of SLAB * 32 bytes, a piece's 8 rows 128 contiguous bytes
            unsigned char* dst = ring + (unsigned)(st * ks) * npad * (SLAB * 32)
                                 + (prow >> 3) * (SLAB * 256) + piece * 128 + (prow & 7) * 16;
#else
            unsigned char* dst = ring + ((unsigned)st * ks * npad + prow) * SROW + piece * 16;
#endif
#pragma unroll 1
            for (int grp = 0; grp < ks; ++grp) {
                const int c = ga(grp) + within;
                const bool past = c >= gb(grp);  // WG: staged as zeros
                if (past && !WG) continue;
                const bool x = c < nxc;
                const unsigned char* src = (x ? xsrc + xrow0 : hsrc + hrow0) + c * 32;
                const int stride = (x ? xrowb : hrowb) * (THREADS / (SLAB * 2));
                unsigned char* d = dst + (unsigned)grp * npad * (WG ? SLAB * 32 : SROW);
                const int bytes = min(16, (x ? D * H * BPE(FX) : H * BPE(FH))
                                          - ((x ? c : c - nxc) * 32 + (piece & 1) * 16));
#pragma unroll 1
                for (int n = prow, at = 0; n < npad; n += THREADS / (SLAB * 2), at += stride) {
                    const bool real = n < nb && !past;
                    if (!(POLL && settle)) {
                        cp16(d, src + (real ? at : 0), real ? 16 : 0);
                    } else if (real && bytes > 0) {
                        long long spins = 0;
                        while (unset(d, bytes, x ? FX : FH)) {
                            if (++spins > SPIN_LIMIT
                                || ((spins & 1023) == 0 && *(volatile int*)status)) {
                                atomicExch(status, 1);
                                bail = 1;
                                return;
                            }
                            if (spins > 2) __nanosleep(128);  // a long wait: less L2 traffic
                            cp16(d, src + at, 16);
                            cp_commit();
                            cp_wait<0>();
                        }
                    }
                    d += WG ? (THREADS / (SLAB * 16)) * (SLAB * 256)
                            : (THREADS / (SLAB * 2)) * SROW;
                }
            }
        };

#if WGB && FANOUT
        // every stage's first slab of a step, stage st's by the warpgroup's thread st (a
        // ring of `depth` stages)
        auto fan_out = [&](const int depth) {
            const int st = tid & 127;
            if (st < depth && st < nslab) stage(st, st, false, st);
        };
#endif

        float acc[MT][NTW][4];
#if STRADDLE
        float xacc[MT][NTW][4];
#endif
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
            for (int nn = 0; nn < NTW; ++nn)
#pragma unroll
                for (int r = 0; r < 4; ++r) {
                    acc[m][nn][r] = 0.0f;
#if STRADDLE
                    xacc[m][nn][r] = 0.0f;
#endif
                }
#if STRADDLE
        // a group on both parts: the input part's sums, dequantized, set aside where the
        // recurrent part begins
        auto flush_x = [&]() {
#pragma unroll
            for (int m = 0; m < MT; ++m)
#pragma unroll
                for (int nn = 0; nn < NTW; ++nn)
#pragma unroll
                    for (int r = 0; r < 4; ++r) {
                        const int row = m * 16 + gq + (r & 2 ? 8 : 0);
                        xacc[m][nn][r] = row < mpad ? value<FX>(acc[m][nn][r]) * dqs[row] : 0.0f;
                        acc[m][nn][r] = 0.0f;
                    }
        };
#endif

#if WG
        wacc_t wacc[WGM][WGN / 2];  // this warp's m-tile of each 64 rows by every n-tile
#pragma unroll
        for (int mb = 0; mb < WGM; ++mb)
#pragma unroll
            for (int r = 0; r < WGN / 2; ++r) wacc[mb][r] = 0;
#endif

#if ASYM
        // each warpgroup's ring depth a constant in a copy of the slab loop of its own (a depth
        // read at run time puts a branch at every slab's refill, between its wgmma): called
        // with each depth, inlined
        auto slabs = [&](const int GST) {
#else
        {
            constexpr int GST = STAGES;
#if XE
            if (xskip) goto products_done;
#endif
#endif
#pragma unroll 1
        for (int st = 0; st < MAXST - 1; ++st) {
            if (!(WGB && FANOUT) && st < GST - 1 && st < nslab && !ahead) stage(st, st, false, 0);
            cp_commit();
        }
#if WGB && FANOUT
        if (!ahead) fan_out(GST);
#endif
#if AREG || WG
#pragma unroll
        for (int i = 0; i < NSLAB; ++i) {  // unrolled: the fragments' indices are constants
            if (i >= nslab) break;
#else
#pragma unroll 1
        for (int i = 0; i < nslab; ++i) {
#endif
            // (WGB: the ring's last stage in the first pass, unless FANOUT issued every stage
            // above; the rest refill as products end)
            if ((!WGB || (!FANOUT && i == 0)) && i + GST - 1 < nslab && !ahead)
                stage(i + GST - 1, (i + GST - 1) % GST, false, 0);
#if !WGB  // (WGB: the ring's copies are bulk ones, waited for on its mbarriers)
            cp_commit();
            cp_wait<STAGES - 1>();
#endif
#if POLL
            stage(i, i % STAGES, true, 0);
            __syncthreads();
            {
                const int stop = bail;
                __syncthreads();  // read by all before a piece of the next slab may set it
                if (stop) goto gave_up;
            }
#elif WGB
            // slab i of this warpgroup landed: its products start while the later slabs'
            // copies are still in flight (each slab's wgmma after a fence, wg_fence below:
            // without one, ptxas puts its own in the wait loop's path and serializes every
            // wgmma of the step, its warning C7520)
#if MCAST > 1
            if (!slab_wait(smem_addr(&mbars[i % GST][kg]), bulk_parity(s, i, GST), status))
                lost = 1;
#else
            slab_wait(smem_addr(&mbars[i % GST][kg]), bulk_parity(s, i, GST), status);
#endif
#else
#if WG
            fence_proxy_async();  // the slab cp.async wrote (generic proxy), for wgmma's reads
#endif
            __syncthreads();
#endif
            if (i == 0) MARK(8);
#if WG
            {  // every chunk of this slab, one instruction each, asynchronous (the group's
               // chunks past its own multiply zeros: no branch between the instructions)
                const unsigned char* sb = ring + RING_AT(i % GST, kg);
                // wacc and war, written before, then read by wgmma (WGB: at every slab, after
                // its wait loop)
                if (WGB || i == 0) wg_fence();
#pragma unroll
                for (int cc = 0; cc < SLAB; ++cc) {
                    const int c = c0 + i * SLAB + cc;
#if WGB  // as the bulk copy laid it: 16-byte columns of WGN rows (K stride WGN 16); past
         // the group's chunks the copy brought whatever lay next (other rows' codes, other
         // slots, maybe a NaN): the zeros instead, a select
                    const unsigned long long b = wg_desc(c < c1 ? sb + cc * WGN * 32 : wz,
                                                         WGN * 16, 128);
#else
                    const unsigned long long b = wg_desc(sb + cc * 256, 128, SLAB * 256);
#endif
#if WG == 1
                    wg_mma_r(wacc[0], war[i * SLAB + cc], b, 1);
#else  // chunk c of the rows, or past the group's chunks the zeros (a select, no branch)
#pragma unroll
                    for (int mb = 0; mb < WGM; ++mb)  // 8-row groups 8 nc 32 bytes apart
                        wg_mma_s(wacc[mb], c < c1 ? wg_desc(ws + (mb * 64 * nc + c * 8) * 32, 128,
                                                            8 * nc * 32)
                                                  : wg_desc(wz, 128, 256), b, 1);
#endif
                }
                wg_commit();
#if WGB
                // a ring shallower than a step's slabs: once slab i - 1's products are done
                // (slab i's may run on) and every warp of the warpgroup has passed its wait,
                // its stage takes slab i - 1 + GST
                if (i >= 1 && i - 1 + GST < nslab) {
                    wg_wait<1>();
                    wg_bar(kg);
                    stage(i - 1 + GST, (i - 1) % GST, false, 0);
                }
#else
                if (i + STAGES < nslab) wg_wait<0>();  // this slab's place is staged again
#endif
            }
#else
            if (active) {
                const unsigned char* sb = ring + (unsigned)((i % STAGES) * ks + kg) * npad * SROW
                                          + b_lane;
#if !AREG
                const unsigned char* wa = ws + a_lane;
#endif
#pragma unroll
                for (int cc = 0; cc < SLAB; ++cc) {
                    const int c = c0 + i * SLAB + cc;
                    if (c >= c1) break;
#if STRADDLE
                    if (HASX && c == nxc && c0 < nxc) flush_x();
                    const bool xc = HASX && c < nxc;
#else
                    const bool xc = xg;
#endif
                    // every fragment of the chunk first, then the products: the loads overlap
                    unsigned bf[NTW][2], af[MT][4];
#pragma unroll
                    for (int nn = 0; nn < NTW; ++nn)
                        if (n_in(nn))
                            ldsm_x2(bf[nn], sb + (unsigned)(ng * NTW + nn) * 8 * SROW + cc * 32);
#pragma unroll
                    for (int m = 0; m < MT; ++m) {
#if AREG
                        if (m_in(m))
#pragma unroll
                            for (int r = 0; r < 4; ++r) af[m][r] = ar[m][i * SLAB + cc][r];
#else
                        if (m_in(m)) ldsm_x4(af[m], wa + (unsigned)m * 16 * rowb + c * 32);
#endif
                    }
#pragma unroll
                    for (int m = 0; m < MT; ++m)
#pragma unroll
                        for (int nn = 0; nn < NTW; ++nn) {
                            if (!m_in(m) || !n_in(nn)) continue;
                            if constexpr (FX == FH) mma<FH>(acc[m][nn], af[m], bf[nn]);
                            else if (xc) mma<FX>(acc[m][nn], af[m], bf[nn]);
                            else mma<FH>(acc[m][nn], af[m], bf[nn]);
                        }
                }
            }
#endif
            // the next load refills this slab's place only while slabs are left to stage
            // (WGB: each warpgroup refills its own stages, above)
            if (!WGB && i + STAGES < nslab) __syncthreads();
        }
#if ASYM
        };
#if XE
        if (xskip) goto products_done;  // (as without ASYM, before any copy)
#endif
        if (kg == 0) slabs(STAGES0); else slabs(STAGES);  // (k-group 0's STAGES0)
#else
        }
#endif
#if XE
    products_done:
#endif
#if WG
        wg_wait<0>();  // the sums in wacc, and wgmma's reads of the ring done
#endif
        __syncthreads();  // every warp's reads of the ring done: the partial sums take it
#if XE
        if (xbail[0] | xbail[1]) goto gave_up;
#endif
#if PREX
        // every wgmma of this warpgroup done with its stages (the barrier above): the next
        // step's first slabs into them, while the gate math runs (the partial sums lie past
        // them); issued as at a step's start (FANOUT: each stage's by a thread of its own)
        if (kg < kx && s + 1 < T) {
            xsrc = L.xin + code_at(L.dir ? T - 2 - s : s + 1, 0, 0, 0, xrowb);
#if FANOUT
            fan_out(STAGES);
#else
#pragma unroll 1
            for (int st = 0; st < STAGES && st < nslab; ++st) stage(st, st, false, 0);
#endif
        }
#endif
#if MCAST > 1
        // a mate gave up before copying its share of this step: these sums are not of the
        // step's state, so this CTA gives up too (its outputs NaN, not finite wrong numbers,
        // even at the last step, after which nobody waits again)
        if (lost) goto gave_up;
#endif
        MARK(2);
#if GR
        {   // the warpgroups trade the sums (dequantized) of the blocks the other keeps, each
            // value at [receiving warpgroup][warp & 3][block][2 h + e][lane]: 32 banks a store
            const int w4 = warp & 3;
#pragma unroll
            for (int j = 0; j < WGN / 8; ++j) {
                if ((j >= GRH) == (kg == 1)) continue;  // a block this warpgroup keeps
#pragma unroll
                for (int i = 0; i < 4; ++i)
                    part[((((1 - kg) * 4 + w4) * GRH + j % GRH) * 4 + i) * 32 + lane] =
                        (float)wacc[0][4 * j + i] * gr_dq[i >> 1];
            }
#if WGB
            cp_wait<0>();  // the projection's copies, before the barrier past which it is read
#endif
            __syncthreads();
            MARK(3);
            // in phases, every pair at once (no store between two pairs' loads or cells):
            // the sums, the projection, the cells, then the stores. A GRU with an input
            // part (SPLIT, nxc): its input part's sums (warpgroup kx - 1 = 0's) kept apart
            const bool xs = SPLIT && nxc;
            float X[GRH][GATES], R[GRH][GATES];
#pragma unroll
            for (int jj = 0; jj < GRH; ++jj) {
                float sum[4], xsum[4];  // row h (gates 0 and 2, or 1 and 3), column e: [2 h + e]
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const float own = (float)(kg ? wacc[0][4 * (GRH + jj) + i]
                                                 : wacc[0][4 * jj + i]) * gr_dq[i >> 1];
                    const float other = part[(((kg * 4 + w4) * GRH + jj) * 4 + i) * 32 + lane];
                    sum[i] = !xs ? own + other : kg < kx ? other : own;
                    xsum[i] = !xs ? 0.0f : kg < kx ? own : other;
                }
                // lanes 0-15 keep column 2 gr (their gates 0 and 2) and take gates 1 and 3 of
                // it from the lane 16 apart, which keeps column 2 gr + 1
                float r4[4], x4[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                trade_gates(sum, gup, r4);
                if (SPLIT) trade_gates(xsum, gup, x4);
#pragma unroll
                for (int q = 0; q < GATES; ++q) {
                    R[jj][q] = r4[q] + gr_br[q];
#if GXG
                    const float g = gxr[jj][q];  // loaded at the step's start
#else  // (a padding column reads its slice's last row: never stored; no projection, no read:
       // with 'i' gxs is the ring, whose input stages PREX's copies may be filling)
                    const float g = L.gx ? gxs[q * nb * nu + GX_AT(min(gr_col(jj), nb - 1), gu,
                                                                   0)] : 0.0f;
#endif
                    X[jj][q] = (L.gx ? (GXINT ? (float)__float_as_int(g) : g) * gr_dx[q]
                                     : x4[q]) + gr_bw[q];
                }
            }
#pragma unroll
            for (int jj = 0; jj < GRH; ++jj) {
                float c = c_r[jj];
                h_r[jj] = cell(X[jj], R[jj], h_r[jj], c);
                c_r[jj] = c;
            }
#pragma unroll
            for (int jj = 0; jj < GRH; ++jj) {
                const int col = gr_col(jj);
                if (col >= nb || gu >= nu) continue;
                hand_on(col, j0 + gu, h_r[jj]);
            }
        }
#else
#if STRADDLE
        if (active && HASX && c1 <= nxc && c0 < c1) flush_x();
#endif
        // partial sums, dequantized, to shared memory: the staging ring is free now; a sum of
        // the input part (x) or of the recurrent part, at `at` of its k-group's
        auto put_sum = [&](unsigned at, float v, bool x) {
            if (SPLIT && nxc) {  // GRU: the two parts' sums apart
                part_x[at] = x ? v : 0.0f;
                part[at] = x ? 0.0f : v;
            } else {
                part[at] = v;
            }
        };
#if WG
        {  // warp w's m-tile w of each 64 rows: rows 64 mb + 16 w + gq (+ 8), columns
           // 8 j + 2 gr (+ 1) in wacc[mb][4 j ..]
            const bool xw = kg < kx;  // the input part's warpgroup
#pragma unroll
            for (int mb = 0; mb < WGM; ++mb)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int row = mb * 64 + (warp & 3) * 16 + gq + 8 * h;
                    if (row >= mpad) continue;
                    const float dq = xw ? dqs[row] : dqs[mpad + row];
#pragma unroll
                    for (int j = 0; j < WGN / 8; ++j)
#pragma unroll
                        for (int e = 0; e < 2; ++e) {
                            const unsigned at = ((unsigned)kg * npad + 8 * j + 2 * gr + e) * ps
                                                + row;
                            put_sum(at, (float)wacc[mb][4 * j + 2 * h + e] * dq, xw);
                        }
                }
        }
#else
        if (active) {
            float dq[MT][2];  // this thread's rows' factors, read before any store
#pragma unroll
            for (int m = 0; m < MT; ++m)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int row = m * 16 + gq + 8 * h;
#if STRADDLE
                    dq[m][h] = c1 > nxc && row < mpad ? dqs[mpad + row] : 0.0f;
#else
                    dq[m][h] = !m_in(m) ? 0.0f : xg ? dqs[row] : dqs[mpad + row];
#endif
                }
#pragma unroll
            for (int m = 0; m < MT; ++m)
#pragma unroll
                for (int nn = 0; nn < NTW; ++nn)
#pragma unroll
                    for (int r = 0; r < 4; ++r) {
                        const int row = m * 16 + gq + (r & 2 ? 8 : 0);
                        const int col = (ng * NTW + nn) * 8 + gr * 2 + (r & 1);
                        if (!EXACT && (row >= mpad || col >= npad)) continue;
                        const unsigned at = ((unsigned)kg * npad + col) * ps + row;
#if STRADDLE
                        const float v = value<FH>(acc[m][nn][r]) * dq[m][r >> 1];
                        if (SPLIT && nxc) part_x[at] = xacc[m][nn][r];
                        part[at] = SPLIT ? v : v + xacc[m][nn][r];
#else
                        put_sum(at, (xg ? value<FX>(acc[m][nn][r]) : value<FH>(acc[m][nn][r]))
                                    * dq[m][r >> 1], xg);
#endif
                    }
        }
#endif
#if WGB
        cp_wait<0>();  // the projection's copies, before the barrier past which it is read
#endif
        __syncthreads();
        MARK(3);

        // the gate math, PG (batch row, unit) pairs per thread at a time: every pair's sums
        // first (loads only, all in flight), then the cells and their stores
#pragma unroll 1
        for (Pairs it(tid, nu); it.p < nb * nu;) {
            int pp[PG], bb[PG], uu[PG];
            float X[PG][GATES], R[PG][GATES];
#pragma unroll
            for (int k = 0; k < PG; ++k, it.next()) {
                pp[k] = it.p < nb * nu ? it.p : -1;
                bb[k] = it.b;
                uu[k] = it.u;
                if (pp[k] < 0) continue;
#pragma unroll
                for (int q = 0; q < GATES; ++q) {
                    const int row = q * nu + it.u;
                    const unsigned at = (unsigned)it.b * ps + row;
                    float sh[4] = {0.0f, 0.0f, 0.0f, 0.0f}, sx[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                    for (int g2 = 0; g2 < WARPS; ++g2) {  // four chains of adds, not one
                        if (g2 >= ks) break;
                        sh[g2 & 3] += part[(unsigned)g2 * kstride + at];
                        if (SPLIT && nxc) sx[g2 & 3] += part_x[(unsigned)g2 * kstride + at];
                    }
                    float x = (sx[0] + sx[1]) + (sx[2] + sx[3]);
                    if (L.gx) {
#if GXG
                        const float g = __ldg((const float*)L.gx + (unsigned)(t * B + b0 +
                                              it.b) * gH + q * H + j0 + it.u);
                        x = (GXINT ? (float)__float_as_int(g) : g) * dqs[row];
#elif GXINT
                        x = (float)__float_as_int(gxs[q * nb * nu + it.p]) * dqs[row];
#else
                        x = gxs[q * nb * nu + it.p] * dqs[row];
#endif
                    }
                    X[k][q] = x + dqs[2 * mpad + row];
                    R[k][q] = (sh[0] + sh[1]) + (sh[2] + sh[3]) + dqs[3 * mpad + row];
                }
            }
#pragma unroll
            for (int k = 0; k < PG; ++k) {
                const int p = pp[k], b = bb[k], j = j0 + uu[k];
                if (p < 0) continue;
                float c = own_c[p];
                const float v = cell(X[k], R[k], own_h[p], c);
                own_h[p] = v;
                own_c[p] = c;
#if WGB
                hand_on(b, j, v);
#else
                const unsigned brow = (unsigned)(t * B + b0 + b);
                put<FH>(L.hq + (unsigned)((s + 1) * B + b0 + b) * hrowb + (unsigned)j * BPE(FH),
                        v, L.hscale);
                if (L.xout0) put<FX>(L.xout0 + brow * xrowb + (unsigned)(L.dir * H + j) * BPE(FX),
                                     v, L.xscale0);
                if (L.xout1) put<FX>(L.xout1 + brow * xrowb + (unsigned)(L.dir * H + j) * BPE(FX),
                                     v, L.xscale1);
#endif
            }
        }
#endif  // GR
        MARK(4);
#if CLUSTER
        cl_arrive();  // release: this thread's writes of h, before the group's next step
#endif
#if MCAST > 1
        // the ring's generic reads and writes (the partial sums) before a mate's copies of the
        // next step into it (the signal below): a fence of every state space, the copies
        // coming from another CTA through shared::cluster
        asm volatile("fence.proxy.async;" ::: "memory");
#endif
#if XE  // the ring's generic reads and writes (the partial sums) before either warpgroup's
        // copies of the next step, which wait for no barrier of the whole CTA
        fence_proxy_async();
#endif
        __syncthreads();
        // release: this CTA's writes before it (in clusters, for the layers above only)
        if (!POLL && tid == 0 && (!CLUSTER || L.xout0)) red_release(mine, 1u);
        MARK(5);
        MARK(7);
        // the last layer's y after the signal: the release waits for the h codes the next
        // step reads, not for y (read by nobody in the launch); own_h holds each of this
        // thread's pairs' h, written by this thread (seed LSTM INT8, H100, b2t256u16wb:
        // 0.0958 ms against 0.0976 with y stored in the gate math)
#if GR
        if (L.last)
#pragma unroll
            for (int jj = 0; jj < GRH; ++jj) {
                const int col = gr_col(jj);
                if (col < nb && gu < nu)
                    y[(unsigned)(t * B + b0 + col) * D * H + L.dir * H + j0 + gu] = h_r[jj];
            }
#else
        if (L.last)
#pragma unroll 1
            for (Pairs it(tid, nu); it.p < nb * nu; it.next())
                y[(unsigned)(t * B + b0 + it.b) * D * H + L.dir * H + j0 + it.u] = own_h[it.p];
#endif
        MARK(9);
#if XQ
        if (s + 3 < T) x_store(s + 3, xv);  // released by the next signal
#endif
        if (s + 1 < T) {
            fetch_gx(s + 1);
            cp_commit();
            gx_to_l2(s + 2);
        }
        MARK(10);
    }
#if CLUSTER
    cl_wait();  // every arrive met before the cluster's CTAs leave
#endif
#if MCAST > 1
    mc_meet();
#endif
#if GR
#pragma unroll
    for (int jj = 0; jj < GRH; ++jj) {
        const int col = gr_col(jj);
        if (col < nb && gu < nu) {
            const unsigned g = lb + (unsigned)(b0 + col) * H + j0 + gu;
            hy[g] = h_r[jj];
#if CELL == 2
            cy[g] = c_r[jj];
#endif
        }
    }
#else
#pragma unroll 1
    for (Pairs it(tid, nu); it.p < nb * nu; it.next()) {
        const unsigned g = lb + (unsigned)(b0 + it.b) * H + j0 + it.u;
        hy[g] = own_h[it.p];
#if CELL == 2
        cy[g] = own_c[it.p];
#endif
    }
#endif
    return;

gave_up:
    // a launch that gave up a wait: this CTA's outputs (every step's y of the last layer,
    // its h_n and c_n) are NaN, not what the caller's buffers held before (a caller that
    // does not read the status, such as a captured graph's replays, sees no stale numbers;
    // the CTAs that wait for this one give up too, and write theirs: in clusters its
    // cluster-mates read the status at each step's barrier)
    const float nan = __int_as_float(0x7fffffff);
    cp_wait<0>();  // the projection's copies, which no barrier past a give-up waits for
#if MCAST > 1
    // a mate may still wait for this CTA's share of a step's slabs: it gives up on the status
    // this CTA's wait set, then meets it here. A mate's copy into this CTA's ring of the step
    // it gave up at is not waited for (this launch is already thrown away); it was issued
    // before the mate's own wait, which gives up only after 1024 polls at least
    mc_meet();
#endif
#pragma unroll 1
    for (Pairs it(tid, nu); it.p < nb * nu; it.next()) {
        const unsigned g = lb + (unsigned)(b0 + it.b) * H + j0 + it.u;
        hy[g] = nan;
#if CELL == 2
        cy[g] = nan;
#endif
        if (L.last)
#pragma unroll 1
            for (int r = 0; r < T; ++r)
                y[(unsigned)(r * B + b0 + it.b) * D * H + L.dir * H + j0 + it.u] = nan;
    }
}
