"""The overhead measurement: this project's flow and PyTorch on one cuDNN configuration.

:func:`measure_pair` is a worker job (:mod:`cudnn_rnn.matrix.jobs`): in the worker's
process and CUDA context it runs the configuration PyTorch used (as cuDNN's API log showed
it) through :class:`~cudnn_rnn.engine.flow.RNNFlow`, verifies it against the float64
reference, then times both sides on one stream, alternating, with the same event method.
:func:`merge_processes` combines what several fresh processes measured. The command is
:mod:`cudnn_rnn.overhead`.
"""
from __future__ import annotations

import statistics
import time

from cudnn_rnn import bindings
from cudnn_rnn.bindings.enums import (DataType, DirectionMode, ForwardMode, MathType, RNNAlgo,
                                      RNNBiasMode, RNNDataLayout, RNNInputMode, RNNMode)
from cudnn_rnn.bindings.errors import CudnnError
from cudnn_rnn.bindings.library import mapped_paths
from cudnn_rnn.check.verify import compare_with, expected
from cudnn_rnn.compare import peer_errors
from cudnn_rnn.compare.pytorch import DTYPES, build, graph_of, step_fn
from cudnn_rnn.engine import capture, readback, timing
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.engine.flow import RNNFlow
from cudnn_rnn.engine.gpu import cuda_errors
from cudnn_rnn.matrix.jobs import job

TARGET = 1.03  # ours / PyTorch's time on the same configuration, at most


def config_from_settings(shape: dict, s: dict) -> RNNConfig:
    """Our :class:`RNNConfig` for the settings PyTorch used (names as observed)."""
    return RNNConfig(seq_length=shape["seq"], num_layers=s["numLayers"], hidden_size=s["hiddenSize"],
                     mini_batch=shape["batch"], input_size=s["inputSize"], mode=RNNMode[s["cellMode"]],
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


@job
def measure_pair(shape: dict, settings: dict, reps: int = 50, rounds: int = 7,
                 budget_s: float = 0.3) -> dict:  # pragma: no cover - needs a GPU and torch
    """Ours and PyTorch's time for the same cuDNN configuration (runs in the worker, whose
    libcudnn is the one already loaded)."""
    import cupy as cp  # here, not at the top: the parent imports this module without a GPU
    import torch  # and without PyTorch
    lib = bindings.loaded() or bindings.load()  # the worker's, whatever --cudnn named
    cfg = config_from_settings(shape, settings)
    mode = ForwardMode[settings["fwdMode"]]
    training = mode == ForwardMode.TRAINING
    with RNNFlow(cfg, lib, device=True, init="random", seed=1234) as flow:
        result = flow.run()
        if result.failure is not None:
            f = result.failure
            return {"skipped": f"our flow failed at {f.stage}: {f.call} {f.status} ({f.reason})"}
        want = expected(cfg, flow.drawn, cp, keep_on_device=True)
        check = compare_with(cfg, want, readback.outputs(flow, on_device=True))
        verification = check.as_record()
        if not check.passed:
            return {"skipped": "our outputs did not match the float64 reference",
                    "verification": verification}
        # the same arguments as PyTorch's call, devSeqLengths included (NULL in its log):
        # the timed call itself verified too (the run above passed the flow's own)
        dev_seq = settings.get("devSeqLengths") != "NULL"
        ours = lambda: flow.forward(mode, dev_seq_lengths=dev_seq)  # noqa: E731
        written = [n for n in capture.FORWARD_OUTPUTS  # this forward mode's
                   if n.endswith("_inf") != training and n in flow.buf]
        capture.prepare(flow, written)  # NaN first: an output the call leaves cannot pass
        ours()
        outs = readback.outputs(flow, on_device=True)
        timed_check = compare_with(cfg, want, {k: outs[k] for k in written})
        if not timed_check.passed:
            return {"skipped": f"our timed call (devSeqLengths {'device' if dev_seq else 'NULL'}) "
                               "did not match the float64 reference",
                    "verification": timed_check.as_record()}
        model, x, state = build(shape["cell"], shape["seq"], cfg.num_layers, cfg.hidden_size,
                                shape["batch"], cfg.input_size, cfg.bidirectional,
                                dtype=DTYPES[cfg.data_type.name])
        torch.cuda.synchronize()  # built on PyTorch's default stream; used on ours below
        with torch.cuda.stream(torch.cuda.ExternalStream(flow.stream.ptr)):
            theirs = step_fn(model, x, state, training, pass_state=True, backward=False)

            def torch_check(got) -> tuple:  # PyTorch's call (or replay) against float64
                err = peer_errors.errors(model, (x, state), got, training=False)
                return err, peer_errors.judged(shape["cell"], DTYPES[cfg.data_type.name], err)
            torch_errors, why = torch_check(theirs())
            if why:
                return {"skipped": f"PyTorch's call: {why}",
                        "torch_errors": peer_errors.recorded(torch_errors)}
            per_round = [(a.as_record(), b.as_record()) for a, b in
                         _alternating(cp, flow.stream, ours, theirs, rounds, reps, budget_s)]
            (host_ours, idle_ours), (host_torch, idle_torch) = (
                _idle_gpu_call(cp, flow.stream, ours), _idle_gpu_call(cp, flow.stream, theirs))
            host = {"ours_us": host_ours, "torch_us": host_torch}
            isolated = {"ours_ms": idle_ours, "torch_ms": idle_torch}
            (q_ours, ahead_ours), (q_torch, ahead_torch) = (
                _queued_ms(cp, flow.stream, ours), _queued_ms(cp, flow.stream, theirs))
            queued = {"ours_ms": q_ours, "torch_ms": q_torch, "host_ahead": ahead_ours and ahead_torch}
            captured = _captured_pair(cp, flow, ours, theirs, torch_check, reps, budget_s)
        torch.cuda.synchronize()
        work_size, reserve_size = flow.forward_space_sizes(mode)
        arguments = {  # what each side passed to cudnnRNNForward besides the descriptors
            "devSeqLengths": {"ours": "device" if dev_seq else "NULL",
                              "torch": settings.get("devSeqLengths")},
            "workSpaceSize": {"ours": work_size, "torch": settings.get("workSpaceSize")},
            "weightSpaceSize": {"ours": flow.sizes["weight_space"],
                                "torch": settings.get("weightSpaceSize")},
            "reserveSpaceSize": {"ours": reserve_size, "torch": settings.get("reserveSpaceSize")}}
        in_process = sorted(mapped_paths("libcudnn.so"))  # two paths: not one library
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
            "captured": captured,
            "cudnn_objects_in_process": in_process,
            "verification": {k: v for k, v in verification.items() if k != "nonfinite"},
            "timed_call_errors": timed_check.errors, "torch_errors": torch_errors}


