"""Training the character model on the GPU through cuDNN's own training calls.

One :class:`~cudnn_rnn.engine.flow.RNNFlow` (FLOAT data and math, STANDARD algorithm) is
walked to its ``weights`` stage, which sizes and allocates everything and draws the
initial weights (U(-1/sqrt(H), 1/sqrt(H)), PyTorch's default too). Then, per step, on the
flow's stream:

1. a batch of ``seq + 1``-character stretches at random offsets of the training text;
2. the embedding rows of the inputs into the flow's ``x``;
3. ``cudnnRNNForward`` (TRAINING), the decoder and softmax cross-entropy on cupy, and the
   loss's gradient with respect to ``y`` into ``dy`` (``dhy``, ``dcy`` stay 0);
4. ``cudnnRNNBackwardData_v8`` (``dx`` feeds the embedding's gradient) and
   ``cudnnRNNBackwardWeights_v8`` into a zeroed ``dw``;
5. the gradients clipped to a global norm, then Adam on the weight space, embedding and
   decoder, with a cosine learning-rate decay.

cuDNN's weight space is one buffer, so Adam runs on all RNN weights at once (gaps between
entries, if any, have zero gradient and stay as drawn).
"""
from __future__ import annotations

import math
import time

import numpy as np

from cudnn_rnn.bindings.enums import ForwardMode, MathType, RNNMode
from cudnn_rnn.charlm import network
from cudnn_rnn.charlm.statedict import RNNWeights
from cudnn_rnn.check import reference
from cudnn_rnn.engine import readback
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.engine.flow import RNNFlow
from cudnn_rnn.engine.gpu import cupy_or_raise

ADAM = dict(beta1=0.9, beta2=0.999, eps=1e-8)
_ADAM_SRC = """
    m = b1 * m + (1 - b1) * g;
    v = b2 * v + (1 - b2) * g * g;
    p -= lr * (m / c1) / (sqrt(v / c2) + eps);
"""


class TrainingFailed(RuntimeError):
    """A cuDNN stage or call failed while training; the message has the call and status."""


def _adam_kernel(cp):
    return cp.ElementwiseKernel(
        "float32 g, float32 lr, float32 b1, float32 b2, float32 c1, float32 c2, float32 eps",
        "float32 p, float32 m, float32 v", _ADAM_SRC, "cudnn_rnn_adam")


def config(mode: RNNMode, layers: int, hidden: int, embed: int, seq: int, batch: int) -> RNNConfig:
    """The training flow's configuration (FLOAT, FMA math: true FP32)."""
    return RNNConfig(seq_length=seq, mini_batch=batch, num_layers=layers, hidden_size=hidden,
                     input_size=embed, mode=mode, math_type=MathType.FMA_MATH)


def train(mode: RNNMode, train_codes: np.ndarray, *, layers: int, hidden: int, embed: int,
          vocab: int, seq: int, batch: int, steps: int, lr: float, clip: float, seed: int,
          log=print, log_every: int = 100) -> tuple[network.CharLM, list]:
    """A trained :class:`~cudnn_rnn.charlm.network.CharLM` and the log rows (step, mean
    loss in bits per character over the rows since the last, learning rate, seconds)."""
    cp = cupy_or_raise()
    cfg = config(mode, layers, hidden, embed, seq, batch)
    with RNNFlow(cfg, init="random", seed=seed) as flow:
        result = flow.run(until="weights")
        if result.failure is not None:
            f = result.failure
            raise TrainingFailed(f"{f.call} -> {f.status} ({f.reason}) at stage {f.stage}")
        rows, outer = _loop(cp, flow, cfg, train_codes, vocab=vocab, steps=steps, lr=lr,
                            clip=clip, seed=seed, log=log, log_every=log_every)
        arrays = readback.weight_arrays(flow, "w")
    params = reference.params_from_arrays(cfg, arrays)
    rnn = RNNWeights(mode, layers, hidden, embed, hidden, False, params)
    emb, dw, db = (a.get().astype(np.float64) for a in outer)
    return network.CharLM(rnn, emb, dw, db), rows


