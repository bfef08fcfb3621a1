"""The persistent kernel's candidates at chosen shapes, each launch shape's quick time, then
the chosen one verified and timed, beside the GEMM engine of the same plans (one process).

    python tools/persistent_probe.py --out DIR [--shapes LSTM:20:2:512:64,...] [--names ...]
        [--settings b1t256,...] [--trace NAME@SETTINGS,...] [--drop mma,load,gates,...]
        [--variants gates_exact,sums_predicated,quant_exact]

``--drop`` traces each ``--trace`` item again with each phase left out of the kernel (an
exact-text patch of its source, :data:`DROPS`; such a launch computes nothing that is
read, only its phases' times): what a phase costs is the step's time with it against
without it.

``--variants`` runs everything (each shape's candidates verified and timed, the traces) again
with the kernel changed by each of :data:`VARIANTS` (exact-text patches that keep what it
computes, or change it within what the verification judges): an idea measured against the
kernel as it is, in one process, before it is written into the kernel.

A diagnostic behind statements in the README and the issue notes (not part of the package).
"""
import json
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from cudnn_rnn.bindings.enums import RNNMode
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.cli import BadInput, OneLineParser
from cudnn_rnn.engine import timing
from cudnn_rnn.engine.gpu import NoGPU, cupy_or_raise
from cudnn_rnn.lowbit.candidates import parse as parse_config, run_configs
from cudnn_rnn.lowbit import kernels, partition
from cudnn_rnn.matrix.runs import refuse_output
from cudnn_rnn.lowbit.launch import Settings

# the wait's poll, as persistent.cu writes it, and the relaxed poll and fence of `fence_poll`
_POLL = "v[i] = ctrs[i] < 0 ? 0u : ld_acquire(counters + ctrs[i]);"
_FENCE = ("            fence_acquire();  // what the producers wrote before their release, "
          "seen from here\n")
_WAITED = "            if (!ok) atomicExch(status, 1);\n"
# bulk staging's wait for a slab (ring stage i % GST of the warpgroup's GST), as persistent.cu
# writes it
_SLAB_WAIT = ("            slab_wait(smem_addr(&mbars[i % GST][kg]), bulk_parity(s, i, GST), "
              "status);\n")
# bulk staging's proxy fence before a copy, as persistent.cu writes it
_PROXY_FENCE = '                asm volatile("fence.proxy.async.global;" ::: "memory");'
# the last layer's y, stored after the step's signal
_Y_AFTER = ("        if (L.last)\n#pragma unroll 1\n"
            "            for (Pairs it(tid, nu); it.p < nb * nu; it.next())\n"
            "                y[(unsigned)(t * B + b0 + it.b) * D * H + L.dir * H + j0 + it.u] = "
            "own_h[it.p];\n")
# the copies of the next step's input projection, issued past the step's signal
_GX_NEXT = "            fetch_gx(s + 1);\n"
# phase -> (text of persistent.cu, what replaces it, how many times it occurs)
DROPS = {
    "mma": [("mma<FH>(acc[m][nn], af[m], bf[nn]);", ";", 2),
            ("mma<FX>(acc[m][nn], af[m], bf[nn]);", ";", 1)],
    "load": [("if (past && !WG) continue;\n                const bool x = c < nxc;\n"
              "                const unsigned char* src",
              "if (true) continue;\n                const bool x = c < nxc;\n"
              "                const unsigned char* src", 1)],
    "gates": [("for (Pairs it(tid, nu); it.p < nb * nu;) {",
               "for (Pairs it(tid, nu); it.p < 0;) {", 1)],
    # wgmma's products, A from shared memory or from registers (the bulk copies and their
    # waits still made): what the copies and the ring's turns cost without the tensor
    # cores' work
    "wg_mma": [("wg_mma_s(wacc[mb], c < c1 ?", "if (0) wg_mma_s(wacc[mb], c < c1 ?", 1),
               ("wg_mma_r(wacc[0], war[i * SLAB + cc], b, 1);",
                "if (0) wg_mma_r(wacc[0], war[i * SLAB + cc], b, 1);", 1)],
    # bulk staging's copies and their waits, a CTA's own or shared by cluster-mates (the
    # products run on what the ring holds): what the products cost without the copies'
    # traffic into shared memory and their latency
    "bulk": [("bulk_load(smem_addr(&mbars[st][kg]), smem_addr(dst), src, SBYTES);", ";", 1),
             (_SLAB_WAIT, "", 1),
             ("                    bulk_load_mc(smem_addr(&mbars[st][kg]), smem_addr(dst), src,\n"
              "                                 SBYTES, (1u << MCAST) - 1u);\n",
              "                    ;\n", 1),
             ("            if (!slab_wait(smem_addr(&mbars[i % GST][kg]), bulk_parity(s, i, GST), "
              "status))\n                lost = 1;\n", "", 1)],
    # within the gate math: its cell functions (the sums still read, the stores still made)
    "cell": [("const float v = cell(X[k], R[k], own_h[p], c);",
              "const float v = X[k][0] + R[k][GATES - 1];", 1)],
    # within the gate math: its stores of h (every format its readers take) and of y
    "stores": [("                put<FH>(L.hq + (unsigned)((s + 1) * B + b0 + b) * hrowb"
                " + (unsigned)j * BPE(FH),\n                        v, L.hscale);\n", "", 1),
               ("                if (L.xout0) put<FX>(L.xout0 + brow * xrowb + (unsigned)"
                "(L.dir * H + j) * BPE(FX),\n                                     v, L.xscale0);\n",
                "", 1),
               ("                if (L.xout1) put<FX>(L.xout1 + brow * xrowb + (unsigned)"
                "(L.dir * H + j) * BPE(FX),\n                                     v, L.xscale1);\n",
                "", 1),
               (_Y_AFTER, "", 1)],
    # past the step's signal: the last layer's y (either gate math's), and the copies of the
    # next step's input projection into shared memory (its gates then read this step's)
    "y": [(_Y_AFTER, "", 1),
          ("        if (L.last)\n#pragma unroll\n", "        if (0)\n#pragma unroll\n", 1)],
    "gx_next": [(_GX_NEXT, "            ;\n", 1)],
}
_Y_IN_GATES = "                if (L.last) y[brow * D * H + L.dir * H + j] = v;\n"
# variant -> [(text of the kernel's source, what replaces it, how many times it occurs)]
VARIANTS = {
    # the gate math as the GEMM engine's kernels have it (kernels.EXACT_GATES: within 3e-7),
    # not on tanh.approx.f32 (kernels.FAST_GATES, in the kernel since the H100's 0.0976 ms
    # against 0.1036 at the seed's LSTM INT8, b2t256u16wb, with quant_exact's division)
    "gates_exact": [(kernels.FAST_GATES, kernels.EXACT_GATES, 1)],
}
_SUMS = ("                    for (int g2 = 0; g2 < WARPS; ++g2) {  // four chains of adds, "
         "not one\n"
         "                        if (g2 >= ks) break;\n"
         "                        sh[g2 & 3] += part[(unsigned)g2 * kstride + at];\n"
         "                        if (SPLIT && nxc) sx[g2 & 3] += part_x[(unsigned)g2 * kstride "
         "+ at];\n")
