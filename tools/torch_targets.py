"""Issue 26's targets on a GPU: the accelerated module at the seed shape and at LSTM
50/1/4096/256, against the same configuration's replay in the ranking (the overhead of the
module: target within 5 % in a CUDA graph) and against the user's module at its best
(float16 in a CUDA graph; target: faster, with the error stated).

    python tools/torch_targets.py [--precision auto] [--tolerance 1e-2] [--shapes seed,large]
                                  [--dtype float32|float16] [--processes N]

Prints each shape's choice and table, then one line per target. Needs a GPU and PyTorch.
A float32 module run by an FP16 configuration converts its input and outputs on the stream
(inside the graph too); a float16 module (``--dtype float16``) hands cuDNN its tensors as
they are, so the overhead is best read there.

With ``--processes N`` the plan chosen is saved and the comparison with the user's FP16
graph is measured again in N fresh processes (each loads the plan without tuning, runs it
on the example it was verified on, and times both graphs in alternating order, the same
number of times): the median and range of the ratio, since such figures move between
processes. A process where the plan's choice did not serve the shape is shown, not counted.
"""
from __future__ import annotations

import argparse
import copy
import json
import math
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cudnn_rnn.torch import accelerate, inputs, load  # noqa: E402
from cudnn_rnn.torch.timing import step_of, times  # noqa: E402

SHAPES = {"seed": (20, 2, 512, 64), "large": (50, 1, 4096, 256)}  # seq, layers, hidden, batch
ROUNDS = 3  # per process: each graph timed this many times, in turn


def _module(name: str, dtype: str, torch):
    """The user's module of shape ``name`` (the same weights in every process)."""
    seq, layers, hidden, batch = SHAPES[name]
    torch.manual_seed(0)
    module = torch.nn.LSTM(hidden, hidden, layers).cuda().to(getattr(torch, dtype)).eval()
    return module, seq, batch, hidden


def _graph(step) -> dict:
    """A CUDA graph of ``step`` timed: the timing record, or ``{"skipped": why}``."""
    return times(step, 20, 0.3)["graph"]


def measure(name: str, dtype: str, plan: str) -> dict:
    """In this process: the plan loaded for the module, and the user's FP16 module, each in
    a CUDA graph, timed ROUNDS times, in alternating order; their medians (ms), and what
    ran the shape (the plan's choice, unless it failed its first-call check here)."""
    import torch
    module, seq, batch, hidden = _module(name, dtype, torch)
    fast = load(plan, module)
    g = torch.Generator().manual_seed(inputs.SEED)  # the example the plan was verified on
    x = (torch.rand((seq, batch, hidden), generator=g) * 2 - 1).to(
        device="cuda", dtype=getattr(torch, dtype))
    half = copy.deepcopy(module).half()
    with torch.no_grad():
        fast(x)  # the shape's runner made and verified before any capture
    runs, chosen = fast.shapes()[0]["runs"], fast.plan.choice.label
    steps = {"mine": step_of(fast, x, torch), "best": step_of(half, x.half(), torch)}
    got = {"mine": [], "best": []}
    for r in range(ROUNDS):
        for side in (("mine", "best") if r % 2 == 0 else ("best", "mine")):
            t = _graph(steps[side])
            if "skipped" in t:
                return {"skipped": f"{side}: {t['skipped']}", "runs": runs}
            got[side].append(t["ms"])
    out = {side: statistics.median(ms) for side, ms in got.items()}
    return dict(out, runs=runs, chosen=chosen)


def across(name: str, dtype: str, plan: str, processes: int) -> None:
    """``measure`` in fresh processes; prints the ratio's median and range."""
    ratios = []
    for i in range(processes):
        got = _child(name, dtype, plan)
        print(f"process {i + 1}: {got}")
        if "skipped" not in got and got["runs"] == got["chosen"]:
            ratios.append(got["best"] / got["mine"])
    if ratios:
        print(f"the module at its best (FP16 graph) over this module's graph, {len(ratios)} "
              f"processes: median x{statistics.median(ratios):.3f} (range "
              f"{min(ratios):.3f}-{max(ratios):.3f})\n")


def _child(name: str, dtype: str, plan: str) -> dict:
    """One fresh process's :func:`measure`, or ``{"skipped": why}``."""
    try:
        proc = subprocess.run([sys.executable, __file__, "--measure", name, "--dtype", dtype,
                               "--plan", plan], capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        return {"skipped": "the process took over 900 s"}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return {"skipped": (proc.stderr.strip().splitlines() or ["no output"])[-1]}
    try:
        return json.loads(lines[-1])
    except ValueError:
        return {"skipped": f"not a result: {lines[-1][:200]}"}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--precision", default="auto")
    p.add_argument("--tolerance", type=float, default=1e-2)
    p.add_argument("--shapes", default="seed,large")
    p.add_argument("--dtype", choices=("float32", "float16", "bfloat16"), default="float32")
    p.add_argument("--processes", type=int, default=0)
    p.add_argument("--measure", choices=sorted(SHAPES), help=argparse.SUPPRESS)
    p.add_argument("--plan", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        print(f"torch_targets.py: needs PyTorch ({exc}): pip install 'cudnn-rnn[torch]'",
              file=sys.stderr)
        return 2
    if args.measure:  # one of the --processes children
        print(json.dumps(measure(args.measure, args.dtype, args.plan)))
        return 0
    if args.processes < 0:
        p.error("--processes takes a count >= 0")
    from cudnn_rnn.torch import ranking  # the choices accelerate() takes, checked before CUDA
    if args.precision not in ranking.PRECISIONS:
        p.error(f"--precision: one of {', '.join(ranking.PRECISIONS)}")
    if not (math.isfinite(args.tolerance) and args.tolerance > 0):
        p.error("--tolerance: a positive relative error such as 1e-2")
    unknown = [n for n in args.shapes.split(",") if n not in SHAPES]
    if unknown:
        p.error(f"--shapes: unknown shape {unknown[0]!r} (choose from {', '.join(SHAPES)})")
    import torch
    for name in args.shapes.split(","):
        module, seq, batch, hidden = _module(name, args.dtype, torch)
        layers = SHAPES[name][1]
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
        if args.processes:
            with tempfile.TemporaryDirectory() as d:
                plan = str(fast.save(Path(d) / f"{name}.json"))
                across(name, args.dtype, plan, args.processes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
