"""The training command on a GPU (marker ``gpu``): cuDNN's backward calls train a real model."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cudnn_rnn.charlm import corpus, network

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_a_few_hundred_steps_lower_the_loss(cuda, tmp_path, cell):
    out = tmp_path / "models"
    proc = subprocess.run([sys.executable, "-m", "cudnn_rnn.train", "--out", str(out),
                           "--cell", cell, "--steps", "300",
                           "--log-every", "50"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = [json.loads(line) for line in (out / f"{cell}-training.log").read_text().splitlines()]
    steps = [r for r in rows if "step" in r]
    assert [r["step"] for r in steps] == list(range(50, 301, 50))
    first, last = steps[0]["train_bpc"], steps[-1]["train_bpc"]
    # uniform guessing over the vocabulary costs log2(98) = 6.6 bits; 300 steps of a small
    # model reach about 2.5-3 bits on code; a third lower than the first 50 steps' mean is
    # far from noise
    assert last < 0.67 * first and last < 4.0, steps
    model = network.load(out / f"{cell}.npz")
    held = model.meta["heldout"]
    assert held["predictions"] == network.EVAL_SEQ * network.EVAL_BATCH
    assert 0 < held["bpc"] < 4.5 and held["top1"] > 0.2
    # the recorded figure is what the float64 reference gives for the saved weights
    inputs, targets = corpus.batch(corpus.encode((out / "heldout.txt").read_text()),
                                   network.EVAL_SEQ, network.EVAL_BATCH)
    again = network.evaluate(network.reference_logits(model, inputs, cuda), cuda.asarray(targets))
    assert again["bpc"] == pytest.approx(held["bpc"], rel=1e-12)
    assert math.isclose(again["top1"], held["top1"])
    assert model.rnn.hidden == 256 and model.vocab == len(corpus.VOCAB)
    assert np.isfinite(model.embedding).all()