_SUMS_PREDICATED = (
    "                    for (int g2 = 0; g2 < WARPS; ++g2) {  // predicated loads, no branch\n"
    "                        const bool in = g2 < ks;\n"
    "                        sh[g2 & 3] += in ? part[(unsigned)g2 * kstride + at] : 0.0f;\n"
    "                        if (SPLIT && nxc)\n"
    "                            sx[g2 & 3] += in ? part_x[(unsigned)g2 * kstride + at] : 0.0f;\n")
VARIANTS.update({
    # the gate math's partial sums read with predicated loads, not a loop that branches out
    # at the CTA's k-group count (known at run time only): ptxas then issues every load of
    # a pair's gates before the adds (the branches made each load wait for the one before)
    "sums_predicated": [(_SUMS, _SUMS_PREDICATED, 1)],
    # the 8-bit codes' scaling by the correctly rounded division (a correction sequence and
    # a slow-path call per code, three codes a pair), not the fast one the kernel has
    "quant_exact": [(kernels.FAST_DIV, kernels.EXACT_DIV, 1)],
    # the kernel as it was before KS and TS: each CTA's warp groups along K and n read from
    # its slice at run time (loops over them without constant bounds, divisions by ts)
    "ks_runtime": [("ks = KS ? KS : S.ks;", "ks = S.ks;", 1),
                   ("const int ts = TS ? TS : S.ts;", "const int ts = S.ts;", 1)],
    # the last layer's y stored in the gate math, before the step's signal, as before the
    # H100's 0.0958 ms against 0.0976 (seed LSTM INT8, b2t256u16wb) put it after
    "y_in_gates": [
        (_Y_AFTER, "", 1),
        ("                hand_on(b, j, v);\n",
         _Y_IN_GATES + "                hand_on(b, j, v);\n", 1),
        ("                put<FH>(L.hq + (unsigned)((s + 1)",
         _Y_IN_GATES + "                put<FH>(L.hq + (unsigned)((s + 1)", 1)],
    # the gate math's (batch row, unit) pairs dealt to threads so that a warp's 32 lanes read
    # the partial sums from 32 banks: at 8 units a CTA a warp takes batch rows 2 apart (rows
    # b*ps + u with ps 36: rows 1 apart put lanes of batch rows b and b+1 on 4 common banks,
    # two wavefronts for each of the 16 loads of a pair at the seed; nvdisasm of the kernel
    # shows them as plain LDS). A permutation within each 64 threads: every pair once
    "gates_swizzled": [("        for (Pairs it(tid, nu); it.p < nb * nu;) {",
                        "        const int gtid = nu == 8 && THREADS % 64 == 0\n"
                        "            ? (tid & ~63) | (tid & 7) | (((tid >> 3) & 3) << 4)\n"
                        "              | (((tid >> 5) & 1) << 3) : tid;\n"
                        "        for (Pairs it(gtid, nu); it.p < nb * nu;) {", 1)],
    # a thread's (batch row, unit) pairs two at a time in the gate math (every pair's sums
    # loaded, then both cells): at b2t256u16 each thread has two pairs a step, whose chains
    # (loads, gates, c, tanh c, codes, stores) then overlap instead of running one after the
    # other (PG 4 against 1 was 4 % slower at b1t256 on the H200, a tree before EXACT)
    "pairs_together": [("#define PG 1\n", "#define PG 2\n", 1)],
    # bulk staging's proxy fence (the codes other CTAs stored, for the copy engine's reads)
    # once a step, before its first copy, where the kernel fences before each of the step's
    # copies: the fence orders everything the issuing thread acquired before it against every
    # later copy of it, so one suffices; each more may delay the copies after it
    "fence_once": [(_PROXY_FENCE, "                if (i == 0) " + _PROXY_FENCE.lstrip(), 1)],
    # the same fence on the producers' side: every thread after its stores of h and the next
    # layer's codes, before the barrier that precedes the signal (and after h0's codes), none
    # before a copy
    "fence_at_producer": [
        (_PROXY_FENCE + "\n", "", 1),
        ("    cp_wait<0>();\n#if WG\n", "    cp_wait<0>();\n" + _PROXY_FENCE + "\n#if WG\n", 1),
        ("        __syncthreads();\n        // release: this CTA's writes before it",
         "        " + _PROXY_FENCE.lstrip() + "\n        __syncthreads();\n"
         "        // release: this CTA's writes before it", 1)],
    # the gate math's per-row factors (the input part's dequantization, the two biases) in
    # registers, read once before the first step, where a thread's unit is the same at every
    # pair (nu divides THREADS: u16 and 256 threads), instead of three shared-memory loads a
    # gate and pair at every step (at LSTM 50/1/1024/256, eight pairs a thread: 96 loads)
    "gates_hoisted": [
        ("#pragma unroll 1\n    for (int s = 0; s < T; ++s) {",
         "    const bool fixed_u = THREADS % nu == 0;\n"
         "    float hq_dx[GATES], hq_bw[GATES], hq_br[GATES];\n"
         "#pragma unroll\n"
         "    for (int q = 0; q < GATES; ++q) {\n"
         "        const int row = q * nu + tid % nu;\n"
         "        hq_dx[q] = dqs[row];\n"
         "        hq_bw[q] = dqs[2 * mpad + row];\n"
         "        hq_br[q] = dqs[3 * mpad + row];\n"
         "    }\n"
         "#pragma unroll 1\n    for (int s = 0; s < T; ++s) {", 1),
        ("(float)__float_as_int(gxs[q * nb * nu + it.p]) * dqs[row];",
         "(float)__float_as_int(gxs[q * nb * nu + it.p]) * (fixed_u ? hq_dx[q] : dqs[row]);", 1),
        ("x = gxs[q * nb * nu + it.p] * dqs[row];",
         "x = gxs[q * nb * nu + it.p] * (fixed_u ? hq_dx[q] : dqs[row]);", 1),
        ("X[k][q] = x + dqs[2 * mpad + row];",
         "X[k][q] = x + (fixed_u ? hq_bw[q] : dqs[2 * mpad + row]);", 1),
        ("R[k][q] = (sh[0] + sh[1]) + (sh[2] + sh[3]) + dqs[3 * mpad + row];",
         "R[k][q] = (sh[0] + sh[1]) + (sh[2] + sh[3])\n"
         "                              + (fixed_u ? hq_br[q] : dqs[3 * mpad + row]);", 1)],
    # bulk staging's wait close to what it was before each slab's products waited for that
    # slab only: every stage's first slab waited for before the step's first product (later
    # slabs of a ring shallower than the step's, each before its own), the fence at the
    # first slab only; the wait loop unrolled, where the old one was not (213 registers for
    # the 16-bit seed against the old kernel's 197: a helper's compile). On a kernel of two
    # ring depths (STAGES0) ptxas serializes its wgmma (C7520 at LSTM 50/1/2048/128 INT8,
    # b1t256u16wbes2): there, waits_together+equal_ring is the comparison it was made for
    "waits_together": [
        (_SLAB_WAIT,
         "            if (i == 0)\n"
         "                for (int j = 0; j < NSLAB && j < GST; ++j)\n"
         "                    slab_wait(smem_addr(&mbars[j][kg]), bulk_parity(s, j, GST), "
         "status);\n"
         "            if (i >= GST) slab_wait(smem_addr(&mbars[i % GST][kg]), "
         "bulk_parity(s, i, GST), status);\n", 1),
        ("if (WGB || i == 0) wg_fence();", "if (i == 0 || i >= GST) wg_fence();", 1)],
    # the kernel as it was before a CTA that gives up a wait wrote NaN for its outputs: it
    # returned where it gave up (the NaN's code is then unreachable and compiled away)
    "stale_on_stall": [("goto gave_up;", "return;", 5), ("\ngave_up:\n", "\n", 1)],
    # the wait as it was before its polls were acquire loads (H100, seed LSTM INT8
    # b2t256u16: 0.1269 ms against 0.1242, layer 0's wait 978 against 700 ns): relaxed
    # polls, then a fence (MEMBAR.ALL.GPU) once every target is met
    "fence_poll": [(_POLL, _POLL.replace("ld_acquire", "ld_relaxed"), 1),
                   (_WAITED, _FENCE + _WAITED, 1)],
})
# the projection of 'g' (GXG): read past L1 (each value is read once, and L1 is what shared
# memory leaves), or without its L2 prefetch a step ahead (what the prefetch buys)
_GX_LOAD = ("                        const float g = __ldg((const float*)L.gx + (unsigned)(t * B "
            "+ b0 +\n                                              it.b) * gH + q * H + j0 + "
            "it.u);\n")
