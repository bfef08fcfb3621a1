// The cluster floor's microbenchmark: what one step of a layer held in one thread-block
// cluster cannot avoid (the resident kernel's hand-off). The cluster's CL CTAs (one a
// multiprocessor) each own a share of a state of `bytes` (bytes / CL, whole 16-byte
// pieces: the caller pads); in round r each CTA stores its share into slot r & 1 of every
// CTA of the cluster, itself included (16-byte st.shared::cluster), then all meet at the
// cluster's barrier (arrive.release, wait.acquire), after which every CTA holds the whole
// state: `rounds` times. Bytes 0: the barrier alone. Compiled with CL and THREADS defined,
// after device.cuh.
// Out: elapsed[cta], the globaltimer nanoseconds of its rounds (after a first barrier that
// every mate has started); wrong[0] += the 16-byte pieces of the last round's slot that do
// not hold (round, owner, piece, tag) as stored, read by every CTA after the last barrier
// (`tag`: the launch's own, so what an earlier launch left in shared memory never passes).
// `drop`: the rank of a CTA that stores nothing (-1: none), which the check must catch.
extern "C" __global__ void __cluster_dims__(CL, 1, 1) __launch_bounds__(THREADS, 1)
cluster_exchange(long long bytes, int rounds, long long* elapsed, unsigned* wrong, int drop,
                 unsigned tag)
{
    extern __shared__ __align__(16) unsigned char slots[];  // [2][bytes]
    const unsigned me = cl_rank();
    const long long share = bytes / CL, pieces = share / 16;
    cl_arrive();  // no store reaches a mate before it runs
    cl_wait();
    const long long t0 = globaltimer();
    for (int r = 0; r < rounds; ++r) {
        unsigned char* slot = slots + (long long)(r & 1) * bytes;
        const unsigned mine = smem_addr(slot + me * share);
        for (long long i = threadIdx.x; i < pieces * CL && (int)me != drop; i += THREADS) {
            const unsigned to = (unsigned)(i / pieces);
            const long long piece = i - (long long)to * pieces;
            cl_store16(cl_mapa(mine + (unsigned)(piece * 16), to),
                       make_uint4((unsigned)r, me, (unsigned)piece, tag));
        }
        cl_arrive();
        cl_wait();
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
    }  // (the last round's barrier ordered every store before these reads and any exit)
}
