"""NVIDIA's published RNN_example checksums, and the reference's own version of them.

Source: NVIDIA cuDNN samples, ``RNN_v8.0/readme.txt`` (golden_1.txt … golden_4.txt),
computed by NVIDIA on an M40 in FP32 for ``-seqLength20 -numLayers2 -inputSize512
-hiddenSize512 -projSize512 -miniBatch64 -inputMode1 -dirMode0 -biasMode3
-algorithm0 -mathPrecision1 -mathType0`` with ``-cellMode0..3``. The sample's
``compare.py`` accepts a relative difference of 1e-3.
"""
from __future__ import annotations

import numpy as np

from cudnn_rnn.bindings.enums import RNNMode

from cudnn_rnn.check import reference
from cudnn_rnn.engine.config import RNNConfig

SAMPLE_GOLDEN = {
    RNNMode.RNN_RELU: {"y": 1.315793e06, "hy": 1.315212e05, "dx": 6.676003e01,
                       "dhx": 6.425050e01, "dw": 1.453750e09},
    RNNMode.RNN_TANH: {"y": 6.319591e05, "hy": 6.319605e04, "dx": 4.501830e00,
                       "dhx": 4.489543e00, "dw": 5.012598e07},
    RNNMode.LSTM: {"y": 5.749536e05, "cy": 4.365091e05, "hy": 5.774818e04, "dx": 3.842206e02,
                   "dcx": 9.323785e03, "dhx": 1.182562e01, "dw": 4.313461e08},
    RNNMode.GRU: {"y": 6.358978e05, "hy": 6.281680e04, "dx": 6.296622e00,
                  "dhx": 2.289960e05, "dw": 5.397419e07},
}
GOLDEN_RTOL = 1e-3


def sample_params(cfg: RNNConfig) -> list:
    """The sample's weights: every matrix 1/(its element count), every bias 1.0."""
    params = reference.random_params(cfg, np.random.default_rng(0))
    for p in params:
        for group in (p.W, p.R):
            for a in group:
                if a is not None:
                    a[...] = 1.0 / a.size
        if p.P is not None:
            p.P[...] = 1.0 / p.P.size
        for group in (p.bW, p.bR):
            for a in group:
                if a is not None:
                    a[...] = 1.0
    return params


def sample_checksums(cfg: RNNConfig) -> dict:
    """The checksums the sample prints, computed by the float64 reference."""
    params = sample_params(cfg)
    ones = np.ones
    fwd = reference.forward(cfg, params, ones(cfg.x_shape()), ones(cfg.h_shape()),
                            ones(cfg.c_shape()))
    grads = reference.backward(cfg, params, fwd, ones(cfg.y_shape()), ones(cfg.h_shape()),
                               ones(cfg.c_shape()))
    out = {"y": fwd.y.sum(), "hy": fwd.hy.sum(), "dx": grads.dx.sum(), "dhx": grads.dhx.sum(),
           "dw": sum(a.sum() for a in reference.flat_params(grads.dparams))}
    if fwd.cy is not None:
        out.update(cy=fwd.cy.sum(), dcx=grads.dcx.sum())
    return {k: float(v) for k, v in out.items()}
