"""The 8-bit engines' candidates by name: a precision, or an 8-bit format on a part of the
GEMMs, run by the GEMM engine or the persistent kernel; their error bounds and families.

A :class:`Config` is a float precision alone (fp32, tf32, fp16, bf16: the control, which
shows what an engine itself costs against cuDNN), or an 8-bit format (INT8, FP8 E4M3) on a
part of the GEMMs (``input``, ``recurrent`` or ``both``) with the other GEMMs in
:data:`REST`; its ``engine`` is "gemm" (:mod:`cudnn_rnn.lowbit.engine`) or "persistent"
(:mod:`cudnn_rnn.lowbit.persistent`, which multiplies on tensor cores only: no fp32, tf32).
"""
from __future__ import annotations

from dataclasses import dataclass

from cudnn_rnn.lowbit import model

REST = "fp16"  # the precision of an 8-bit candidate's GEMMs that are not 8-bit
# relative error bounds per precision (of the 8-bit part, for an 8-bit candidate): 3-5x
# the largest the float64 host model of the same arithmetic gives on the CPU test grid
# (INT8 1.9e-2, E4M3 5.6e-2 at T 20, L 2, H 64, B 16); FP16/BF16/TF32 as cuDNN's.
BOUNDS = {"fp32": 1e-5, "tf32": 5e-3, "fp16": 5e-3, "bf16": 3e-2, "int8": 6e-2, "e4m3": 1.5e-1}
# an 8-bit candidate against its float64 twin (the same quantized network): the FP16 GEMMs
# beside the 8-bit ones, FP32 sums, and the 8-bit codes a last-bit difference moves across a
# rounding boundary, which E4M3's coarse grid (steps of 1/8 to 1/16 of a value) makes
# larger. About 3x the largest seen on the H200 for the shipped LSTM (INT8 4.4e-3, E4M3
# 2.7e-2, both GEMMs); a wrong scale, layout or kernel is off by O(1).
TWIN_BOUNDS = {"int8": 1.5e-2, "e4m3": 8e-2}
OUTPUTS = ("y", "hy", "cy")
ENGINES = {"gemm": "cuBLASLt GEMMs", "persistent": "persistent kernel"}
ENGINE_NAMES = {"gemm": "cuBLASLt", "persistent": "persistent"}  # a record's "engine"


@dataclass(frozen=True)
class Config:
    """One candidate: ``precision`` for every GEMM, or ``fmt`` on ``parts`` and
    :data:`REST` elsewhere; run by ``engine``: "gemm" (cuBLASLt GEMMs and a gate kernel
    per step, :mod:`cudnn_rnn.lowbit.engine`) or "persistent" (the whole sequence in one
    launch, :mod:`cudnn_rnn.lowbit.persistent`)."""
    precision: str = REST
    fmt: str | None = None
    parts: str | None = None
    engine: str = "gemm"

    @property
    def name(self) -> str:
        """e.g. ``fp16``, ``int8/both``, ``e4m3/input``, ``persistent:int8/both``."""
        base = self.precision if self.fmt is None else f"{self.fmt}/{self.parts}"
        return base if self.engine == "gemm" else f"{self.engine}:{base}"

    @property
    def bound(self) -> float:
        return BOUNDS[self.fmt or self.precision]

    def label(self) -> str:
        """How tables show it: ``cuBLASLt GEMMs int8/both (+fp16)``, ``persistent kernel
        fp16``."""
        base = self.precision if self.fmt is None else f"{self.fmt}/{self.parts}"
        rest = "" if self.fmt is None or self.parts == "both" else f" (+{self.precision})"
        return f"{ENGINES[self.engine]} {base}{rest}"


CONTROLS = tuple(Config(p) for p in ("fp32", "tf32", "fp16", "bf16"))
GEMM_8BIT = tuple(Config(REST, f, p) for f in model.FORMATS for p in model.PARTS)
# the persistent kernel multiplies on tensor cores only: FP16 and BF16, and the 8-bit plans
PERSISTENT = tuple(Config(p, engine="persistent") for p in ("fp16", "bf16")) + tuple(
    Config(REST, f, p, "persistent") for f in model.FORMATS for p in model.PARTS)
ALL = CONTROLS + GEMM_8BIT + PERSISTENT
FAMILIES = {"fp32": CONTROLS[:1], "tf32": CONTROLS[1:2], "fp16": CONTROLS[2:3] + PERSISTENT[:1],
            "bf16": CONTROLS[3:] + PERSISTENT[1:2], "int8": GEMM_8BIT[:3] + PERSISTENT[2:5],
            "fp8": GEMM_8BIT[3:] + PERSISTENT[5:], "any": ALL}


def parse(name: str) -> Config:
    """The :class:`Config` named ``name`` (as :attr:`Config.name` writes it)."""
    for c in ALL:
        if c.name == name:
            return c
    raise ValueError(f"no engine configuration named {name!r} "
                     f"(choose from {', '.join(c.name for c in ALL)})")