_GX_PREFETCH = ('                asm volatile("prefetch.global.L2 [%0];" :: "l"(run + o) : '
                '"memory");\n')
_GX_PREFETCH_LAST = ('            asm volatile("prefetch.global.L2 [%0];" :: "l"(run + nu - 1) : '
                     '"memory");\n')
# the kernel's staged projection (without 'g'): copied 4 bytes a cp.async, brought into L2
# a step ahead where it streams (GXL2) and, with bulk staging, waited for before the gate
# math's barrier
_GX_CP4 = """#pragma unroll 1
        for (Pairs it(tid, nu); it.p < nb * nu; it.next())
#pragma unroll
            for (int q = 0; q < GATES; ++q)
                cp4(gxs + q * nb * nu + GX_AT(it.b, it.u, it.p),
                    src + (unsigned)it.b * gH + q * H + it.u);
"""
_GX_CP16 = """        if (((nu | j0 | H) & 3) == 0) {
#pragma unroll 1
            for (int i = tid; i < nb * nu / 4 * GATES; i += THREADS) {
                const int q = i % GATES, p = i / GATES * 4, b = p / nu, u = p % nu;
                cp16(gxs + q * nb * nu + GX_AT(b, u, p), src + (unsigned)b * gH + q * H + u,
                     16);
            }
        } else
"""
_GXL2 = "#ifndef GXL2\n#define GXL2 0\n#endif"
_LEAVE = ("#if CLUSTER\n    cl_wait();  // every arrive met before the cluster's CTAs leave\n"
          "#endif\n")
