"""The character language model: embedding -> cuDNN RNN -> linear decoder -> softmax.

Saved as ``.npz`` with PyTorch's state_dict names (``embedding.weight``, ``rnn.weight_ih_l0``
..., ``decoder.weight``, ``decoder.bias``), so the shipped model is read by the same code
as a user's module (:mod:`.statedict`), plus ``meta``: a JSON string with the vocabulary,
the training command and log summary, the recorded held-out metrics and their provenance.

:func:`evaluate` is the task metric from logits: bits per character (the mean of
``-log2 p(next character)``) and top-1 accuracy; :func:`reference_logits` runs the network
in float64 with :func:`cudnn_rnn.check.reference.forward`, numpy or cupy.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cudnn_rnn.bindings.enums import RNNMode
from cudnn_rnn.charlm import corpus, statedict
from cudnn_rnn.charlm.files import read_weights
from cudnn_rnn.charlm.statedict import BadModel, RNNWeights
from cudnn_rnn.check import reference
from cudnn_rnn.engine import gpu

MODELS = Path(__file__).resolve().parent.parent / "data" / "charlm"
EVAL_SEQ, EVAL_BATCH = 256, 128  # the held-out batch: 128 stretches of 256 + 1 characters


@dataclass
class CharLM:
    rnn: RNNWeights
    embedding: np.ndarray  # (vocab, input_size)
    decoder_w: np.ndarray  # (vocab, proj * dirs)
    decoder_b: np.ndarray  # (vocab,)
    meta: dict = field(default_factory=dict)

    @property
    def vocab(self) -> int:
        return self.embedding.shape[0]

    def save(self, path) -> None:
        state = statedict.to_state(self.rnn, "rnn.")
        state.update({"embedding.weight": self.embedding.astype(np.float32),
                      "decoder.weight": self.decoder_w.astype(np.float32),
                      "decoder.bias": self.decoder_b.astype(np.float32),
                      "meta": np.array(json.dumps(self.meta, sort_keys=True))})
        np.savez(path, **state)


def load(path) -> CharLM:
    """A model saved by :meth:`CharLM.save`; :class:`BadModel` if ``path`` is not one."""
    path = Path(path)
    if path.suffix != ".npz":
        raise BadModel(f"{path}: a character model is an .npz saved by cudnn_rnn.train")
    state = read_weights(path, keep=("meta",))
    try:
        meta = json.loads(str(state.pop("meta")))
    except (KeyError, ValueError):
        raise BadModel(f"{path}: has no readable 'meta' entry; not a model saved by "
                       f"cudnn_rnn.train") from None
    rnn = statedict.from_state(state, str(path), prefix="rnn.")
    try:
        emb, dw, db = (state[k] for k in ("embedding.weight", "decoder.weight", "decoder.bias"))
    except KeyError as exc:
        raise BadModel(f"{path}: has no {exc.args[0]!r}") from None
    out = rnn.proj * (2 if rnn.bidirectional else 1)
    if emb.shape[1:] != (rnn.input_size,) or dw.shape != (emb.shape[0], out) or \
            db.shape != (emb.shape[0],):
        raise BadModel(f"{path}: embedding {emb.shape}, decoder {dw.shape} and {db.shape} do "
                       f"not fit an RNN of input {rnn.input_size} and output {out}")
    return CharLM(rnn, emb.astype(np.float64), dw.astype(np.float64), db.astype(np.float64), meta)


def shipped(cell: str = "lstm") -> Path:
    return MODELS / f"{cell}.npz"


def slice_codes(name: str) -> np.ndarray:
    """The codes of a shipped text slice (``heldout`` or ``calibration``)."""
    return corpus.encode((MODELS / f"{name}.txt").read_text(encoding="utf-8"))


# ---------------------------------------------------------------------------- the metric
def log_softmax(logits, xp=np):
    m = logits.max(axis=-1, keepdims=True)
    z = logits - m
    return z - xp.log(xp.exp(z).sum(axis=-1, keepdims=True))


def evaluate(logits, targets) -> dict:
    """``bpc`` and ``top1`` of (N, vocab) logits against (N,) target codes, and the number
    of predictions; float64 throughout."""
    xp = reference.array_module(logits)
    with gpu.plain_reductions(xp):  # quick to compile (numpy: nothing to change)
        logits = xp.asarray(logits, dtype=xp.float64).reshape(-1, logits.shape[-1])
        targets = xp.asarray(targets).reshape(-1).astype(xp.int64)
        lp = log_softmax(logits, xp)
        nll = -lp[xp.arange(targets.size), targets]
        return {"bpc": float(nll.mean() / np.log(2.0)),
                "top1": float((logits.argmax(axis=-1) == targets).mean()),
                "predictions": int(targets.size)}


def embed(model: CharLM, codes, xp=np):
    """(T, B) codes -> (T, B, input_size) float64 inputs."""
    return xp.asarray(model.embedding)[xp.asarray(codes).astype(xp.int64)]


def decode(model: CharLM, y, xp=np):
    """(T, B, features) RNN outputs -> (T, B, vocab) float64 logits."""
    y = xp.asarray(y, dtype=xp.float64)
    return y @ xp.asarray(model.decoder_w).T + xp.asarray(model.decoder_b)


def zero_state(cfg, xp=np):
    return xp.zeros(cfg.h_shape()), (xp.zeros(cfg.c_shape()) if cfg.mode == RNNMode.LSTM else None)


def device_params(rnn: RNNWeights, xp) -> list:
    """The module's LayerParams as ``xp`` arrays."""
    return [reference.LayerParams(*[[None if a is None else xp.asarray(a) for a in part]
                                    for part in (p.W, p.R, p.bW, p.bR)],
                                  None if p.P is None else xp.asarray(p.P))
            for p in rnn.params]


def reference_outputs(rnn: RNNWeights, x, xp=np, chunk: int = 32, hx=None, cx=None,
                      lengths=None) -> dict:
    """float64 y, hy, cy of the module on (T, B, input) ``x`` from the state ``hx``, ``cx``
    ((layers x dirs, B, features); a zero state where None), ``chunk`` sequences at a time
    (the reference keeps every step for its backward pass); ``lengths`` (B,): each
    sequence's own length (None: all T; see :func:`cudnn_rnn.check.reference.forward`)."""
    T, B = x.shape[:2]
    params = device_params(rnn, xp)
    parts = []
    for b in range(0, B, chunk):
        part = xp.asarray(x[:, b:b + chunk], dtype=xp.float64)
        cfg = rnn.config(T, part.shape[1])
        h0, c0 = zero_state(cfg, xp)
        if hx is not None:
            h0 = xp.asarray(hx[:, b:b + chunk], dtype=xp.float64)
        if cx is not None and c0 is not None:
            c0 = xp.asarray(cx[:, b:b + chunk], dtype=xp.float64)
        mine = None if lengths is None else np.asarray(lengths)[b:b + chunk]
        f = reference.forward(cfg, params, part, h0, c0, mine)
        parts.append((f.y, f.hy, f.cy))
    y, hy = (xp.concatenate([p[i] for p in parts], axis=1) for i in (0, 1))
    cy = None if parts[0][2] is None else xp.concatenate([p[2] for p in parts], axis=1)
    return {"y": y, "hy": hy, "cy": cy}


def reference_logits(model: CharLM, codes, xp=np, chunk: int = 32):
    """float64 logits of the network on (T, B) codes from a zero state."""
    y = reference_outputs(model.rnn, embed(model, codes, xp), xp, chunk)["y"]
    return decode(model, y, xp)