def _captured_pair(cp, flow, ours, theirs, torch_check, reps: int, budget_s: float) -> dict:
    """Both sides as a user who captures them deploys them: each call in a CUDA graph
    (ours checked bit for bit against its plain call, PyTorch's replay by ``torch_check``
    against float64), replays timed on the same stream; ``{"skipped": why}`` when either
    side cannot be captured or its replay does not check."""
    try:
        graph = capture.capture(flow, lambda f: ours())
        capture.check_replay(flow, lambda f: ours(), graph, capture.FORWARD_OUTPUTS)
    except capture.CaptureRefused as exc:  # the plain pair stands
        return {"skipped": f"ours: {exc}"}
    except (CudnnError,) + cuda_errors(cp) as exc:  # the check's own calls failed
        return {"skipped": f"ours: the capture's check failed: {type(exc).__name__}: {exc}"}
    try:
        replay = graph_of(theirs)
    except RuntimeError as exc:  # PyTorch's errors, CUDA's included, are RuntimeErrors
        return {"skipped": f"PyTorch's capture: {type(exc).__name__}: {exc}"}
    _, why = torch_check(replay())
    if why:
        return {"skipped": f"PyTorch's replay: {why}"}
    pairs = _alternating(cp, flow.stream, lambda: graph.launch(flow.stream), replay, 3, reps,
                         budget_s)
    a, b = (statistics.median(p[i].median_ms for p in pairs) for i in (0, 1))
    return {"ours_ms": a, "torch_ms": b, "ratio": a / b}


def _alternating(cp, stream, ours, theirs, rounds: int, reps: int, budget_s: float) -> list:
    """(ours, theirs) :class:`~cudnn_rnn.engine.timing.Timing` per round, timed on one
    stream with the same method; which side goes first alternates, so drift cancels."""
    out = []
    for i in range(rounds):
        first, second = (ours, theirs) if i % 2 == 0 else (theirs, ours)
        x = timing.time_call(cp, stream, first, reps, 3, budget_s)
        y = timing.time_call(cp, stream, second, reps, 3, budget_s)
        out.append((x, y) if i % 2 == 0 else (y, x))
    return out


def merge_processes(per_process: list[list[dict]]) -> list[dict]:
    """One row per pair from the rows of several processes (same requests, same order).

    With one process a row is as measured (ratio = median over its rounds, range = over
    rounds). With more, the first process's row is kept for its details, ``processes``
    lists each process's figures, and ``ratio``/``ours``/``torch`` (and the captured
    pair's, :func:`_merge_captured`) become medians over
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
                   arguments_differ=sorted({k for r in measured for k in r.get("arguments_differ", [])}),
                   captured=_merge_captured([r.get("captured") for r in measured]))
        merged.append(row)
    return merged


def _merge_captured(per_process: list) -> dict | None:
    """The captured pair over processes: medians and the range of the per-process ratios,
    or the first process's reason when any process could not capture."""
    if any(c is None for c in per_process):
        return None
    skipped = next((c for c in per_process if "ratio" not in c), None)
    if skipped is not None:
        return skipped
    ratios = [c["ratio"] for c in per_process]
    return {"ours_ms": statistics.median(c["ours_ms"] for c in per_process),
            "torch_ms": statistics.median(c["torch_ms"] for c in per_process),
            "ratio": statistics.median(ratios), "ratio_min": min(ratios),
            "ratio_max": max(ratios), "processes": len(per_process)}
