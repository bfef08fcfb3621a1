"""The floor's microbenchmark alone: barrier + every CTA reading N bytes, per round.

    python tools/floor_probe.py --out DIR [--sizes 0,32768,...]

A diagnostic behind statements in the README and the issue notes (not part of the package).
"""
import argparse
import json
import sys
from pathlib import Path

from cudnn_rnn.lowbit.barrier import barrier_read

SIZES = "0,16384,32768,65536,131072,262144,524288,1048576,2097152"


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--sizes", default=SIZES)
    a = p.parse_args()
    r = barrier_read([int(s) for s in a.sizes.split(",")])
    for size, us in r["per_round_us"].items():
        print(f"{int(size):>9d} bytes per CTA: {us:8.3f} us per round")
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "floor_probe.json").write_text(json.dumps(r, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
