"""``python -m cudnn_rnn.overhead``: does the ctypes path cost anything next to PyTorch?

For each shape, the configuration PyTorch really uses is read from cuDNN's API log of a
PyTorch run (:func:`.torch_compare.observe`: algorithm, data type, math precision, math
type, layout, padded-IO flag, forward mode). The same configuration then runs through
this project's flow, is verified against the float64 reference, and is timed against
``torch.nn.LSTM``/``GRU``/``RNN`` with the state passed in, so both sides do the same
work: one ``cudnnRNNForward``. Both are timed in one process, on one CUDA stream, with
the same event method, alternating in ``--rounds`` rounds; the ratio is ours / PyTorch's
(target ≤ 1.03). Beside it, three figures show where any difference comes from: the
host time to enqueue one call on an idle GPU, the latency of one call issued on an idle
GPU, and the *host-ahead* ratio, of calls queued behind a long GEMM so that the GPU never
waits for the host. Where the host-ahead ratio is 1 and the back-to-back ratio is not,
the difference is in how fast the host feeds cuDNN's launches, not in the GPU work.
"""
from __future__ import annotations

import json
import statistics
import sys
import time

from bindings.enums import (DataType, DirectionMode, ForwardMode, MathType, RNNAlgo,
                            RNNBiasMode, RNNDataLayout, RNNInputMode, RNNMode)

from .cli import BadInput, OneLineParser, positive_int, run_main
from .config import RNNConfig

TARGET = 1.03
DEFAULT_SHAPES = ("LSTM:20,2,512,64", "LSTM:20,1,128,8", "LSTM:25,1,1024,64",
                  "LSTM:25,1,2048,128", "LSTM:25,1,4096,128", "GRU:25,1,1024,64",
                  "LSTM:25,1,1024,64:float16")


def parse_shape(text: str) -> dict:
    """``CELL:T,L,H,B[:dtype]`` (seqLength, layers, hidden, batch; dtype of PyTorch's module)."""
    parts = text.split(":")
    try:
        cell = parts[0].upper()
        if cell not in RNNMode.__members__:
            raise ValueError
        t, l, h, b = (int(v) for v in parts[1].split(","))
        dtype = parts[2] if len(parts) > 2 else "float32"
        if min(t, l, h, b) < 1 or dtype not in ("float32", "float16", "bfloat16") or len(parts) > 3:
            raise ValueError
    except (ValueError, IndexError):
        raise BadInput(f"bad --shape {text!r}: write CELL:T,L,H,B[:float32|float16|bfloat16], "
                       "e.g. LSTM:20,2,512,64") from None
    try:
        RNNConfig(seq_length=t, num_layers=l, hidden_size=h, mini_batch=b, cell=RNNMode[cell])
    except ValueError as exc:
        raise BadInput(f"bad --shape {text!r}: {exc}") from None
    return {"cell": cell, "seq": t, "layers": l, "hidden": h, "batch": b, "input_size": h,
            "bidirectional": False, "dtype": dtype}


def config_from_settings(shape: dict, s: dict) -> RNNConfig:
    """Our :class:`RNNConfig` for the settings PyTorch used (names as observed)."""
    return RNNConfig(seq_length=shape["seq"], num_layers=s["numLayers"], hidden_size=s["hiddenSize"],
                     mini_batch=shape["batch"], input_size=s["inputSize"], cell=RNNMode[s["cellMode"]],
                     proj_size=None if s["projSize"] == s["hiddenSize"] else s["projSize"],
                     data_type=DataType[s["dataType"]], math_prec=DataType[s["mathPrec"]],
                     math_type=MathType[s["mathMode"]], algo=RNNAlgo[s["algo"]],
                     direction=DirectionMode[s["bidirectional"]],
                     input_mode=RNNInputMode[s["inputMode"]], bias_mode=RNNBiasMode[s["biasMode"]],
                     layout=RNNDataLayout[s["layout"]])


def _median_of(timings: list[dict], key: str = "median_ms") -> float:
    return statistics.median(t[key] for t in timings)


def _idle_gpu_call(cp, stream, fn, n: int = 20) -> tuple[float, float]:
    """One call issued on an idle GPU (nothing queued before it), ``n`` times: the median
    host time to make the call (µs) and the median device-clock latency (ms) around it."""
    host, device = [], []
    for _ in range(n):
        stream.synchronize()
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record(stream)
        t0 = time.perf_counter()
        fn()
        host.append(time.perf_counter() - t0)
        end.record(stream)
        end.synchronize()
        device.append(cp.cuda.get_elapsed_time(start, end))
    return statistics.median(host) * 1e6, statistics.median(device)


