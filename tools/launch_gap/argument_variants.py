"""One-off diagnostic (needs a GPU and torch), run on the H200 at commit efb4098, 2026-12-02:
    PYTHONPATH=. python3 tools/launch_gap/argument_variants.py GRU:25,1,1024,64 LSTM:25,1,1024,64 LSTM:25,1,128,8
in three processes. In one process, times four variants of our inference cudnnRNNForward
(devSeqLengths NULL or the device copy; work-space size of the mode or the larger of both)
against PyTorch on the same stream, 9 rotating rounds; prints one JSON line per shape.
"""
import json, statistics, sys
import torch  # loads PyTorch's libcudnn first
import cupy as cp
from cudnn_rnn import bindings
from cudnn_rnn.bindings.enums import ForwardMode
from cudnn_rnn.engine import timing
from cudnn_rnn.engine import readback
from cudnn_rnn.engine.flow import RNNFlow, _ptr, _seq_lengths
from cudnn_rnn.compare.overhead import config_from_settings
from cudnn_rnn.overhead import parse_shape
from cudnn_rnn.compare.pytorch import DTYPES, build, observe, step_fn
from cudnn_rnn.check.verify import compare_with, expected

lib = bindings.load()
out = []
shapes = [parse_shape(s) for s in sys.argv[1:]]
seen_all = observe([dict(s, training=False) for s in shapes])
for shape, seen in zip(shapes, seen_all):
    cfg = config_from_settings(shape, seen)
    with RNNFlow(cfg, lib, device=True, init="random", seed=1234) as flow:
        flow.run()
        check = compare_with(cfg, expected(cfg, flow.drawn, cp, keep_on_device=True), readback.outputs(flow, on_device=True))
        b, s = flow.buf, flow.sizes
        def call(dev_seq, size):
            def f():
                lib.cudnnRNNForward(flow.handle, flow.rnn, int(ForwardMode.INFERENCE),
                    _seq_lengths(b["seq_lengths"]) if dev_seq else None,
                    flow.x_desc, _ptr(b["x"]), flow.y_desc, _ptr(b["y_inf"]),
                    flow.h_desc, _ptr(b["hx"]), _ptr(b["hy_inf"]),
                    flow.c_desc, _ptr(b["cx"]) if cfg.has_cell_state else None,
                    _ptr(b["cy_inf"]) if cfg.has_cell_state else None,
                    s["weight_space"], _ptr(b["w"]), size, _ptr(b["work"]), 0, None)
            return f
        model, x, state = build(shape["cell"], shape["seq"], cfg.num_layers, cfg.hidden_size, shape["batch"],
                                cfg.input_size, cfg.bidirectional, dtype=DTYPES[cfg.data_type.name])
        torch.cuda.synchronize()
        variants = {"old: devSeq device, max work": call(True, s["work_space"]),
                    "devSeq NULL, max work": call(False, s["work_space"]),
                    "devSeq device, mode work": call(True, s["work_space_inference"]),
                    "new: devSeq NULL, mode work": call(False, s["work_space_inference"])}
        with torch.cuda.stream(torch.cuda.ExternalStream(flow.stream.ptr)):
            variants["torch"] = step_fn(model, x, state, False, pass_state=True, backward=False)
            names = list(variants)
            med = {n: [] for n in names}
            for r in range(9):
                order = names[r % len(names):] + names[:r % len(names)]
                for n in order:
                    med[n].append(timing.time_call(cp, flow.stream, variants[n], 50, 3, 0.3).median_ms)
        torch.cuda.synchronize()
        row = {"shape": shape, "passed": check.passed,
               "sizes": {k: s[k] for k in ("work_space", "work_space_inference", "work_space_training")},
               "median_ms": {n: statistics.median(v) for n, v in med.items()},
               "ratio_to_torch": {n: statistics.median(a / t for a, t in zip(v, med["torch"])) for n, v in med.items()}}
        out.append(row)
        print(json.dumps(row), flush=True)
