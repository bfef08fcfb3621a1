"""The FP8 RNN a careful PyTorch user can write today: every GEMM through
``torch._scaled_mm`` in E4M3 with per-tensor scales, the gate math in one ``torch.compile``d
function, the whole forward captured in a CUDA graph. The benchmark's peer for the 8-bit
rows: PyTorch has no FP8 (or INT8) RNN on the GPU, so this is what one would build.

Per layer and direction: the input GEMM over all steps (the layer input quantized with its
calibrated scale), then per step ``h`` (E4M3, its calibrated scale) times ``W_hh`` and the
compiled gate function, which also writes the next step's E4M3 ``h``. Scales are max |x|
of a float32 run on a separate calibration batch / 448 (activations) and max |w| / 448
(weights), as this project's own E4M3 plans. Outputs are compared with the float64
reference (the module's own weights in float64) before anything is timed; the bound is
the project's E4M3 bound (:data:`cudnn_rnn.lowbit.configs.BOUNDS`).
"""
from __future__ import annotations

from cudnn_rnn.compare.peer_errors import errors, recorded
from cudnn_rnn.compare.pytorch import build, graph_of, same, time_step, unavailable
from cudnn_rnn.matrix.jobs import job, name_of

E4M3_MAX = 448.0
BOUND = 1.5e-1  # = lowbit.configs.BOUNDS["e4m3"] (compare/ may not import lowbit/)


def _gates(cell: str):
    """The gate function of one step: (gx_t, gh, c, h, inv_scale) -> (h, c, h in E4M3)."""
    import torch

    def lstm(gx, gh, c, h, inv):
        i, f, g, o = (gx + gh).chunk(4, dim=1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        return h, c, (h * inv).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)

    def gru(gx, gh, c, h, inv):
        xr, xz, xn = gx.chunk(3, dim=1)
        hr, hz, hn = gh.chunk(3, dim=1)
        r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
        h = (1 - z) * torch.tanh(xn + r * hn) + z * h
        return h, c, (h * inv).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)

    def plain(act):
        def fn(gx, gh, c, h, inv):
            h = act(gx + gh)
            return h, c, (h * inv).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
        return fn
    return {"LSTM": lstm, "GRU": gru, "RNN_TANH": plain(torch.tanh),
            "RNN_RELU": plain(torch.relu)}[cell]


def compiled_gates(cell: str, forward) -> tuple:
    """(the gate function, how it runs): ``torch.compile``d, where ``forward(gates)`` runs
    with it (compiling is lazy: a failure shows at the first call, so the first forward is
    made here); else the eager function, with why."""
    import torch
    eager = _gates(cell)
    try:
        fast = torch.compile(eager, dynamic=False, fullgraph=True)
        forward(fast)
        return fast, "torch.compile"
    except Exception as exc:  # noqa: BLE001 - recorded, and the eager gates are used
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        return eager, f"eager (torch.compile failed: {type(exc).__name__}: {first})"