_GX_AT_GR = "#define GX_AT(b, u, p) (GR ? (b) * 16 + ((u) ^ ((((b) >> 1) & 3) << 2)) : (p))"
_MBARS = ("    __shared__ __align__(8) unsigned long long mbars[MAXST][2];\n"
          "    if (threadIdx.x == 0) {\n")
_GX_BULK = """#if WGB
        if (gxb) {  // one bulk copy a (gate, batch row) run, by the lanes of warp 0
            if (tid < 32) {
                if (tid == 0) mbar_expect(smem_addr(&gx_bar), (unsigned)(GATES * nb * nu * 4));
                __syncwarp();
                // the gate math's generic reads of gxs (ordered by the barrier before the
                // signal) before the copy engine's writes (the async proxy)
                asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#pragma unroll 1
                for (int i = tid; i < GATES * nb; i += 32) {
                    const int q = i / nb, b = i % nb;
                    bulk_copy(smem_addr(&gx_bar),
                              smem_addr(gxs + q * nb * nu + GX_AT(b, 0, b * nu)),
                              src + (unsigned)b * gH + q * H, (unsigned)(nu * 4));
                }
            }
            ++gx_issued;
            return;
        }
#endif
"""
_GX_WAIT = "cp_wait<0>();  // the projection's copies, before the barrier past which it is read\n"
_GX_GAVE_UP = ("    cp_wait<0>();  // the projection's copies, which no barrier past a give-up "
               "waits for\n")