def _queued_ms(cp, stream, fn, calls: int = 8, repeats: int = 5) -> tuple[float, bool]:
    """Median device time per call with the host far ahead of the GPU: ``calls`` calls are
    enqueued behind an 8192³ FP32 GEMM (about 20 ms on an H200), so the GPU runs them
    back to back and never waits for the host's launches. Also returns whether the host
    really was ahead: the GEMM had not finished when the last call was enqueued."""
    with stream:
        a = cp.ones((8192, 8192), dtype=cp.float32)
    times, ahead = [], True
    for _ in range(repeats):
        stream.synchronize()
        with stream:
            cp.matmul(a, a)
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record(stream)
        for _ in range(calls):
            fn()
        end.record(stream)
        ahead = ahead and not start.done
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end) / calls)
    return statistics.median(times), ahead


def measure_pair(lib, shape: dict, settings: dict, reps: int = 50, rounds: int = 7,
                 budget_s: float = 0.3) -> dict:  # pragma: no cover - needs a GPU and torch
    """Ours and PyTorch's time for the same cuDNN configuration (runs in the worker)."""
    import cupy as cp
    import torch
    from . import timing
    from .flow import RNNFlow
    from .torch_compare import DTYPES, build, step_fn
    from .verify import compare_with, expected
    cfg = config_from_settings(shape, settings)
    mode = ForwardMode[settings["fwdMode"]]
    training = mode == ForwardMode.TRAINING
    with RNNFlow(cfg, lib, device=True, init="random", seed=1234) as flow:
        result = flow.run()
        if result.failure is not None:
            f = result.failure
            return {"skipped": f"our flow failed at {f.stage}: {f.call} {f.status} ({f.reason})"}
        check = compare_with(cfg, expected(cfg, flow.host, cp, keep_on_device=True),
                             flow.outputs(on_device=True))
        verification = check.as_record()
        if not check.passed:
            return {"skipped": "our outputs did not match the float64 reference",
                    "verification": verification}
        model, x, state = build(shape["cell"], shape["seq"], cfg.num_layers, cfg.hidden_size,
                                shape["batch"], cfg.input, cfg.bidirectional,
                                dtype=DTYPES[cfg.data_type.name])
        torch.cuda.synchronize()  # built on PyTorch's default stream; used on ours below
        # the same arguments as PyTorch's call, devSeqLengths included (NULL in its log)
        dev_seq = settings.get("devSeqLengths") != "NULL"
        ours = lambda: flow.forward(mode, dev_seq_lengths=dev_seq)  # noqa: E731
        with torch.cuda.stream(torch.cuda.ExternalStream(flow.stream.ptr)):
            theirs = step_fn(model, x, state, training, pass_state=True, backward=False)
            per_round = []
            for i in range(rounds):  # alternate which side goes first, so drift cancels
                first, second = (ours, theirs) if i % 2 == 0 else (theirs, ours)
                x = timing.time_call(cp, flow.stream, first, reps, 3, budget_s).as_record()
                y = timing.time_call(cp, flow.stream, second, reps, 3, budget_s).as_record()
                per_round.append((x, y) if i % 2 == 0 else (y, x))
            (host_ours, idle_ours), (host_torch, idle_torch) = (
                _idle_gpu_call(cp, flow.stream, ours), _idle_gpu_call(cp, flow.stream, theirs))
            host = {"ours_us": host_ours, "torch_us": host_torch}
            isolated = {"ours_ms": idle_ours, "torch_ms": idle_torch}
            (q_ours, ahead_ours), (q_torch, ahead_torch) = (
                _queued_ms(cp, flow.stream, ours), _queued_ms(cp, flow.stream, theirs))
            queued = {"ours_ms": q_ours, "torch_ms": q_torch, "host_ahead": ahead_ours and ahead_torch}
        torch.cuda.synchronize()
        work_size, reserve_size = flow.forward_space_sizes(mode)
        arguments = {  # what each side passed to cudnnRNNForward besides the descriptors
            "devSeqLengths": {"ours": "device" if dev_seq else "NULL",
                              "torch": settings.get("devSeqLengths")},
            "workSpaceSize": {"ours": work_size, "torch": settings.get("workSpaceSize")},
            "weightSpaceSize": {"ours": flow.sizes["weight_space"],
                                "torch": settings.get("weightSpaceSize")},
            "reserveSpaceSize": {"ours": reserve_size, "torch": settings.get("reserveSpaceSize")}}
        in_process = sorted({line.split()[-1] for line in open("/proc/self/maps")
                             if "/libcudnn.so" in line})  # two paths: not one library
    ratios = [a["median_ms"] / b["median_ms"] for a, b in per_round]
    return {"config": cfg.as_record(), "fwd_mode": mode.name,
            "arguments": arguments,
            "arguments_differ": sorted(k for k, v in arguments.items() if v["ours"] != v["torch"]),
            "ours": {"median_ms": _median_of([a for a, _ in per_round]), "rounds": [a for a, _ in per_round]},
            "torch": {"median_ms": _median_of([b for _, b in per_round]), "rounds": [b for _, b in per_round]},
            "ratio": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
            "host_enqueue": host, "isolated": isolated,
            "isolated_ratio": isolated["ours_ms"] / isolated["torch_ms"],
            "queued": queued, "queued_ratio": queued["ours_ms"] / queued["torch_ms"],
            "cudnn_objects_in_process": in_process,
            "verification": {k: v for k, v in verification.items() if k != "nonfinite"}}


