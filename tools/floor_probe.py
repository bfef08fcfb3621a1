"""The floor's microbenchmark alone: barrier + every CTA reading N bytes, per round.

    python tools/floor_probe.py --out DIR [--sizes 0,32768,...] [--written 0,1,16]
        [--signals counter,flags] [--groups 0,32,64] [--depths 0,10,20] [--buffers N]

``--written``: 0 reads the same state every round (the floor's measurement); 1 and 16 read
a fresh slot the CTAs wrote in the round before (stores of 1 or 16 bytes), as the persistent
kernel hands h from one step to the next: the difference is the hand-off's own cost; 8 as 1,
but each 32-byte sector written by four multiprocessors (8 bytes each), as the kernel's 8-bit
h codes are at 8 units a CTA.

``--groups``: the barrier meets groups of that many consecutive CTAs (0: all), as the
persistent kernel's waits meet a (pseudo-layer, batch slice) group (32 CTAs at the seed, 64
at LSTM 50/1/1024/256); ``--signals``: by one counter a group that every CTA adds to (the
kernel's) or by a flag a CTA that warp 0 of each polls, consecutive words or a line each
(``barrier.cu``'s SIGNAL); a launch takes whole groups, as many as fit.

``--signals ll`` (with ``--written 16``): no barrier; the state carries its own signal, each
8-byte word 4 bytes of data and a flag that every CTA polls until it shows the round
(NCCL's low-latency protocol): what handing a small state on without a counter costs.

``--depths``: a CTA's reads all in flight at once (0, the floor's) or through a ring of that
many stages of 8 KB (at most that many in flight), as the persistent kernel's bulk ring
keeps its stages in flight (10 at LSTM 50/1/1024/256 INT8, ``b2t256u16wbeis2``: five of
8 KB for each of two warpgroups).

``--buffers``: with ``--written 0``, the state read from N allocations of its own, their
launches in turn, each one's median printed (the first's is the floor's): whether the state
read's time depends on where in L2 the state lies (two H100 runs' floors differed by their
state read, the barrier alike).

A diagnostic behind statements in the README and the issue notes (not part of the package).
"""
import json
import sys
from pathlib import Path

from cudnn_rnn.cli import BadInput, OneLineParser
from cudnn_rnn.matrix.runs import refuse_output
from cudnn_rnn.lowbit.barrier import MAX_DEPTH, SIGNALS, WRITES, barrier_read

SIZES = "0,16384,32768,65536,131072,262144,524288,1048576,2097152"


def main() -> int:
    p = OneLineParser()
    p.add_argument("--out", required=True)
    p.add_argument("--sizes", default=SIZES)
    p.add_argument("--written", default="0", help="comma-separated, each 0, 1, 16 or 8")
    p.add_argument("--signals", default="counter",
                   help=f"comma-separated, each of {', '.join(SIGNALS)}")
    p.add_argument("--groups", default="0", help="CTAs a barrier meets, comma-separated (0: all)")
    p.add_argument("--depths", default="0",
                   help=f"stages of 8 KB in flight a CTA, comma-separated, each 0 (all) to "
                        f"{MAX_DEPTH}")
    p.add_argument("--buffers", type=int, default=1,
                   help="states read alike, each its own allocation (written 0 only)")
    a = p.parse_args()
    sizes = _integers(p, "--sizes", a.sizes)
    modes = list(dict.fromkeys(_integers(p, "--written", a.written)))  # each once
    groups = list(dict.fromkeys(_integers(p, "--groups", a.groups)))  # each once
    signals = list(dict.fromkeys(a.signals.split(",")))
    depths = list(dict.fromkeys(_integers(p, "--depths", a.depths)))
    if any(not 0 <= d <= MAX_DEPTH for d in depths):
        p.error(f"--depths takes stages in flight, each 0 (all) to {MAX_DEPTH}, comma-separated")
    if any(w not in WRITES for w in modes):
        p.error(f"--written takes {', '.join(map(str, WRITES))}, comma-separated")
    if any(s not in SIGNALS for s in signals):
        p.error(f"--signals takes {', '.join(SIGNALS)}, comma-separated")
    if "ll" in signals and 0 in sizes:
        p.error("--signals ll hands a state on: --sizes above 0 (ll's 0 would time no signal)")
    if "ll" in signals and (modes != [16] or any(groups) or any(depths)):
        p.error("--signals ll takes --written 16, --groups 0 and --depths 0 (a fresh slot, "
                "its own signal, read all at once)")
    if any(g < 0 for g in groups):
        p.error("--groups takes counts of CTAs >= 0 (0: all), comma-separated")
    if any(groups) and any(modes):
        p.error("--groups other than 0 read one state every round: --written 0 with them")
    if a.buffers < 1 or (a.buffers > 1 and any(modes)):
        p.error("--buffers takes a count >= 1; more than one with --written 0 only")
    if any(s < 0 for s in sizes):
        p.error("--sizes takes byte counts >= 0, comma-separated")
    refuse_output(a.out)
    if any(modes) and any(s % 16 for s in sizes):
        p.error("with --written 1, 16 or 8, every size is a multiple of 16")
    from cudnn_rnn.engine.gpu import NoGPU
    runs = {}
    for w, signal, group, depth in [(w, s, g, d) for w in modes for s in signals
                                    for g in groups for d in depths]:
        key = f"{w}/{signal}/{group}" + (f"/depth {depth}" if depth else "")
        try:
            r = runs[key] = barrier_read(sizes, written=w, signal=signal, group=group,
                                         depth=depth, buffers=a.buffers)
        except NoGPU as exc:
            print(f"floor_probe.py: {exc}; run it on a machine with a GPU", file=sys.stderr)
            return 2
        for size, us in r["per_round_us"].items():
            q1, q3 = r["per_round_spread_us"][size]
            print(f"written {w:>2d}, {signal:7s} groups of {r['group']:>3d}, "
                  f"{f'{depth} stages' if depth else 'all'} in flight: {int(size):>9d} "
                  f"bytes per CTA: {us:8.3f} us per round (IQR {q1:.3f}-{q3:.3f}, "
                  f"{r['repeats']} launches)"
                  + (f"; each buffer's: {r['per_buffer_us'][size]}" if a.buffers > 1 else "")
                  + ("; ll: 8-byte words, twice the bytes cross L2" if signal == "ll" else ""))
        for why in r["not_met"]:  # its times then count a launch that did not do its rounds
            print(f"written {w:>2d}, {signal:7s}: NOT MET: {why}")
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "floor_probe.json").write_text(json.dumps(runs, indent=1))
    return 0


def _integers(p, flag: str, text: str) -> list:
    try:
        return [int(v) for v in text.split(",")]
    except ValueError:
        p.error(f"{flag} takes comma-separated integers, got {text!r}")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BadInput as exc:  # one line, exit 2: what to give instead
        print(f"floor_probe.py: error: {exc}", file=sys.stderr)
        sys.exit(2)