VARIANTS.update({
    "gx_no_l1": [(_GX_LOAD,
                  "                        float g;\n"
                  "                        asm(\"ld.global.nc.L1::no_allocate.f32 %0, [%1];\" "
                  ": \"=f\"(g) : \"l\"((const float*)L.gx\n"
                  "                            + (unsigned)(t * B + b0 + it.b) * gH + q * H + "
                  "j0 + it.u));\n", 1)],
    "gx_no_prefetch": [(_GX_PREFETCH, "                ;\n", 1), (_GX_PREFETCH_LAST, "", 1)],
    # the staged projection (without 'g') copied 16 bytes a cp.async where every run of the
    # CTA's units is 16-byte aligned, not 4 (Nsight Compute at LSTM 50/1/1024/256 INT8,
    # b2t256u16wb: 7 % of the warps' samples in that loop, most waiting to issue its copies);
    # on an H100, c13efe5+: 1.4 % faster there, 1-3 % slower at the seed and 1024/64; with
    # the projection from L2 (d90acce, LSTM INT8, 'wbe', 'wbes2'), slower or no faster at the
    # seed (0.0855 ms against 0.0830), 1024/64 (0.2240, 0.2226) and 2048/128 (0.6483, 0.6459).
    # (GX_AT: 'e' keeps the projection in runs of 16 units, whose four 16-byte pieces it
    # permutes, so a piece of four units stays whole)
    "gx_cp16": [(_GX_CP4, _GX_CP16 + _GX_CP4, 1)],
    # the staged projection's L2 prefetch a step ahead, on where it streams (GXL2), off (the
    # kernel before it, with gx_early_wait: PTX equal to 86ebb51's at 7 launch shapes at
    # fcc2bf4) and on everywhere (where the projection stays in L2, it costs:
    # limits.projection_streams)
    "gx_no_l2": [(_GXL2, "#undef GXL2\n#define GXL2 0", 1)],
    "gx_l2": [(_GXL2, "#undef GXL2\n#define GXL2 (WG && !GXG)", 1)],
    # with bulk staging, the projection's copies waited for by the ring's per-slab wait
    # (cp.async.wait_group, which waits for every older group: before the step's first
    # product), as before, not before the gate math's barrier: within the noise (2048/128
    # 0.6480 ms against 0.6483, the seed's 'wbe' 0.0854 against 0.0855). (Tried, not kept:
    # the copies issued at the step's start, past its wait, not past the signal of the step
    # before: their issue then delayed the first product, 2.4 us to the first slab against
    # 0.55, 0.6835 ms against 0.6820)
    "gx_early_wait": [("#if !WGB  // (WGB: the ring's copies are bulk ones, waited for on its "
                       "mbarriers)\n", "#if 1\n", 1), (_GX_WAIT, "\n", 2), (_GX_GAVE_UP, "", 1)],
    # with bulk staging, the staged projection copied by the copy engine, not by every
    # thread's cp.async (measured at b0af4da, an H100: 1.3455 ms against 0.6437 at 2048/128
    # 'b1t256u16wbes2', 0.4071 against 0.2230 at 1024/64 'wbe'; the copies' issue 15.4 us
    # past the signal against 0.75: kept as the measured negative): one
    # bulk copy a (gate, batch row) run of the CTA's units (64 bytes at 16 units), issued by
    # the lanes of warp 0 on an mbarrier of its own, waited for before the gate math's
    # barrier; 'e' then lays a run out unpermuted (GX_AT without its 16-byte swizzle: the
    # gate math's loads meet 4-way bank conflicts, a review's count: rows padded to 18 floats
    # would avoid them, 4 KB more at 2048/128, a partition change). At 2048/128 the copies'
    # issue still took thread 0 0.91 us past the signal with the projection from L2
    # (37cd4e3's trace)
    "gx_bulk": [
        (_GX_AT_GR, "#define GX_AT(b, u, p) (GR ? (b) * 16 + (u) : (p))", 1),
        (_MBARS, _MBARS.replace("    if (threadIdx.x == 0) {\n",
                                "    __shared__ __align__(8) unsigned long long gx_bar;\n"
                                "    if (threadIdx.x == 0) {\n"
                                "        mbar_init(smem_addr(&gx_bar));\n"), 1),
        ("    auto fetch_gx = [&](int s) {\n",
         "#if WGB\n"
         "    const bool gxb = ((H | j0 | nu) & 3) == 0 && ((size_t)L.gx & 15) == 0;\n"
         "    int gx_issued = 0, gx_waited = 0;  // its copies' phases issued, waited for\n"
         "#endif\n"
         "    auto fetch_gx = [&](int s) {\n", 1),
        (_GX_CP4, _GX_BULK + _GX_CP4, 1),
        ("    fetch_gx(0);\n    cp_commit();\n",
         "    auto gx_wait = [&]() {\n"
         "#if WGB\n"
         "        if (gxb && gx_waited < gx_issued) {\n"
         "            mbar_wait(smem_addr(&gx_bar), (unsigned)(gx_waited & 1));\n"
         "            ++gx_waited;\n"
         "        }\n"
         "#endif\n"
         "        cp_wait<0>();\n"
         "    };\n"
         "    fetch_gx(0);\n    cp_commit();\n", 1),
        (_GX_WAIT, _GX_WAIT.replace("cp_wait<0>();", "gx_wait();"), 2),
        (_GX_GAVE_UP, _GX_GAVE_UP.replace("cp_wait<0>();", "gx_wait();"), 1),
        (_LEAVE, "#if WGB\n"
                 "    gx_wait();  // (T 0: the prologue's copies, which no step waited for)\n"
                 "#endif\n" + _LEAVE, 1)],
    # one wait a CTA for every counter, as before each warpgroup polled its own (XE, 0c56b35;
    # H100, seed LSTM FP16 b2t256u16wbe: 0.1121 ms against XE's 0.1099, INT8 0.0893 against
    # 0.0871): the kernel of a launch that defines XE, with XE 0
    "one_wait": [("#ifndef XE\n#define XE 0\n#endif", "#undef XE\n#define XE 0", 1)],
    # a step's first ring stages (and PREX's) copied by each warpgroup's thread 0 one after
    # another, as before each had a lane of its own (FANOUT)
    "one_issuer": [("#ifndef FANOUT\n#define FANOUT 1\n#endif", "#define FANOUT 0", 1)],
})
# bulk staging's ring with fewer stages than the partition gives it (the same shared memory
# set aside, the rest unused): whether fewer copies in flight a warpgroup are slower, as the
# floor's ring depths (tools/floor_probe.py --depths) were at some depths
VARIANTS.update({f"ring{n}": [(
    "#define WARPS (THREADS / 32)\n",
    # both groups n deep (k-group 0's STAGES0, where the plan gave one, as well); a ring
    # deeper than the shared memory set aside for the plan's is refused before any launch
    f"#if {n} > STAGES || (defined(STAGES0) && 2 * {n} > STAGES + STAGES0)\n"
    f"#error \"ring{n}: deeper than the shared memory of the partition's ring\"\n#endif\n"
    f"#undef STAGES\n#define STAGES {n}\n#undef STAGES0\n#define WARPS (THREADS / 32)\n",
    1)] for n in (2, 3, 4)})
# the ring as it was before the partition gave its room past an equal ring to the group
# past the first (the kernel's STAGES0): both groups k-group 0's stages deep
VARIANTS["equal_ring"] = [("#ifndef STAGES0\n#define STAGES0 STAGES\n#endif",
                           "#ifdef STAGES0\n#undef STAGES\n#define STAGES STAGES0\n#else\n"
                           "#define STAGES0 STAGES\n#endif", 1)]
