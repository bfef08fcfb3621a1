// The cluster floor's microbenchmark: what one step of a layer held in one thread-block
// cluster cannot avoid (the resident kernel's hand-off). The cluster's CL CTAs (one a
// multiprocessor) each own a share of a state of `bytes` (bytes / CL, whole 16-byte
// pieces: the caller pads); in round r each CTA hands its share to slot r & 1 of every CTA
// of the cluster, itself included, after which every CTA holds the whole state: `rounds`
// times. Compiled with CL and THREADS defined, after device.cuh, in one of two forms:
// BULK 0: 16-byte st.shared::cluster stores, then the cluster's barrier (arrive.release,
//   wait.acquire); bytes 0: the barrier alone.
// BULK 1 (bytes > 0), the resident kernel's: each CTA writes its share into its own stage
//   r & 1 (generic stores, then fence.proxy.async), threads 0 .. CL - 1 copy it to their
//   mate's slot by one bulk copy each (the copy engine), completing the mate's mbarrier
//   r & 1; each CTA waits for its mbarrier (every share landed) and re-arms it for round
//   r + 2; no cluster barrier in the rounds. A mate's copies of round r + 2 follow its wait
//   of round r + 1, which follows this CTA's copies of round r + 1, issued after every
//   thread's wait of round r: so neither the re-arming nor the stage's reuse is overtaken.
//   A wait gives up after GIVE_UP_NS (wrong[1] += 1) instead of hanging; a thread that gave
//   up re-arms and copies no more, and waits GIVE_UP_NS before the final barrier, so that
//   copies in flight land before any CTA leaves.
// Out: elapsed[cta], the globaltimer nanoseconds of its rounds (after a first barrier that
// every mate has started); wrong[0] += the 16-byte pieces of the last round's slot that do
// not hold (round, owner, piece, tag) as handed on, read by every CTA after its last wait
// (`tag`: the launch's own, so what an earlier launch left in shared memory never passes).
// `drop`: the rank of a CTA whose share is wrong (-1: none), which the check must catch:
// stores, none stored; BULK, its share handed on with another tag (the waits complete).
#ifndef BULK
#define BULK 0
#endif
#define GIVE_UP_NS 50000000LL  // 50 ms of one wait: far past any exchange

extern "C" __global__ void __cluster_dims__(CL, 1, 1) __launch_bounds__(THREADS, 1)
cluster_exchange(long long bytes, int rounds, long long* elapsed, unsigned* wrong, int drop,
                 unsigned tag)
{
    extern __shared__ __align__(128) unsigned char slots[];  // [2][bytes] (BULK: the stage
    const unsigned me = cl_rank();                            // after them, [2][bytes / CL])
    const long long share = bytes / CL, pieces = share / 16;
#if BULK
    __shared__ __align__(8) unsigned long long mbar[2];
    const unsigned bar0 = smem_addr(&mbar[0]);
    unsigned char* const stage = slots + 2 * bytes;
    bool quit = false;  // a wait of this thread gave up
    if (threadIdx.x == 0) {
        mbar_init(bar0);
        mbar_init(bar0 + 8);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        mbar_expect(bar0, (unsigned)bytes);  // rounds 0 and 1
        if (rounds > 1) mbar_expect(bar0 + 8, (unsigned)bytes);
    }
#endif
    cl_arrive();  // nothing reaches a mate before it runs (BULK: its mbarriers set)
    cl_wait();
    const long long t0 = globaltimer();
    for (int r = 0; r < rounds; ++r) {
        unsigned char* slot = slots + (long long)(r & 1) * bytes;
#if BULK
        unsigned char* const st = stage + (long long)(r & 1) * share;
        const unsigned mark = (int)me == drop ? ~tag : tag;
        for (long long i = threadIdx.x; i < pieces; i += THREADS)
            ((uint4*)st)[i] = make_uint4((unsigned)r, me, (unsigned)i, mark);
        fence_proxy_async();  // the stage's generic writes, for the copy engine's reads
        __syncthreads();
        const unsigned bar = bar0 + 8 * (r & 1);
        if (threadIdx.x < CL && !quit)
            bulk_to_mate(cl_mapa(smem_addr(slot + me * share), threadIdx.x), smem_addr(st),
                         (unsigned)share, cl_mapa(bar, threadIdx.x));
        if (!quit) {
            const long long since = globaltimer();
            while (!mbar_try(bar, (r >> 1) & 1))
                if (globaltimer() - since > GIVE_UP_NS) {
                    quit = true;
                    atomicAdd(wrong + 1, 1u);
                    break;
                }
        }
        if (threadIdx.x == 0 && !quit && r + 2 < rounds) mbar_expect(bar, (unsigned)bytes);
#else
        const unsigned mine = smem_addr(slot + me * share);
        for (long long i = threadIdx.x; i < pieces * CL && (int)me != drop; i += THREADS) {
            const unsigned to = (unsigned)(i / pieces);
            const long long piece = i - (long long)to * pieces;
            cl_store16(cl_mapa(mine + (unsigned)(piece * 16), to),
                       make_uint4((unsigned)r, me, (unsigned)piece, tag));
        }
        cl_arrive();
        cl_wait();
#endif
    }
    const long long t1 = globaltimer();
    if (threadIdx.x == 0) elapsed[blockIdx.x] = t1 - t0;
    if (rounds > 0) {
        const uint4* last = (const uint4*)(slots + (long long)((rounds - 1) & 1) * bytes);
        unsigned bad = 0;
        for (long long i = threadIdx.x; i < pieces * CL; i += THREADS) {
            const uint4 v = last[i];
            const long long owner = i / pieces;
            bad += v.x != (unsigned)(rounds - 1) || v.y != (unsigned)owner
                   || v.z != (unsigned)(i - owner * pieces) || v.w != tag;
        }
        if (bad) atomicAdd(wrong, bad);
    }  // (stores: the last round's barrier ordered every store before these reads and exit)
#if BULK
    // no CTA leaves while its copies may still read its stage or land in a mate: every mate
    // has received them (its wait of the last round) before it arrives here; after a wait
    // that gave up, what is still in flight has GIVE_UP_NS more to land
    if (quit)
        for (const long long since = globaltimer(); globaltimer() - since < GIVE_UP_NS;)
            __nanosleep(1000);
    cl_arrive();
    cl_wait();
#endif
}
