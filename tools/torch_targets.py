"""Issue 26's targets on a GPU: the accelerated module at the seed shape and at LSTM
50/1/4096/256, against the same configuration's replay in the ranking (the overhead of the
module: target within 5 % in a CUDA graph) and against the user's module at its best
(float16 in a CUDA graph; target: faster, with the error stated).

    python tools/torch_targets.py [--precision auto] [--tolerance 1e-2] [--shapes seed,large]
                                  [--dtype float32|float16]

Prints each shape's choice and table, then one line per target. Needs a GPU and PyTorch.
A float32 module run by an FP16 configuration converts its input and outputs on the stream
(inside the graph too); a float16 module (``--dtype float16``) hands cuDNN its tensors as
they are, so the overhead is best read there.
"""
from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cudnn_rnn.torch import accelerate  # noqa: E402
from cudnn_rnn.torch.timing import step_of, times  # noqa: E402

SHAPES = {"seed": (20, 2, 512, 64), "large": (50, 1, 4096, 256)}  # seq, layers, hidden, batch


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--precision", default="auto")
    p.add_argument("--tolerance", type=float, default=1e-2)
    p.add_argument("--shapes", default="seed,large")
    p.add_argument("--dtype", choices=("float32", "float16", "bfloat16"), default="float32")
    args = p.parse_args(argv)
    import torch
    for name in args.shapes.split(","):
        seq, layers, hidden, batch = SHAPES[name]
        torch.manual_seed(0)
        module = torch.nn.LSTM(hidden, hidden, layers).cuda().to(getattr(torch, args.dtype)).eval()
        fast = accelerate(module, (seq, batch), precision=args.precision,
                          tolerance=args.tolerance)
        print(f"== LSTM {seq}/{layers}/{hidden}/{batch}\n{fast.choice}\n\n{fast.table()}\n")
        x = torch.rand(seq, batch, hidden, device="cuda") * 2 - 1
        half = copy.deepcopy(module).half()  # the user's module at its best
        best = times(step_of(half, x.half(), torch), 20, 0.3)
        mine = fast.plan.report["times"]["accelerated"]
        row = fast.plan.choice.ms
        graph = mine.get("graph", {}).get("ms")
        print(f"overhead: this module in a CUDA graph {graph} ms, the row's replay {row:.4f} "
              f"ms" + (f": {100 * (graph / row - 1):+.1f} % (target within 5 %)" if graph else ""))
        ref = best.get("graph", {}).get("ms")
        print(f"the module at its best (float16, CUDA graph): {ref} ms; this module "
              f"{graph} ms" + (f": x{ref / graph:.2f}" if ref and graph else "")
              + f", error {fast.plan.choice.max_error:.3g} against the module in float64\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