# 'q' (layer 0's input codes written by the kernel) as it was at 977f7b1, before the kernel
# placed each step's loads of x past its wait and its code stores past its signal: the loads
# before the wait (in flight where the CTA's threads fence and the wait's thread polls), the
# stores before the signal (which then waits for them: H100, LSTM 50/1/1024/256 INT8
# 'wbeiqs2', the signal 1231 ns against 459), both (the kernel of d4e8d89); and every thread
# a worker (the first warp of each warpgroup too, whose threads poll the counters and issue
# the bulk copies, as a6819b2 had it)
_XQ_LOAD = "        if (s + 3 < T) x_load(s + 3, xv);\n"
_XQ_STORE = "        if (s + 3 < T) x_store(s + 3, xv);  // released by the next signal\n"
_XQ_DECL = "        float xv[XQ][4];  // layer 0's input codes, three steps on\n"
VARIANTS.update({
    "xq_before_wait": [(_XQ_LOAD, "", 1), (_XQ_DECL, _XQ_DECL + _XQ_LOAD, 1)],
    "xq_before_signal": [("#if XQ\n" + _XQ_STORE + "#endif\n", "", 1),
                         ("        MARK(4);\n", "#if XQ\n" + _XQ_STORE + "#endif\n"
                          "        MARK(4);\n", 1)],
    # the loads issued past the step's products (their latency in the gate math, not beside
    # the ring's copies, but beside 'x''s, issued just before; the ring's slowed them: H100,
    # 1024/256 'wbeiqs2' against 'wbeis2', wait +116 ns, first slab +106, products +143)
    "xq_after_products": [(_XQ_LOAD, "", 1), ("        MARK(2);\n", "        MARK(2);\n"
                                                "#if XQ\n" + _XQ_LOAD + "#endif\n", 1)],
    "xq_all_threads": [("    const int xq_w = (tid & 127) < 32 ? -1 : (tid >> 7) * 96 + "
                        "(tid & 127) - 32;", "    const int xq_w = tid;", 1),
                       ("#define XQW (THREADS - THREADS / 128 * 32)", "#define XQW THREADS",
                        1)],
})
# drops and variants that patch the gate math of kernels without 'e' (with it, the kernel's GR
# branch is other text, so the patch would change nothing that runs): refused where a launch
# shape with 'e' may run (named, or the tuner's list)
NOT_E = {"gates", "cell", "stores", "sums_predicated", "y_in_gates", "gates_swizzled",
         "pairs_together", "gates_hoisted", "gx_no_l1"}
PHASES = ("wait", "first_slab_ready", "mma", "partials", "gates", "signal", "y_stores",
          "fetch_next", "to_next_step", "step_total")


def patched(option: str, name: str, patches):
    """persistent.source with ``patches`` applied; ValueError (naming ``option`` and
    ``name``) where the kernel's text no longer holds a patch exactly as often as listed."""
    from cudnn_rnn.lowbit import persistent
    base = persistent.source

    def source(consts):
        text = base(consts)
        for old, new, times in patches:
            if text.count(old) != times:
                raise ValueError(f"{option} {name}: persistent.cu holds {old!r} "
                                 f"{text.count(old)} times, not {times}")
            text = text.replace(old, new)
        return text
    return source


def without(phase: str):
    """persistent.source with ``phase`` left out (:data:`DROPS`)."""
    return patched("--drop", phase, DROPS[phase])


def varied(variant: str):
    """persistent.source changed by ``variant`` (:data:`VARIANTS`; ``a+b``: by both, in
    that order)."""
    return patched("--variants", variant, [patch for one in variant.split("+")
                                           for patch in VARIANTS[one]])


SHAPES = "LSTM:20:2:512:64,LSTM:50:1:1024:256,LSTM:50:1:2048:128,LSTM:50:1:1024:64,GRU:20:2:512:64"
NAMES = "persistent:fp16,persistent:int8/both,persistent:e4m3/both,fp16,int8/both"


def trace(cfg, name: str, settings: str) -> dict:
    """One traced launch of ``name`` shaped by ``settings``: per pseudo-layer, the median
    time of each phase of a step (ns), and how long after its last producer's signal a
    step's wait ended."""
    import numpy as np
    from cudnn_rnn.lowbit import candidates as C, model
    from cudnn_rnn.lowbit.persistent import PersistentEngine, Settings
    from cudnn_rnn.engine.gpu import cupy_or_raise
    cp = cupy_or_raise()
    config = C.parse(name)
    values = C.draw(cfg, 0)
    plan = None
    if config.fmt:
        cal = values["calibration"]
        plan = model.plan(cfg, values["stacked"], model.calibrate(cfg, values["stacked"], **cal),
                          config.fmt, config.parts)
    shape = Settings.parse(settings)
    with PersistentEngine(cfg, values["stacked"], config.precision, plan, shape,
                          trace=True) as e:
        io = values["io"]
        e.set_inputs(io["x"], io["hx"], io["cx"])
        for _ in range(3):
            e.forward()
        e.outputs()
        tr = e.trace.get().astype(np.float64)
        part = e.part
        # what the forward spends before the kernel (layer 0's input codes or GEMM): forward
        # against launch alone, plain calls (timing.time_call: 20 enqueued back to back)
        calls = {f"{f.__name__}_ms": timing.time_call(cp, e.stream, f, reps=20).median_ms
                 for f in (e.forward, e.launch)}
    nominal = cp.cuda.runtime.deviceGetAttribute(13, 0) / 1e6  # kHz -> GHz
    return {**read_trace(tr, part, cfg, nominal, settings), **calls}


