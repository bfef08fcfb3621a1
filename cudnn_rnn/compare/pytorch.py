"""PyTorch's side of every comparison: its default ``torch.nn.LSTM`` / ``GRU`` / ``RNN`` on a
shape, timed like our cells, and the cuDNN configuration it really uses.

*PyTorch's default* is what a user writes: a float32 module on the GPU, no state given,
``torch.backends.cudnn.allow_tf32`` as left (True), ``model.eval()`` under ``no_grad`` for
inference and forward + ``backward()`` in training mode for a training step. (A module
left in training mode calls cuDNN with ``CUDNN_FWD_MODE_TRAINING`` even under
``no_grad``: seen in cuDNN's API log, see :func:`observe`.)

Timing is :func:`cudnn_rnn.engine.timing.time_call` itself (back-to-back calls, one
synchronisation) on PyTorch's current stream, so both sides of a ratio are measured the
same way.

:func:`observe` runs PyTorch in a child process with cuDNN's API log on
(``CUDNN_LOGLEVEL_DBG=3``) and reads back the algorithm, data type, math precision,
math type, layout and forward mode of its ``cudnnRNNForward``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from cudnn_rnn.bindings.enums import DataType, DirectionMode, ForwardMode, MathType, RNNMode
from cudnn_rnn.bindings.library import mapped_paths
from cudnn_rnn.compare import apilog, peer_errors
from cudnn_rnn.compare.peer_errors import loss_of
from cudnn_rnn.engine import timing
from cudnn_rnn.matrix.jobs import job, name_of

# torch and cupy are imported inside the functions that use them: PyTorch is optional and
# heavy, cupy needs a GPU, and this module is imported without either (the tuner, reports)

ROOT = Path(__file__).resolve().parents[2]  # the checkout
MODULES = {"LSTM": ("LSTM", {}), "GRU": ("GRU", {}), "RNN_TANH": ("RNN", {"nonlinearity": "tanh"}),
           "RNN_RELU": ("RNN", {"nonlinearity": "relu"})}
DTYPES = {"FLOAT": "float32", "HALF": "float16", "BFLOAT16": "bfloat16", "DOUBLE": "float64"}


def unavailable() -> str | None:
    """Why PyTorch cannot be compared here, or None."""
    try:
        import torch
    except Exception as exc:  # ImportError, or a broken install
        return f"PyTorch is not importable ({type(exc).__name__}: {exc})"
    if not torch.cuda.is_available():
        return "PyTorch sees no CUDA device"
    return None


def build(cell: str, seq: int, layers: int, hidden: int, batch: int, input_size: int,
          bidirectional: bool, dtype: str = "float32", seed: int = 0):
    """(module, x, (h0, c0) or h0) on the GPU, U(-1, 1) inputs and states."""
    import torch
    name, extra = MODULES[cell]
    torch.manual_seed(seed)
    dt = getattr(torch, dtype)
    model = getattr(torch.nn, name)(input_size, hidden, layers, bidirectional=bidirectional,
                                    **extra).cuda().to(dt)
    x = torch.rand(seq, batch, input_size, device="cuda", dtype=dt) * 2 - 1
    dirs = 2 if bidirectional else 1
    h0 = torch.rand(layers * dirs, batch, hidden, device="cuda", dtype=dt) * 2 - 1
    state = (h0, torch.rand_like(h0) * 2 - 1) if cell == "LSTM" else h0
    return model, x, state


def step_fn(model, x, state, training: bool, pass_state: bool, backward: bool):
    """One call as a user makes it: inference (eval + no_grad), a training-mode forward
    (``backward=False``), or a training step with ``backward()``; each returns the module's
    ``(out, state)``."""
    import torch
    args = (x, state) if pass_state else (x,)
    if training:
        model.train()
    else:
        model.eval()
    if backward:
        x.requires_grad_(True)

        def step():
            out, st = model(*args)
            loss_of(out, st).backward()
            return out, st
        return step

    def step():
        with torch.no_grad():
            return model(*args)
    return step


def time_step(step, reps: int = 20, warmup: int = 3, budget_s: float | None = 1.0,
              min_reps: int = 5) -> dict:
    """:func:`cudnn_rnn.engine.timing.time_call` on PyTorch's current stream (wrapped for
    CuPy's events), so PyTorch's side of a ratio is timed by the very code that times ours."""
    import cupy as cp
    import torch
    from cudnn_rnn.engine.gpu import external_stream
    stream = external_stream(cp, torch.cuda.current_stream().cuda_stream)
    return timing.time_call(cp, stream, step, reps, warmup, budget_s, min_reps).as_record()


def versions() -> dict:
    import torch
    return {"torch": torch.__version__, "torch_cuda": torch.version.cuda,
            "torch_cudnn": torch.backends.cudnn.version(),
            "allow_tf32": bool(torch.backends.cudnn.allow_tf32),
            "torch_libcudnn": sorted(mapped_paths("libcudnn.so"))}


VARIANT_DTYPES = ("float32", "float16", "bfloat16")  # float32 eager is PyTorch's default


def graph_of(step):
    """``step`` captured in a CUDA graph (torch.cuda.graph, after warm-up on a side stream,
    as PyTorch's documentation does it); returns the replay, which returns what ``step``
    returned in the capture (the graph's own tensors, which each replay writes)."""
    import torch
    previous = torch.cuda.current_stream()
    try:
        side = torch.cuda.Stream()
        side.wait_stream(previous)
        with torch.cuda.stream(side):
            for _ in range(3):
                step()
        previous.wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = step()
        torch.cuda.synchronize()
    finally:  # a failed capture_end leaves torch.cuda.graph's stream current: restore ours
        torch.cuda.set_stream(previous)

    def replay():
        graph.replay()
        return captured
    return replay


def same(a: list, b: list) -> bool:
    """Two lists of tensors equal bit for bit, one for one (a replay against its plain
    call: what a graph is timed only after)."""
    return len(a) == len(b) and all(x.equal(y) for x, y in zip(a, b))


def _variant(cell, seq, layers, hidden, batch, input_size, bidirectional, training, dtype,
             captured, reps, warmup, budget_s) -> dict:
    """One way of running PyTorch's module: its data type, eager or graph-captured; timed
    only once one call's outputs (and a training step's gradients) matched the module in
    float64 (:mod:`cudnn_rnn.compare.peer_errors`), else ``skipped`` with the worst error."""
    if captured and training:
        return {"skipped": "training steps are timed eager only"}
    model, x, state = build(cell, seq, layers, hidden, batch, input_size, bidirectional,
                            dtype=dtype)
    step = step_fn(model, x, state, training, pass_state=False, backward=training)
    if captured:
        try:
            step = graph_of(step)
        except RuntimeError as exc:  # PyTorch refused to capture: say why
            return {"skipped": f"capture failed: {type(exc).__name__}: {exc}"}
    model.zero_grad(set_to_none=True)
    x.grad = None
    err = peer_errors.errors(model, (x,), step(), training)
    why = peer_errors.judged(cell, dtype, err)
    if why:
        return {"skipped": why, "errors": peer_errors.recorded(err)}
    t = time_step(step, reps, warmup, budget_s)
    return dict(t, ms=t["median_ms"], errors=err)


def _guarded(*args) -> dict:
    """:func:`_variant`, with a failure of that one variant recorded as its ``skipped``."""
    try:
        return _variant(*args)
    except RuntimeError as exc:  # PyTorch's errors (CUDA's, out of memory) are RuntimeErrors
        return {"skipped": f"{type(exc).__name__}: {exc}"}


@job
def time_torch(cell: str, seq: int, layers: int, hidden: int, batch: int, input_size: int,
               bidirectional: bool, training: bool, reps: int = 20, warmup: int = 3,
               budget_s: float | None = 1.0, best: bool = True) -> dict:
    """PyTorch's default module on the shape (float32, eager): inference, or a training
    step. With ``best``, also every variant a user can deploy (:data:`VARIANT_DTYPES`, eager
    and, for inference, CUDA-graph-captured), and which of them is fastest."""
    why = unavailable()
    if why:
        return {"skipped": why}
    shape = (cell, seq, layers, hidden, batch, input_size, bidirectional, training)
    default = _variant(*shape, "float32", False, reps, warmup, budget_s)  # measured once:
    out = dict(default, dtype="float32", objective="training step (forward + backward)"
               if training else "inference (eval, no_grad)", **versions())
    if best:  # ... and shown again as the "float32 eager" variant
        variants = {f"{d} {'graph' if g else 'eager'}":
                    default if (d, g) == ("float32", False)
                    else _guarded(*shape, d, g, reps, warmup, budget_s)
                    for d in VARIANT_DTYPES for g in (False, True)}
        timed = {k: v for k, v in variants.items() if "ms" in v}
        name = min(timed, key=lambda k: timed[k]["ms"]) if timed else None
        out["variants"] = variants
        out["best"] = {"variant": name, "ms": timed[name]["ms"]} if name else None
    return out


def torch_job(cfg, training: bool, reps: int) -> tuple[str, dict]:
    """The worker job that times PyTorch's modules at ``cfg``'s shape (its default and, see
    :func:`time_torch`, every variant): (name, params) for
    :meth:`cudnn_rnn.matrix.worker.Worker.job`."""
    return name_of(time_torch), {
        "cell": cfg.mode.name, "seq": cfg.seq_length, "layers": cfg.num_layers,
        "hidden": cfg.hidden_size, "batch": cfg.mini_batch, "input_size": cfg.input_size,
        "bidirectional": cfg.bidirectional, "training": training, "reps": reps}


# ---------------------------------------------------------------- what PyTorch asks cuDNN for
def observe(requests: list[dict], timeout: float = 300.0) -> list[dict]:
    """The cuDNN settings of PyTorch's ``cudnnRNNForward`` for each request (keys of
    :func:`build` plus ``training``), from cuDNN's API log of one child process. Each
    result is :func:`.apilog.rnn_forward_settings` with enum names, or ``{"skipped": why}``."""
    why = unavailable()
    if why:
        return [{"skipped": why} for _ in requests]
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "cudnn_api.log"
        env = dict(os.environ, CUDNN_LOGLEVEL_DBG="3", CUDNN_LOGDEST_DBG=str(log),
                   PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        try:
            proc = subprocess.run([sys.executable, "-m", "cudnn_rnn.compare.pytorch"],
                                  input=json.dumps(requests), capture_output=True, text=True,
                                  env=env, timeout=timeout)
        except subprocess.TimeoutExpired:
            return [{"skipped": f"PyTorch's logged run took over {timeout:g} s"}
                    for _ in requests]
        if proc.returncode != 0 or not log.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            return [{"skipped": f"PyTorch's logged run failed: {tail[0]}"} for _ in requests]
        calls = apilog.parse(log.read_text(errors="replace"), only=("cudnnRNNForward",))
    try:
        torch_versions = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return [{"skipped": "PyTorch's logged run printed no versions line"} for _ in requests]
    forwards = [c for c in calls if c.name == "cudnnRNNForward"]
    out = []
    for req in requests:
        settings = _last_matching(forwards, req)
        out.append({"skipped": "no matching cudnnRNNForward in PyTorch's cuDNN log"}
                   if settings is None else
                   {k: (v.name if hasattr(v, "name") else v) for k, v in settings.items()}
                   | {"torch": torch_versions})
    return out


def settings_label(settings: dict) -> str:
    """An observed configuration as DATA/PREC/MATH/ALGO (the records' names)."""
    return (f"{settings['dataType']}/{settings['mathPrec']}/"
            f"{MathType[settings['mathMode']].short}/{settings['algo']}")


def observed_configs(configs: list) -> list[dict]:
    """For each :class:`~cudnn_rnn.engine.config.RNNConfig` shape, the cuDNN configuration
    PyTorch's inference forward uses in each of :data:`VARIANT_DTYPES`, as
    :func:`settings_label` or ``"not observed: why"`` (one logged child process for all)."""
    requests = [{"cell": c.mode.name, "seq": c.seq_length, "layers": c.num_layers,
                 "hidden": c.hidden_size, "batch": c.mini_batch, "input_size": c.input_size,
                 "bidirectional": c.bidirectional, "dtype": d, "training": False}
                for c in configs for d in VARIANT_DTYPES]
    seen = iter(observe(requests))
    return [{d: (f"not observed: {s['skipped']}" if "skipped" in s else settings_label(s))
             for d, s in zip(VARIANT_DTYPES, (next(seen) for _ in VARIANT_DTYPES))}
            for _ in configs]


def _last_matching(forwards, req: dict) -> dict | None:
    """The settings of the last logged forward made for ``req``: same cell, sizes, layers,
    direction, data type, input dims and forward mode."""
    want_dtype = {v: k for k, v in DTYPES.items()}[req.get("dtype", "float32")]
    want = {"cellMode": RNNMode[req["cell"]], "hiddenSize": req["hidden"],
            "numLayers": req["layers"], "inputSize": req["input_size"],
            "bidirectional": DirectionMode.BIDIRECTIONAL if req["bidirectional"]
            else DirectionMode.UNIDIRECTIONAL, "dataType": DataType[want_dtype],
            "fwdMode": ForwardMode.TRAINING if req.get("training") else ForwardMode.INFERENCE,
            "xDims": [req["seq"], req["batch"], req["input_size"]]}
    for call in reversed(forwards):
        settings = apilog.rnn_forward_settings([call])
        if all(settings.get(k) == v for k, v in want.items()):
            return settings
    return None


def _observe_child() -> None:  # pragma: no cover - runs under cuDNN's logging, in a child
    """Run each request's forward once (state passed, as the overhead check does)."""
    import torch
    for req in json.loads(sys.stdin.read()):
        req = dict(req)
        training = bool(req.pop("training", False))
        model, x, state = build(**req)
        step_fn(model, x, state, training, pass_state=True, backward=False)()
        torch.cuda.synchronize()
    print(json.dumps(versions()))


if __name__ == "__main__":  # pragma: no cover
    _observe_child()
