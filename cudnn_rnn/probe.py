"""``python -m cudnn_rnn.probe``: which data type / precision / algorithm / cell combinations
get through the RNN_example flow, and where the others stop.

(Foundation version: a built-in matrix at the sample's shape, statuses only.)
"""
from __future__ import annotations

import itertools
import sys
from collections import Counter

from tabulate import tabulate

import bindings
from bindings.enums import DataType, RNNAlgo, RNNMode

from . import gpu
from .cli import OneLineParser, run_main
from .config import RNNConfig
from .flow import RNNFlow

DATA_TYPES = (DataType.FLOAT, DataType.DOUBLE, DataType.HALF, DataType.BFLOAT16, DataType.INT8,
              DataType.INT32, DataType.FP8_E4M3, DataType.FP8_E5M2)
PRECISIONS = (DataType.FLOAT, DataType.DOUBLE, DataType.HALF, DataType.BFLOAT16, DataType.INT8,
              DataType.INT32)


def outcome(result) -> str:
    if result.failure is not None:
        return result.failure.status
    return "OK" if result.completed else "DESCRIPTOR_OK"


def main(argv=None) -> int:
    p = OneLineParser(prog="cudnn_rnn.probe", description=__doc__)
    p.add_argument("--cudnn", default=None, help="path of the libcudnn to probe")
    p.add_argument("--out", default=None, help="(reserved) output directory")
    args = p.parse_args(argv)
    lib = bindings.load(args.cudnn)
    device = gpu.available()
    print(f"cuDNN {lib.version_string} from {lib.path}; "
          + ("GPU stages on" if device else f"descriptor stages only: {gpu.unavailable_reason()}"))
    counts, rows = Counter(), []
    for dt, prec, algo, cell in itertools.product(DATA_TYPES, PRECISIONS, RNNAlgo.__members__.values(),
                                                   RNNMode):
        if algo == RNNAlgo.COUNT:
            continue
        cfg = RNNConfig(cell=cell, data_type=dt, math_prec=prec, algo=algo)
        with RNNFlow(cfg, lib, device=device) as flow:
            result = flow.run()
        o = outcome(result)
        counts[o] += 1
        f = result.failure
        rows.append((dt.name, prec.name, algo.name, cell.name, o, f.call if f else "",
                     (f.reason or "") if f else ""))
    print(tabulate([r for r in rows if r[4] not in ("NOT_SUPPORTED",) or r[6]][:60],
                   headers=("data", "prec", "algo", "cell", "outcome", "call", "reason")))
    print(", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
    return 0


def cli(argv=None) -> int:
    return run_main(main, argv, prog="cudnn_rnn.probe")


if __name__ == "__main__":
    sys.exit(cli())