def read_trace(tr, part, cfg, nominal: float, settings: str) -> dict:
    """:func:`trace`'s reading of a launch's trace array ``tr`` ((CTAs, T, 12): the clock at
    each of the kernel's marks of every step, persistent.cu's TRACE) for the partition
    ``part`` of ``cfg``; ``nominal``: the GPU's nominal clock (GHz)."""
    import numpy as np
    from cudnn_rnn.lowbit import tables
    # the clock the multiprocessors ran at over the traced steps, which the phases' cycles
    # are read at: each CTA's cycles (clock64, mark 1) over nanoseconds (globaltimer, mark 6,
    # the same place) from its second step to its last, the median of the CTAs (before
    # 42e8983 the nominal clock, which a loaded H100 runs below)
    T = cfg.seq_length
    span = tr[:, T - 1, 6] - tr[:, 1, 6] if T > 2 else np.zeros(1)
    ghz = float(np.median((tr[:, T - 1, 1] - tr[:, 1, 1])[span > 0] / span[span > 0])) \
        if (span > 0).any() else nominal
    phases = ("wait", "mma", "partials", "gates", "signal")
    out = {"settings": settings, "grid": part.grid, "smem": part.smem, "stages": part.stages,
           "stages0": part.stages0 or part.stages,  # as planned (a variant may change both)
           "mt": part.mt_max, "ntw": part.ntw, "clock_ghz": ghz, "clock_ghz_nominal": nominal,
           "layers": {}}
    w = tables.waits(part)
    for k in range(cfg.pseudo_layers):
        rows = [i for i, s in enumerate(part.slices) if s.k == k]
        d = np.diff(tr[rows][:, :, :6], axis=2) / ghz  # cycles -> ns
        med = {ph: float(np.median(d[:, 1:, i])) for i, ph in enumerate(phases)}
        med["first_slab_ready"] = float(np.median((tr[rows][:, 1:, 8] - tr[rows][:, 1:, 1]) / ghz))
        # past the signal: the last layer's y, the next step's projection's copies issued, and
        # from there to the next step's start
        med["y_stores"] = float(np.median((tr[rows][:, 1:, 9] - tr[rows][:, 1:, 5]) / ghz))
        med["fetch_next"] = float(np.median((tr[rows][:, 1:-1, 10] - tr[rows][:, 1:-1, 9]) / ghz))
        med["to_next_step"] = float(np.median((tr[rows][:, 2:, 0] - tr[rows][:, 1:-1, 10]) / ghz))
        lat = []
        for i in rows:
            for s in range(1, cfg.seq_length):
                last = 0.0
                for ctr, target in w[i, s]:
                    if ctr < 0:
                        continue
                    grp = [j for j, sl in enumerate(part.slices)
                           if part.counter(sl.k, sl.bs) == ctr]
                    step = target // part.units[part.slices[grp[0]].k] - 2
                    if step >= 0:
                        last = max(last, tr[grp, step, 7].max())
                if last:
                    lat.append(tr[i, s, 6] - last)
        med["wake_after_last_signal"] = float(np.median(lat)) if lat else None
        med["step_total"] = float(np.median((tr[rows, 1:, 7] - tr[rows, :-1, 7])))
        out["layers"][k] = med
    return out


def _shape(spec: str) -> RNNConfig:
    """CELL:T:L:H:B as a configuration; ValueError saying the form otherwise."""
    parts = spec.split(":")
    try:
        cell, T, L, H, B = parts
        return RNNConfig(seq_length=int(T), num_layers=int(L), hidden_size=int(H),
                         mini_batch=int(B), mode=RNNMode[cell])
    except (ValueError, KeyError):
        raise ValueError(f"--shapes: {spec!r} is not CELL:T:L:H:B (e.g. LSTM:20:2:512:64; "
                         f"cells {', '.join(m.name for m in RNNMode)})") from None


@contextmanager
def _kernel(source):
    """Engines built inside compile ``source(consts)`` (None: the kernel as it is) in place
    of :func:`persistent.source`, which is put back after."""
    from cudnn_rnn.lowbit import persistent
    base = persistent.source
    persistent.source = source or base
    try:
        yield
    finally:
        persistent.source = base


# what trace() raises only through a mistake of its own: raised, not said as a result
BUGS = (TypeError, AttributeError, NameError, LookupError, AssertionError, ZeroDivisionError)


def _traced(cfg, name: str, settings: str, dropped: str | None) -> dict:
    """:func:`trace`, with ``dropped`` left out of the kernel; what the GPU or the kernel
    refuses (a stall, a shape that does not fit, a patch the kernel no longer holds) is
    said and the run goes on; a mistake of this tool's own (:data:`BUGS`) is raised."""
    try:
        with _kernel(without(dropped) if dropped else None):
            return trace(cfg, name, settings)
    except BUGS:
        raise
    except Exception as exc:  # noqa: BLE001 - a diagnostic: say it and go on
        return {"error": f"{type(exc).__name__}: {exc}"}