def _loop(cp, flow, cfg, train_codes, *, vocab, steps, lr, clip, seed, log, log_every):
    """The steps; (log rows, (embedding, decoder weight, decoder bias) on the GPU)."""
    import cupyx  # here: this module is imported without a GPU; cupyx comes with cupy

    T, B, E, H = cfg.seq_length, cfg.mini_batch, cfg.input_size, cfg.hidden_size
    space = flow.sizes["weight_space"]
    adam = _adam_kernel(cp)
    with flow.stream:
        rng = cp.random.default_rng(seed + 7)
        text = cp.asarray(train_codes)
        w = flow.buf["w"][:space].view(cp.float32)
        dw = flow.buf["dw"][:space].view(cp.float32)
        for name in ("hx", "cx", "dhy", "dcy"):
            if name in flow.buf:
                flow.buf[name].fill(0)
        x = flow.buf["x"].view(cp.float32).reshape(T, B, E)
        y = flow.buf["y"].view(cp.float32).reshape(T * B, H)
        dy = flow.buf["dy"].view(cp.float32).reshape(T * B, H)
        dx = flow.buf["dx"].view(cp.float32).reshape(T * B, E)
        emb = (rng.standard_normal((vocab, E), dtype=cp.float32) * 0.1).astype(cp.float32)
        bound = 1.0 / math.sqrt(H)
        dec_w = (rng.random((vocab, H), dtype=cp.float32) * 2 - 1) * bound
        dec_b = cp.zeros(vocab, dtype=cp.float32)
        params = [w, emb, dec_w, dec_b]
        moments = [(cp.zeros_like(p), cp.zeros_like(p)) for p in params]
        steps_t = cp.arange(T + 1)[:, None]
        loss_sum = cp.zeros((), dtype=cp.float64)
        rows, started, since = [], time.monotonic(), 0
        for step in range(1, steps + 1):
            starts = rng.integers(0, text.size - T - 1, size=B)
            chunk = text[starts[None, :] + steps_t].astype(cp.int64)
            inputs, targets = chunk[:-1].ravel(), chunk[1:].ravel()
            x[...] = emb[inputs].reshape(T, B, E)
            flow.forward(ForwardMode.TRAINING)
            logits = y @ dec_w.T + dec_b
            logits -= logits.max(axis=1, keepdims=True)
            p = cp.exp(logits)
            p /= p.sum(axis=1, keepdims=True)
            picked = p[cp.arange(T * B), targets]
            loss_sum += -cp.log(cp.maximum(picked, 1e-30)).astype(cp.float64).sum()
            p[cp.arange(T * B), targets] -= 1
            p /= T * B  # d(mean cross-entropy)/d(logits)
            grads_dec = (p.T @ y, p.sum(axis=0))
            dy[...] = p @ dec_w
            flow.backward_data()
            dw.fill(0)
            flow.backward_weights()
            d_emb = cp.zeros_like(emb)
            cupyx.scatter_add(d_emb, inputs, dx)
            grads = [dw, d_emb, *grads_dec]
            norm = cp.sqrt(sum((g.astype(cp.float64) ** 2).sum() for g in grads))
            shrink = cp.minimum(1.0, clip / (norm + 1e-12)).astype(cp.float32)
            rate = lr * 0.5 * (1 + math.cos(math.pi * (step - 1) / steps))
            c1, c2 = 1 - ADAM["beta1"] ** step, 1 - ADAM["beta2"] ** step
            for prm, g, (m, v) in zip(params, grads, moments):
                adam(g * shrink, np.float32(rate), np.float32(ADAM["beta1"]),
                     np.float32(ADAM["beta2"]), np.float32(c1), np.float32(c2),
                     np.float32(ADAM["eps"]), prm, m, v)
            since += 1
            if step % log_every == 0 or step == steps:
                bits = float(loss_sum.get()) / (since * T * B) / math.log(2)
                row = {"step": step, "train_bpc": round(bits, 5), "lr": round(rate, 7),
                       "grad_norm": round(float(norm.get()), 4),
                       "seconds": round(time.monotonic() - started, 2)}
                if not math.isfinite(bits):
                    raise TrainingFailed(f"the loss is {bits} at step {step}")
                rows.append(row)
                log(row)
                loss_sum.fill(0)
                since = 0
        flow.stream.synchronize()
    return rows, (emb, dec_w, dec_b)
