// The floor's microbenchmark: what one step of a persistent RNN cannot avoid. Every CTA
// (one per multiprocessor, all resident: a cooperative launch) reads `bytes` of state from
// L2 into shared memory (16-byte cp.async, all in flight, the ring's contents discarded),
// then all meet at a counter barrier (the persistent kernel's release and acquire polls);
// `rounds` times. Bytes 0: the barrier alone. Compiled with THREADS, RING
// (bytes) and WRITTEN defined, after device.cuh. WRITTEN 0: every round reads the same
// state (the floor's measurement); 1 or 16: as the persistent kernel hands a step's state
// on, round r reads slot r of `state` ((rounds + 1) slots of `bytes`), which the CTAs wrote
// in the round before (each its 1/grid share, in stores of WRITTEN bytes) before the
// barrier, so the reads find lines other multiprocessors have just written. WRITTEN 8:
// 1-byte stores as well, but the slot dealt out in 8-byte pieces, piece k to CTA k mod grid,
// so that each 32-byte sector comes from four multiprocessors, as the kernel's 8-bit h
// codes do at 8 units a CTA.
// The barrier meets `group` consecutive CTAs (0: the whole grid), as the persistent kernel's
// waits meet a (pseudo-layer, batch slice) group of 32-64 CTAs, in one of three ways (SIGNAL):
// 0, the kernel's: one counter a group, every CTA adding 1 (red.release) and polling it
// (one thread, acquire loads) until it holds (r + 1) x the group's CTAs; 1: a flag a CTA,
// which it sets to the rounds it has done (st.release, no read-modify-write of a shared
// word), and warp 0 polls the group's flags, each lane every 32nd of them (acquire loads),
// until all hold r + 1; the flags are consecutive words (a group's in one or two lines);
// 2: as 1, a 128-byte line a flag. A poll gives up past SPIN_LIMIT reads, setting *status
// (the launch's numbers are then not read), so a signal that never comes fails the run
// instead of hanging it; every poll of the launch then gives up within 1024 reads.
// SIGNAL 3 (with WRITTEN 16, DEPTH 0, the whole grid): no barrier, the state carries its
// own signal, as NCCL's low-latency protocol does: slot r + 1 ((rounds + 1) slots of
// 2 x `bytes`) is `bytes` / 4 8-byte words, each 4 bytes of data (r) and a 4-byte flag
// (r + 1) stored at once (relaxed, one 8-byte store: never half seen); in round r each CTA
// stores its share of the slot's words, then reads every word of the slot (coalesced), its
// polls LL_K words a thread at a time, all LL_K loads issued before any is looked at (so
// up to THREADS x LL_K words, 16 KB of data, are polled in one pass; more in passes one
// after another), each word's data into shared memory once its flag is r + 1. The slots
// must hold no flag of this launch's at its start (barrier_read clears them before each).
#define LL_K 8
// DEPTH 0: a round's reads all in flight at once (the floor's measurement); DEPTH d: as
// through a ring of d stages of THREADS x 16 bytes, a stage's copies issued once those d - 1
// stages before it have landed, as the persistent kernel's bulk ring keeps at most its
// stages in flight.
#ifndef DEPTH
#define DEPTH 0
#endif
#define FLAG_STRIDE (SIGNAL == 2 ? 32 : 1)
#define SPIN_LIMIT (1LL << 24)

