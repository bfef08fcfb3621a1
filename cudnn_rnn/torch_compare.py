"""PyTorch's default ``torch.nn.LSTM`` / ``GRU`` / ``RNN`` on the same shape, timed with CUDA
events in the calling process (the tuner's worker, beside its cuDNN cells).

PyTorch's defaults: float32 parameters and inputs, cuDNN with ``allow_tf32`` as the user
left it (True unless changed), its own choice of algorithm and math type.
"""
from __future__ import annotations

import statistics


def time_torch(cell: str, seq: int, layers: int, hidden: int, batch: int, input_size: int,
               bidirectional: bool, training: bool, reps: int = 20, warmup: int = 3) -> dict:
    try:
        import torch
    except Exception as exc:  # ImportError, or a broken install
        return {"skipped": f"PyTorch is not importable ({type(exc).__name__}: {exc})"}
    if not torch.cuda.is_available():
        return {"skipped": "PyTorch sees no CUDA device"}
    kinds = {"LSTM": (torch.nn.LSTM, {}), "GRU": (torch.nn.GRU, {}),
             "RNN_TANH": (torch.nn.RNN, {"nonlinearity": "tanh"}),
             "RNN_RELU": (torch.nn.RNN, {"nonlinearity": "relu"})}
    cls, extra = kinds[cell]
    torch.manual_seed(0)
    model = cls(input_size, hidden, layers, bidirectional=bidirectional, **extra).cuda()
    x = torch.rand(seq, batch, input_size, device="cuda") * 2 - 1
    if training:
        x.requires_grad_(True)

    def step():
        if training:
            out, state = model(x)
            loss = out.sum() + (sum(s.sum() for s in state) if isinstance(state, tuple)
                                else state.sum())
            loss.backward()
        else:
            with torch.no_grad():
                model(x)

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    q = statistics.quantiles(times, n=4) if len(times) > 1 else [times[0]] * 3
    return {"ms": statistics.median(times), "q1_ms": q[0], "q3_ms": q[2], "reps": reps,
            "torch": torch.__version__, "torch_cudnn": torch.backends.cudnn.version(),
            "allow_tf32": bool(torch.backends.cudnn.allow_tf32), "dtype": "float32",
            "objective": "forward + backward" if training else "forward (no_grad)"}
