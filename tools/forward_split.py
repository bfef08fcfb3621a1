"""Where a persistent forward's time goes: the whole forward against each of its launches
alone (layer 0's input quantizer or its input codes, the input GEMM, the counters' fill, the
kernel), each captured in a CUDA graph of its own and replayed (medians of 40, with the 10th
and 90th percentiles, ms; a graph of one launch costs its replay's overhead too: compare a
part with the fill's).

    python tools/forward_split.py --out DIR LSTM:50:1:1024:256@persistent:int8/both@b2t256u16wbe ...

Each item is CELL:T:L:H:B@CONFIG@LAUNCH_SHAPE (input size H). The engine is built as the
tuner builds it (calibrated plan); its outputs are not verified here (the probe tool and the
tests do that), so these are times of launches, not of a verified configuration.

A diagnostic behind statements in docs/lowbit.md (not part of the package).
"""
import json
import sys
from pathlib import Path

import numpy as np

from cudnn_rnn.cli import BadInput, OneLineParser
from cudnn_rnn.engine.gpu import NoGPU, cupy_or_raise
from cudnn_rnn.lowbit import candidates, kernels, model
from cudnn_rnn.lowbit.launch import Settings
from cudnn_rnn.matrix.runs import refuse_output

sys.path.insert(0, str(Path(__file__).parent))
from persistent_probe import _shape  # noqa: E402 (the probe's CELL:T:L:H:B)


def graph_time(cp, stream, fn, reps: int = 40) -> list[float]:
    """[median, 10th, 90th percentile] ms of replays of ``fn`` captured alone."""
    with stream:
        fn()
        stream.synchronize()
        stream.begin_capture()
        fn()
        graph = stream.end_capture()
        for _ in range(3):
            graph.launch(stream)
        stream.synchronize()
        times = []
        for _ in range(reps):
            a, b = cp.cuda.Event(), cp.cuda.Event()
            a.record(stream)
            graph.launch(stream)
            b.record(stream)
            b.synchronize()
            times.append(cp.cuda.get_elapsed_time(a, b))
    return [round(float(v), 4) for v in np.percentile(times, [50, 10, 90])]


def parts(e) -> dict:
    """The forward's launches, each alone (PersistentEngine.forward's order)."""
    def codes():
        for code, scale, xin in e.inside:
            code(e.x, scale, xin)
        for (_, _, _, scale, fmt), _ in zip(e.first, e.gx):
            kernels.quantizer(fmt)(e.x, scale, e.x_op, size=e.x_op.size)

    def gemm():
        for (_, m, w, _, _), gx in zip(e.first, e.gx):
            m.run(w.data.ptr, e.x_op.data.ptr, gx.data.ptr, e.workspace.data.ptr,
                  e.workspace.nbytes, e.stream.ptr)

    return {"whole": e.forward, "input_codes": codes, "input_gemm": gemm,
            "fill": lambda: e.counters.fill(0), "fill_and_kernel": e.launch}


def main() -> int:
    p = OneLineParser()
    p.add_argument("--out", required=True)
    p.add_argument("items", nargs="+", help="CELL:T:L:H:B@CONFIG@LAUNCH_SHAPE")
    a = p.parse_args()
    try:
        items = []
        for item in a.items:
            if item.count("@") != 2:
                raise ValueError(f"{item!r} is not one item")
            spec, name, shape = item.split("@")
            items.append((item, _shape(spec), candidates.parse(name), Settings.parse(shape)))
    except ValueError as exc:
        p.error(f"{exc} (items: CELL:T:L:H:B@CONFIG@LAUNCH_SHAPE)")
    refuse_output(a.out)
    try:
        cp = cupy_or_raise()
    except NoGPU as exc:
        p.error(str(exc))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = {}
    for item, cfg, config, settings in items:
        values = candidates.draw(cfg, 0)
        cal = values["calibration"]
        up = lambda v: None if v is None else cp.asarray(v)  # noqa: E731
        amaxes = model.calibrate(cfg, model.moved(values["stacked"], cp), up(cal["x"]),
                                 up(cal["hx"]), up(cal["cx"]))
        plan = None if config.fmt is None else model.plan(cfg, values["stacked"], amaxes,
                                                          config.fmt, config.parts)
        e = candidates.build(cfg, config, values["stacked"], plan, settings)
        try:
            io = values["io"]
            e.set_inputs(io["x"], io["hx"], io["cx"])
            rows[item] = {k: graph_time(cp, e.stream, f) for k, f in parts(e).items()}
            e.check()
        finally:
            e.close()
        print(item, json.dumps(rows[item]), flush=True)
        (out / "forward_split.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BadInput as exc:  # one line, exit 2: what to give instead
        print(f"forward_split.py: error: {exc}", file=sys.stderr)
        sys.exit(2)