extern "C" __global__ void __launch_bounds__(THREADS, 1)
barrier_read(unsigned char* state, long long bytes, unsigned* counter, int rounds, int group,
             int* status)
{
    extern __shared__ __align__(128) unsigned char ring[];
    const int tid = threadIdx.x;
    // this CTA's group: CTAs g0 .. g0 + gn - 1 (the last group may be smaller)
    const int gsz = group > 0 ? group : (int)gridDim.x;
    const int g0 = (int)blockIdx.x / gsz * gsz, gn = min(gsz, (int)gridDim.x - g0);
    unsigned* const c = counter + blockIdx.x / gsz;  // SIGNAL 0: the group's counter
#if WRITTEN && WRITTEN != 8
    // this CTA's share of each slot, 16-byte aligned (once: not part of a round's cost)
    const long long share = ((bytes + gridDim.x - 1) / gridDim.x + 15) / 16 * 16;
    const long long lo = (long long)blockIdx.x * share, hi = min(bytes, lo + share);
#endif
#if SIGNAL == 3
#if WRITTEN != 16 || DEPTH
#error "SIGNAL 3 (the state its own signal): WRITTEN 16, DEPTH 0"
#endif
    const long long words = bytes / 4, wshare = (words + gridDim.x - 1) / gridDim.x;
    const long long wlo = (long long)blockIdx.x * wshare, whi = min(words, wlo + wshare);
    bool quit = false;  // a poll of this thread gave up
    for (int r = 0; r < rounds; ++r) {
        unsigned long long* slot = (unsigned long long*)(state + (long long)(r + 1) * 2 * bytes);
        const unsigned long long mine = (unsigned long long)(r + 1) << 32 | (unsigned)r;
        for (long long w = wlo + tid; w < whi; w += THREADS)
            asm volatile("st.relaxed.gpu.global.b64 [%0], %1;" :: "l"(slot + w), "l"(mine)
                         : "memory");
        for (long long base = tid; base < words && !quit; base += (long long)THREADS * LL_K) {
            bool need[LL_K];
#pragma unroll
            for (int k = 0; k < LL_K; ++k) need[k] = base + (long long)k * THREADS < words;
            for (long long spins = 0;; ++spins) {
                unsigned long long v[LL_K];
#pragma unroll
                for (int k = 0; k < LL_K; ++k)  // every load of the pass issued first
                    if (need[k])
                        asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(v[k])
                                     : "l"(slot + base + (long long)k * THREADS) : "memory");
                bool all = true;
#pragma unroll
                for (int k = 0; k < LL_K; ++k) {
                    if (!need[k]) continue;
                    if ((unsigned)(v[k] >> 32) == (unsigned)(r + 1)) {
                        *(unsigned*)(ring + ((base + (long long)k * THREADS) * 4) % RING) =
                            (unsigned)v[k];
                        need[k] = false;
                    } else {
                        all = false;
                    }
                }
                if (all) break;
                if (spins > SPIN_LIMIT || ((spins & 1023) == 0 && *(volatile int*)status)) {
                    atomicExch(status, 1);  // the launch's numbers are then not read, and
                    quit = true;            // this thread polls no more
                    break;
                }
            }
        }
        __syncthreads();
    }
#else
    for (int r = 0; r < rounds; ++r) {
        const unsigned char* slot = state + (WRITTEN ? (long long)r * bytes : 0);
#if DEPTH
        for (long long off = (long long)tid * 16; off < bytes; off += (long long)THREADS * 16) {
            cp16(ring + (off % RING), slot + off, 16);
            cp_commit();
            cp_wait<DEPTH - 1>();
        }
#else
        for (long long off = (long long)tid * 16; off < bytes; off += (long long)THREADS * 16)
            cp16(ring + (off % RING), slot + off, 16);
        cp_commit();
#endif
        cp_wait<0>();
#if WRITTEN == 8
        {   // this CTA's 8-byte pieces of the next slot, a lane a byte
            unsigned char* next = state + (long long)(r + 1) * bytes;
            for (long long k = blockIdx.x + (long long)(tid >> 3) * gridDim.x; k * 8 < bytes;
                 k += (long long)(THREADS >> 3) * gridDim.x)
                next[k * 8 + (tid & 7)] = (unsigned char)r;
        }
#elif WRITTEN
        {   // this CTA's share of the next slot, which holds r after the round
            unsigned char* next = state + (long long)(r + 1) * bytes;
            for (long long off = lo + (long long)tid * WRITTEN; off < hi;
                 off += (long long)THREADS * WRITTEN) {
                if (WRITTEN == 16) *(uint4*)(next + off) = make_uint4(r, r, r, r);
                else next[off] = (unsigned char)r;
            }
        }
#endif
        __syncthreads();
#if SIGNAL == 0
        if (tid == 0) {
            red_release(c, 1u);
            const unsigned target = (unsigned)(r + 1) * gn;
            long long spins = 0;
            while (ld_acquire(c) < target) {  // the persistent kernel's wait
                if (++spins > SPIN_LIMIT || ((spins & 1023) == 0 && *(volatile int*)status)) {
                    atomicExch(status, 1);
                    break;
                }
            }
        }
#else
        if (tid < 32) {  // the flags (counter[cta * FLAG_STRIDE])
            if (tid == 0) st_release(counter + blockIdx.x * FLAG_STRIDE, (unsigned)(r + 1));
            for (long long spins = 0;; ++spins) {
                bool met = true;
                for (int i = g0 + tid; i < g0 + gn; i += 32)
                    met &= ld_acquire(counter + i * FLAG_STRIDE) >= (unsigned)(r + 1);
                if (__all_sync(0xffffffffu, met)) break;
                // the same count and status read in every lane: all leave together
                if (spins > SPIN_LIMIT
                    || __any_sync(0xffffffffu, (spins & 1023) == 0 && *(volatile int*)status)) {
                    if (tid == 0) atomicExch(status, 1);
                    break;
                }
            }
        }
#endif
        __syncthreads();
    }
#endif
}
