"""Thread-block clusters on this GPU: how many clusters of C CTAs it holds at once (one CTA
a multiprocessor, ~200 KB of shared memory each), and what a round costs: every CTA pushes
P bytes to every CTA of its cluster through distributed shared memory, then the cluster
barrier (barrier.cluster arrive.release / wait.acquire), on every cluster held at once. P 0
is the barrier alone. The round is the cluster floor's exchange (its stores form, a state of
C x P bytes: cudnn_rnn/lowbit/exchange.cu), whose check of what was handed on is reported.

    python tools/cluster_probe.py --out DIR [--sizes 2,4,8,16] [--bytes 0,256,512,1024,2048]

The measurements behind docs/lowbit.md's clusters (the persistent kernel's ``k`` launch
shapes). A diagnostic (not part of the package); needs compute capability 9.0.
"""
import argparse
import json
import sys
from pathlib import Path

SMEM = 200 * 1024
THREADS = 256
ROUNDS = 1000
SOURCE = r'''
// (device.cuh prepended; the round trip is exchange.cu's kernel)
// every CTA counts itself in, then waits (a bounded spin) for all: ok[cta] 1 if all came
extern "C" __global__ void __cluster_dims__(CL, 1, 1) __launch_bounds__(THREADS, 1)
resident(unsigned* arrived, int* ok, long long spin)
{
    if (threadIdx.x == 0) {
        atomicAdd(arrived, 1u);
        long long n = 0;
        while (atomicAdd(arrived, 0u) < gridDim.x && ++n < spin) {}
        ok[blockIdx.x] = n < spin;
    }
}
'''


def source(cluster: int) -> str:
    """The probe's own kernel (how many clusters meet at once) for clusters of ``cluster``
    CTAs."""
    from cudnn_rnn.lowbit.persistent import HELPERS  # device.cuh
    return f"#define CL {cluster}\n#define THREADS {THREADS}\n" + HELPERS.read_text() + SOURCE


def measure(cp, cluster: int, sizes: list) -> dict:
    """Clusters of ``cluster`` held at once, and ns a round per P of ``sizes`` (median of
    5 launches, with their range, and the 16-byte pieces their checks found not handed on)
    on as many clusters as are held."""
    from cudnn_rnn.lowbit import exchange
    from cudnn_rnn.lowbit.clusters import PORTABLE, allow_non_portable
    kernels = {n: cp.RawModule(code=code, options=("--std=c++17",)).get_function(n)
               for n, code in (("resident", source(cluster)),
                               ("cluster_exchange", exchange.source(cluster)))}
    for k in kernels.values():
        k.max_dynamic_shared_size_bytes = SMEM
        if cluster > PORTABLE:
            allow_non_portable(k)
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    held = 0
    for n in range(sms // cluster, 0, -1):  # the most clusters whose CTAs all meet at once
        arrived, ok = cp.zeros(1, cp.uint32), cp.zeros(n * cluster, cp.int32)
        kernels["resident"]((n * cluster,), (THREADS,), (arrived, ok, cp.int64(300_000)),
                            shared_mem=SMEM)
        cp.cuda.runtime.deviceSynchronize()
        if int(ok.sum()) == n * cluster:
            held = n
            break
    rounds = {}
    for size in sizes:
        out = cp.zeros(held * cluster, cp.int64)
        wrong = cp.zeros(2, cp.uint32)
        times, missed = [], 0
        for _ in range(5):
            wrong.fill(0)
            kernels["cluster_exchange"](
                (held * cluster,), (exchange.THREADS,),
                (cp.int64(size * cluster), cp.int32(ROUNDS), out, wrong, cp.int32(-1),
                 cp.uint32(exchange.tag())), shared_mem=SMEM)
            cp.cuda.runtime.deviceSynchronize()
            times.append(float(cp.median(out.astype(cp.float64))) / ROUNDS)
            missed += int(wrong[0])
        times.sort()
        rounds[str(size)] = {"median_ns": times[2], "min_ns": times[0], "max_ns": times[-1],
                             "pieces_not_handed_on": missed}
    return {"clusters_held": held, "ns_per_round": rounds}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--sizes", default="2,4,8,16", help="CTAs a cluster, comma-separated")
    p.add_argument("--bytes", default="0,256,512,1024,2048",
                   help="bytes each CTA pushes to each CTA of its cluster, multiples of 16")
    a = p.parse_args()
    try:
        clusters = [int(c) for c in a.sizes.split(",")]
        sizes = [int(b) for b in a.bytes.split(",")]
    except ValueError:
        p.error("--sizes and --bytes take comma-separated integers")
    if any(not 1 <= c <= 16 for c in clusters):
        p.error("--sizes: clusters of 1 to 16 CTAs")
    if any(b < 0 or b % 16 or 2 * 16 * b > SMEM for b in sizes):
        p.error(f"--bytes: multiples of 16 from 0 to {SMEM // 32}")
    from cudnn_rnn.engine.gpu import NoGPU, cupy_or_raise
    from cudnn_rnn.lowbit.engine import capability
    try:
        cp = cupy_or_raise()
    except NoGPU as exc:
        print(f"cluster_probe.py: {exc}; run it on a machine with a GPU", file=sys.stderr)
        return 2
    if capability(cp) < (9, 0):
        print("cluster_probe.py: thread-block clusters need compute capability 9.0",
              file=sys.stderr)
        return 2
    result = {}
    for c in clusters:
        r = result[str(c)] = measure(cp, c, sizes)
        for size, t in r["ns_per_round"].items():
            print(f"clusters of {c:2d} ({r['clusters_held']} held): {int(size):5d} bytes "
                  f"pushed to each: {t['median_ns']:8.1f} ns a round")
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "cluster_probe.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