def build_parser() -> OneLineParser:
    p = OneLineParser(prog="cudnn_rnn.overhead", description=__doc__.splitlines()[0])
    p.add_argument("--shape", action="append", type=parse_shape, default=None,
                   help="CELL:T,L,H,B[:dtype] (repeatable; default: a set from 128 to 4096 hidden)")
    p.add_argument("--mode", choices=("inference", "training", "both"), default="both",
                   help="PyTorch's eval() forward, its training-mode forward, or both")
    p.add_argument("--reps", type=positive_int, default=50, help="most timed calls per measurement")
    p.add_argument("--rounds", type=positive_int, default=7, help="alternating rounds per pair")
    p.add_argument("--processes", type=positive_int, default=1,
                   help="measure every pair in this many fresh processes (the ratio is then "
                        "the median over processes and the range is between processes)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--out", default=None, help="also write overhead.json into this directory")
    p.add_argument("--save", action="store_true",
                   help="write overhead.json into this machine's run folder of probes/bench.toml "
                        "(runs/...; what make bench does) and refresh bench.md there")
    p.add_argument("--cudnn", default=None, help="path of the libcudnn to use (default: PyTorch's)")
    return p


def _measure_in_one_process(args, requests: list[dict], observed: list[dict] | None):
    """One fresh worker process measures every pair; returns (rows, observed, worker info).
    PyTorch is observed (once) by the first process, after it has found a GPU."""
    from .gpu import NoGPU
    from .torch_compare import observe
    from .worker import start_worker
    worker, info = start_worker(args.cudnn, {"reps": args.reps})
    try:
        if not info["device_stages"]:
            raise NoGPU(f"the overhead check needs a CUDA GPU: {info['device'].get('reason')}")
        if observed is None:
            observed = observe(requests)  # each {"skipped": why} when PyTorch cannot run
        rows = []
        for req, seen in zip(requests, observed):
            shape = {k: v for k, v in req.items() if k != "training"}
            row = {"shape": shape, "training_mode": req["training"], "observed": seen}
            if "skipped" in seen:
                row["skipped"] = seen["skipped"]
            elif seen.get("cudnn_version") != info["library"].get("cudnn_version_raw"):
                row["skipped"] = (f"PyTorch ran cuDNN {seen.get('cudnn_version')}, this worker "
                                  f"{info['library'].get('cudnn_version')}: not the same library")
            else:
                row.update(worker.job("overhead", {"shape": shape, "settings": seen,
                                                   "reps": args.reps, "rounds": args.rounds}))
            rows.append(row)
    finally:
        worker.close()
    return rows, observed, info


def merge_processes(per_process: list[list[dict]]) -> list[dict]:
    """One row per pair from the rows of several processes (same requests, same order).

    With one process a row is as measured (ratio = median over its rounds, range = over
    rounds). With more, the first process's row is kept for its details, ``processes``
    lists each process's figures, and ``ratio``/``ours``/``torch`` become medians over
    processes with ``ratio_min``/``ratio_max`` the range of the per-process ratios: the
    spread between processes, which on launch-bound shapes exceeds that between rounds."""
    if len(per_process) == 1:
        return per_process[0]
    merged = []
    for rows in zip(*per_process):
        row = dict(rows[0])
        measured = [r for r in rows if "ratio" in r]
        if len(measured) < len(rows):
            row.pop("ratio", None)
            row["skipped"] = next(r.get("skipped") for r in rows if "ratio" not in r)
            merged.append(row)
            continue
        row["processes"] = [{"ratio": r["ratio"], "ratio_min": r["ratio_min"], "ratio_max": r["ratio_max"],
                             "ours_ms": r["ours"]["median_ms"], "torch_ms": r["torch"]["median_ms"],
                             "host_enqueue": r["host_enqueue"], "isolated_ratio": r["isolated_ratio"],
                             "queued_ratio": r.get("queued_ratio")}
                            for r in measured]
        ratios = [p["ratio"] for p in row["processes"]]
        row.update(ratio=statistics.median(ratios), ratio_min=min(ratios), ratio_max=max(ratios),
                   ours=dict(row["ours"], median_ms=statistics.median(p["ours_ms"] for p in row["processes"])),
                   torch=dict(row["torch"], median_ms=statistics.median(p["torch_ms"] for p in row["processes"])),
                   arguments_differ=sorted({k for r in measured for k in r.get("arguments_differ", [])}))
        merged.append(row)
    return merged