def main() -> int:
    p = OneLineParser()
    p.add_argument("--out", required=True)
    p.add_argument("--shapes", default=SHAPES)
    p.add_argument("--names", default=NAMES)
    p.add_argument("--settings", default=None,
                   help="comma-separated launch shapes (the tuner's; any "
                        "b<slices>[c<CTAs>]t<threads>[d][p][r][u<units>][w[b[g][e][i[x]]"
                        "[s<chunks>][m<CTAs>]]][k<cluster CTAs>][o<CTAs a multiprocessor>]: "
                        "d the resident kernel (one layer in a cluster), p POLL, r weights "
                        "in registers, u units a CTA, w wgmma, b bulk copies, g the input "
                        "projection read from global memory, e the gate math in registers, "
                        "i layer 0's input products in the kernel, x the next step's input "
                        "copied ahead, s chunks a bulk copy, m copies shared by that many "
                        "cluster-mates, k clusters, o CTAs sharing a multiprocessor; "
                        "launch.Settings.parse)")
    p.add_argument("--trace", default=None,
                   help="NAME@SETTINGS,...: also one traced launch of each, per shape")
    p.add_argument("--drop", default="",
                   help=f"phases ({','.join(DROPS)}): each --trace again without each")
    p.add_argument("--variants", default="",
                   help=f"kernel changes ({','.join(VARIANTS)}; a+b: both at once): "
                        "everything again with each")
    p.add_argument("--ntw", default="",
                   help="n-tiles a warp takes at least (partition.NTW_SHARE), e.g. 2,4: "
                        "everything again with each")
    a = p.parse_args()
    ntw_wrong = f"--ntw: whole numbers 1 to {partition.MAX_NTW}, comma-separated"
    try:
        ntws = [int(v) for v in a.ntw.split(",") if v] or [partition.NTW_SHARE]
    except ValueError:
        p.error(ntw_wrong)
    if not all(1 <= v <= partition.MAX_NTW for v in ntws):
        p.error(ntw_wrong)
    drops = [d for d in a.drop.split(",") if d]
    unknown = sorted(set(drops) - set(DROPS))
    if unknown:
        p.error(f"--drop: no phase {', '.join(unknown)} (choose from {', '.join(DROPS)})")
    variants = [v for v in a.variants.split(",") if v]
    unknown = sorted({one for v in variants for one in v.split("+")} - set(VARIANTS))
    if unknown:
        p.error(f"--variants: no variant {', '.join(unknown)} "
                f"(choose from {', '.join(VARIANTS)})")
    for v in variants:  # a patch the kernel's text no longer holds: said before any run
        try:
            varied(v)({})
        except ValueError as exc:
            p.error(str(exc))
    items = [item.split("@") for item in (a.trace.split(",") if a.trace else [])]
    if any(len(i) != 2 for i in items):
        p.error("--trace takes NAME@SETTINGS items, e.g. persistent:int8/both@b1t256")
    try:
        shapes = [(spec, _shape(spec)) for spec in a.shapes.split(",")]
        named = [Settings.parse(name) for name in
                 (a.settings.split(",") if a.settings else []) + [i[-1] for i in items]]
        for name in a.names.split(",") + [i[0] for i in items]:
            parse_config(name)
    except ValueError as exc:
        p.error(str(exc))
    blind = sorted(NOT_E & ({*drops} | {one for v in variants for one in v.split("+")}))
    if blind and (not a.settings or any(s.reg_gates for s in named)):
        p.error(f"--drop/--variants {', '.join(blind)} patch the gate math without 'e': name "
                "--settings without 'e' (and --trace items)")
    refuse_output(a.out)
    try:
        cupy_or_raise()
    except NoGPU as exc:
        p.error(str(exc))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for ntw in ntws:
        partition.NTW_SHARE = ntw
        for variant, spec, cfg in [(v, spec, cfg) for v in [None] + variants
                                   for spec, cfg in shapes]:
            with _kernel(varied(variant) if variant else None):
                results.append({"ntw": ntw, **_shape_run(a, spec, cfg, items, drops, variant,
                                                          ntw)})
            (out / "persistent_probe.json").write_text(json.dumps(results, indent=1,
                                                                  default=str))
    return 0


def _shape_run(a, spec: str, cfg, items, drops, variant: str | None, ntw: int) -> dict:
    """One shape's candidates verified and timed, and its traces, with the kernel as
    persistent.source is now (``variant``, None: as it is)."""
    started = time.monotonic()
    r = run_configs(cfg, a.names.split(","), reps=20, budget_s=0.3,
                    settings=a.settings.split(",") if a.settings else None)
    print(f"\n== {spec}{f' with {variant}' if variant else ''} (ntw >= {ntw})  "
          f"({time.monotonic() - started:.1f} s)")
    for rec in r["records"]:
        g = (rec.get("graph_timings") or {}).get("forward_inference", {})
        pl = (rec.get("timings") or {}).get("forward_inference", {})
        err = max((rec.get("errors") or {"": float("nan")}).values())
        tried = " ".join(f"{t['settings']}={t['ms']:.4f}" if t["ms"] else
                         f"{t['settings']}:{t['outcome']}" for t in rec.get("settings_tried", []))
        print(f"{rec['config']:24s} {rec['outcome']:13s} replay {g.get('median_ms', 0):.4f} "
              f"plain {pl.get('median_ms', 0):.4f} err {err:.2e} {rec.get('settings', '')} "
              f"[{tried}] {(rec.get('reason') or '')[:300]}")
    traces = []
    for name, settings in items:
        for dropped in [None] + drops:
            t = _traced(cfg, name, settings, dropped)
            traces.append({"name": name, "dropped": dropped, **t})
            print(f"trace {name}@{settings}" + (f" with {variant}" if variant else "")
                  + (f" without {dropped}" if dropped else "") + ": " + json.dumps(t, default=str))
            for k, m in t.get("layers", {}).items():
                print(f"  pseudo-layer {k}: " + " ".join(
                    f"{ph}={m[ph]:.0f}" for ph in PHASES if m.get(ph) is not None) + " ns")
    return {"shape": spec, "variant": variant, "records": r["records"], "traces": traces}


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BadInput as exc:  # one line, exit 2: what to give instead
        print(f"persistent_probe.py: error: {exc}", file=sys.stderr)
        sys.exit(2)
