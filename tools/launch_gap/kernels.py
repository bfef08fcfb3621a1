"""One-off diagnostic (needs a GPU and torch), run on the H200 at commit a7fcb5d, 2026-12-02:
    PYTHONPATH=. python3 tools/launch_gap/kernels.py GRU:25,1,1024,64 LSTM:25,1,1024,64
in two processes. Event-timed ratio (6 alternating rounds), then, per side, the kernels that
CUPTI (torch.profiler) saw in 30 calls: names, launches and device time per call.
"""
import json, statistics, sys
import torch
import cupy as cp
from cudnn_rnn import bindings
from cudnn_rnn.bindings.enums import ForwardMode
from torch.profiler import ProfilerActivity, profile
from cudnn_rnn.engine import timing
from cudnn_rnn.engine.flow import RNNFlow
from cudnn_rnn.compare.overhead import config_from_settings
from cudnn_rnn.overhead import parse_shape
from cudnn_rnn.compare.pytorch import DTYPES, build, observe, step_fn

lib = bindings.load()
shapes = [parse_shape(s) for s in sys.argv[1:]]
for shape, seen in zip(shapes, observe([dict(s, training=False) for s in shapes])):
    cfg = config_from_settings(shape, seen)
    with RNNFlow(cfg, lib, device=True, init="random", seed=1234) as flow:
        flow.run()
        model, x, state = build(shape["cell"], shape["seq"], cfg.num_layers, cfg.hidden_size, shape["batch"],
                                cfg.input_size, cfg.bidirectional, dtype=DTYPES[cfg.data_type.name])
        torch.cuda.synchronize()
        sides = {"ours": lambda: flow.forward(ForwardMode.INFERENCE, dev_seq_lengths=False)}
        with torch.cuda.stream(torch.cuda.ExternalStream(flow.stream.ptr)):
            sides["torch"] = step_fn(model, x, state, False, pass_state=True, backward=False)
            ev = {k: [] for k in sides}
            for r in range(6):
                for k in (("ours", "torch") if r % 2 == 0 else ("torch", "ours")):
                    ev[k].append(timing.time_call(cp, flow.stream, sides[k], 50, 3, 0.3).median_ms)
            row = {"shape": f"{shape['cell']} {shape['hidden']}/{shape['batch']}",
                   "event_ms": {k: statistics.median(v) for k, v in ev.items()}}
            n = 30
            for k, fn in sides.items():
                fn(); flow.stream.synchronize()
                with profile(activities=[ProfilerActivity.CUDA]) as p:
                    for _ in range(n):
                        fn()
                    flow.stream.synchronize()
                kern = {}
                for e in p.key_averages():
                    t = getattr(e, "self_device_time_total", None)
                    if t is None:
                        t = getattr(e, "self_cuda_time_total", 0)
                    if t and e.count:
                        kern[e.key[:90]] = [e.count / n, round(t / n, 2)]
                row[k] = {"kernel_us_per_call": round(sum(v[1] for v in kern.values()), 1), "kernels": kern}
        torch.cuda.synchronize()
    print(json.dumps(row), flush=True)