def run(args) -> dict:
    """Observe PyTorch, then measure each pair in ``args.processes`` fresh worker processes,
    one after the other; returns the report dict."""
    from . import provenance, runs
    shapes = args.shape or [parse_shape(s) for s in DEFAULT_SHAPES]
    modes = {"inference": [False], "training": [True], "both": [False, True]}[args.mode]
    requests = [dict(s, training=t) for s in shapes for t in modes]
    per_process, observed = [], None
    for _ in range(args.processes):
        rows, observed, info = _measure_in_one_process(args, requests, observed)
        per_process.append(rows)
    rows = merge_processes(per_process)
    measured = [r["ratio"] for r in rows if "ratio" in r]
    return {"target": TARGET, "processes": args.processes, "rounds": args.rounds, "rows": rows,
            "worst_ratio": max(measured) if measured else None,
            "median_ratio": statistics.median(measured) if measured else None,
            "worst_single_process": max((p["ratio"] for r in rows for p in r.get("processes", [r])
                                         if "ratio" in p), default=None),
            "provenance": provenance.collect(info["library"], info["device"]),
            "machine": runs.machine_identity(info["library"], info["device"], True)}


def table(report: dict) -> str:
    from tabulate import tabulate
    from .reporting.analysis import config_label
    rows = []
    for r in report["rows"]:
        s = r["shape"]
        name = f"{s['cell']} {s['seq']},{s['layers']},{s['hidden']},{s['batch']} {s['dtype']}"
        if "ratio" not in r:
            rows.append((name, "train" if r["training_mode"] else "eval", "", "", "", "", "",
                         "", r.get("skipped", "")))
            continue
        c = r["config"]
        rows.append((name, r["fwd_mode"].lower(),
                     config_label(c),
                     f"{r['ours']['median_ms']:.4f}", f"{r['torch']['median_ms']:.4f}",
                     f"{r['ratio']:.3f} ({r['ratio_min']:.3f}-{r['ratio_max']:.3f})",
                     f"{r['host_enqueue']['ours_us']:.0f} / {r['host_enqueue']['torch_us']:.0f}",
                     f"{r['isolated_ratio']:.3f}", _f3(r.get("queued_ratio"))))
    return tabulate(rows, headers=("shape (T,L,H,B)", "fwd mode", "cuDNN config PyTorch used",
                                   "ours ms", "torch ms", "ratio (range over " + (
                                       "processes)" if report.get("processes", 1) > 1 else "rounds)"),
                                   "host µs ours/torch",
                                   "idle-GPU ratio", "host-ahead ratio"))


def _f3(v) -> str:
    return "" if v is None else f"{v:.3f}"


def main(argv=None) -> int:
    from . import runs
    from .reporting import bench as bench_report
    from .results import write_json
    args = build_parser().parse_args(argv)
    out = runs.output_dir(args.out) if args.out is not None else None
    report = run(args)
    if args.save and out is None:
        from .bench import default_run_dir
        out = runs.output_dir(default_run_dir(report["machine"]), "the run folder")
    if out is not None:
        write_json(out / "overhead.json", report)
        if (out / "bench.jsonl").exists():
            print(f"refreshed {bench_report.write(out, out)}")
    if args.json:
        print(json.dumps(report, indent=1, default=str))
    else:
        print(table(report))
        w = report["worst_ratio"]
        over = (f"median of {report['processes']} processes; worst single process "
                f"{report['worst_single_process']:.3f}") if report["processes"] > 1 else "one process"
        print(f"\nworst ratio ours/PyTorch {w:.3f} ({over}; target ≤ {TARGET})" if w is not None
              else "\nno pair was measured")
    return 0 if report["worst_ratio"] is not None else 1


def cli(argv=None) -> int:
    return run_main(main, argv, prog="cudnn_rnn.overhead")


if __name__ == "__main__":
    sys.exit(cli())