def _layers(module):
    """(W_ih, W_hh, b_ih + 0, b_hh) per layer and direction, float32."""
    out = []
    for layer in range(module.num_layers):
        for suffix in ([""] + (["_reverse"] if module.bidirectional else [])):
            get = lambda n: getattr(module, f"{n}_l{layer}{suffix}").detach().float()  # noqa: E731
            out.append((get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh")))
    return out


def _run(cell, module, x, h0, c0, scales=None, gates=None, mm=None):
    """The network step by step: float32 when ``scales`` is None (recording max |x| and
    max |h| per pseudo-layer into a dict it returns), else the FP8 forward."""
    import torch
    dirs = 2 if module.bidirectional else 1
    params = _layers(module) if scales is None else scales["weights"]
    seen = {}
    layer_in = x
    hy, cy = [], []
    for layer in range(module.num_layers):
        outs = []
        for d in range(dirs):
            k = layer * dirs + d
            W, R, bW, bR = params[k]
            xs = layer_in if d == 0 else layer_in.flip(0)
            T, B, _ = xs.shape
            h, c = h0[k], (c0[k] if c0 is not None else h0[k])
            if scales is None:
                seen[k] = {"x": xs.abs().max(), "h": h.abs().max()}
                gx = (xs.reshape(T * B, -1) @ W.t() + bW).reshape(T, B, -1)
            else:
                s = scales["act"][k]
                xq = (xs.reshape(T * B, -1) / s["x"]).clamp(-E4M3_MAX, E4M3_MAX).to(
                    torch.float8_e4m3fn)
                gx = (mm(xq, W.t(), s["x"], scales["w"][k][0], out_dtype=torch.float32)
                      + bW).reshape(T, B, -1)
                hq = (h / s["h"]).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
            ys = []
            for t in range(T):
                if scales is None:
                    gh = h @ R.t() + bR
                    h, c, _ = _gates(cell)(gx[t], gh, c, h, 1.0)
                    seen[k]["h"] = torch.maximum(seen[k]["h"], h.abs().max())
                else:
                    gh = mm(hq, R.t(), s["h"], scales["w"][k][1], out_dtype=torch.float32) + bR
                    h, c, hq = gates(gx[t], gh, c, h, 1.0 / s["h"])
                ys.append(h)
            y = torch.stack(ys)
            outs.append(y if d == 0 else y.flip(0))
            hy.append(h)
            cy.append(c)
        layer_in = torch.cat(outs, dim=-1) if dirs == 2 else outs[0]
    return (layer_in, torch.stack(hy), torch.stack(cy)), seen


def _quantized(module, seen) -> dict:
    """E4M3 weights (per tensor) and the activation scales from the calibration run."""
    import torch
    weights, w_scales, act = [], [], []
    for k, (W, R, bW, bR) in enumerate(_layers(module)):
        sw = (W.abs().max() / E4M3_MAX).clamp(min=1e-12)
        sr = (R.abs().max() / E4M3_MAX).clamp(min=1e-12)
        weights.append(((W / sw).to(torch.float8_e4m3fn), (R / sr).to(torch.float8_e4m3fn),
                        bW, bR))
        w_scales.append((sw.reshape(()), sr.reshape(())))
        act.append({n: (v / E4M3_MAX).clamp(min=1e-12).reshape(()) for n, v in seen[k].items()})
    return {"weights": weights, "w": w_scales, "act": act}


@job
def time_torch_fp8(cell: str, seq: int, layers: int, hidden: int, batch: int, input_size: int,
                   bidirectional: bool, reps: int = 20, warmup: int = 3,
                   budget_s: float | None = 0.3) -> dict:
    """The FP8 peer at one shape: verified against float64, then its CUDA-graph replays
    timed (``ms``), or ``skipped`` with why (no PyTorch, no FP8 GEMMs, a failed capture)."""
    why = unavailable()
    if why:
        return {"skipped": why}
    import torch
    if torch.cuda.get_device_capability() < (8, 9):
        return {"skipped": "torch._scaled_mm's E4M3 GEMMs need compute capability 8.9+"}
    shape = (cell, seq, layers, hidden, batch, input_size, bidirectional)
    module, x, state = build(*shape, dtype="float32")
    h0, c0 = (state if isinstance(state, tuple) else (state, None))
    _, cal_x, cal_state = build(*shape, dtype="float32", seed=1)
    cal_h0, cal_c0 = (cal_state if isinstance(cal_state, tuple) else (cal_state, None))
    with torch.no_grad():
        _, seen = _run(cell, module, cal_x, cal_h0, cal_c0)
        scales = _quantized(module, seen)
        gates, compiled = compiled_gates(cell, lambda g: _run(cell, module, x, h0, c0, scales,
                                                              g, torch._scaled_mm))
        out = {}

        def step():
            out["y"] = _run(cell, module, x, h0, c0, scales, gates, torch._scaled_mm)[0]
        try:
            step()
            y, hy, cy = out["y"]
            err = errors(module, (x, state), (y, (hy, cy) if c0 is not None else hy),
                         training=False)
            worst = max(err.values())
            if not worst <= BOUND:
                return {"skipped": f"not verified: largest relative error {worst:.3g} > "
                                   f"bound {BOUND:g}", "errors": recorded(err)}
            replay = graph_of(step)
            captured = [t for t in out["y"] if t is not None]  # what each replay rewrites
            step()
            plain = [t for t in out["y"] if t is not None]
            replay()
            if not same(plain, captured):
                return {"skipped": "its replay's outputs differ from the plain call's: not "
                                   "timed", "errors": recorded(err)}
        except RuntimeError as exc:  # PyTorch's errors (a GEMM refused, a failed capture)
            return {"skipped": f"{type(exc).__name__}: {exc}"}
    t = time_step(replay, reps, warmup, budget_s)
    return dict(t, ms=t["median_ms"], errors=err, gates=compiled, timed_as="graph",
                torch=torch.__version__)


def fp8_job(cfg, reps: int) -> tuple[str, dict]:
    """(name, params) of :func:`time_torch_fp8` at ``cfg``'s shape, for a worker."""
    return name_of(time_torch_fp8), {
        "cell": cfg.mode.name, "seq": cfg.seq_length, "layers": cfg.num_layers,
        "hidden": cfg.hidden_size, "batch": cfg.mini_batch, "input_size": cfg.input_size,
        "bidirectional": cfg.bidirectional, "reps": reps}
