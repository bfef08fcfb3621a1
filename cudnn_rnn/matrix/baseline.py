"""The FP32 baseline: the one configuration every speed-up is measured against.

True FP32 (FLOAT data, FLOAT math precision, FMA math: no TF32 on Ampere and later) with
the STANDARD algorithm, at the same cell mode, shape and axes as the configuration it is
the baseline of, and timed in the same run. This module is its only definition.
"""
from __future__ import annotations

from cudnn_rnn.bindings.enums import DataType, MathType, RNNAlgo
from cudnn_rnn.engine.config import RNNConfig

AXES = ("data_type", "math_prec", "math_type", "algo")  # what the baseline fixes
BASELINE = (DataType.FLOAT, DataType.FLOAT, MathType.FMA_MATH, RNNAlgo.STANDARD)
NAMES = tuple(m.short if isinstance(m, MathType) else m.name for m in BASELINE)
LABEL = "/".join(NAMES)  # FLOAT/FLOAT/FMA/STANDARD, as :func:`record.config_label` writes it


def of(c: RNNConfig) -> RNNConfig:
    """The baseline configuration of ``c``."""
    return c.replace(**dict(zip(AXES, BASELINE)))


def is_baseline(rec: dict) -> bool:
    """Whether a record (its JSON form) is a baseline configuration."""
    return tuple(rec[a] for a in AXES) == NAMES


def id_of(cell_id: str) -> str:
    """The id of the baseline of the cell with id ``cell_id`` (the first four fields of a
    cell id are :data:`AXES`, see :func:`cudnn_rnn.matrix.cells.cell_id`)."""
    return "/".join(NAMES + tuple(cell_id.split("/")[len(NAMES):]))
