// The floor's microbenchmark: what one step of a persistent RNN cannot avoid. Every CTA
// (one per multiprocessor, all resident: a cooperative launch) reads `bytes` of state from
// L2 into shared memory (16-byte cp.async, all in flight, the ring's contents discarded),
// then all meet at a counter barrier (the persistent kernel's release, relaxed polls and
// acquire fence); `rounds` times. Bytes 0: the barrier alone. Compiled with THREADS and RING (bytes) defined, after
// device.cuh.

extern "C" __global__ void __launch_bounds__(THREADS, 1)
barrier_read(const unsigned char* __restrict__ state, long long bytes, unsigned* counter,
             int rounds)
{
    extern __shared__ __align__(128) unsigned char ring[];
    const int tid = threadIdx.x;
    for (int r = 0; r < rounds; ++r) {
        for (long long off = (long long)tid * 16; off < bytes; off += (long long)THREADS * 16)
            cp16(ring + (off % RING), state + off, 16);
        cp_commit();
        cp_wait<0>();
        __syncthreads();
        if (tid == 0) {
            red_release(counter, 1u);
            const unsigned target = (unsigned)(r + 1) * gridDim.x;
            while (ld_relaxed(counter) < target) {
            }
            fence_acquire();
        }
        __syncthreads();
    }
}
