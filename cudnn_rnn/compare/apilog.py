"""Reading cuDNN's own API log: which calls another program made, with which arguments.

With ``CUDNN_LOGLEVEL_DBG=3`` (and ``CUDNN_LOGDEST_DBG=<file>``) cuDNN 9 writes every API
call as a block::

    I! CuDNN (v91900 56) function cudnnRNNForward() called:
    i!     rnnDesc: type=cudnnRNNDescriptor_t:
    i!         algo: type=cudnnRNNAlgo_t; val=CUDNN_RNN_ALGO_STANDARD (0);
    ...

This is how the overhead check learns the configuration PyTorch really uses (its
algorithm, data type, math precision, math type, layout and forward mode), instead of
reimplementing PyTorch's heuristics. Enumerated values are read by their number in
parentheses, so a renamed constant cannot be misread.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from cudnn_rnn.bindings.enums import (DataType, DirectionMode, ForwardMode, MathType, RNNAlgo,
                            RNNBiasMode, RNNDataLayout, RNNInputMode, RNNMode)

_HEADER = re.compile(r"^I! CuDNN \(v(\d+)[^)]*\) function (\w+)\(\) called:")
_FIELD = re.compile(r"^i!( +)(\w+): type=([\w ]+?)(?:; val=(.*?);?)?:?$")
_POINTER = re.compile(r"^i!( +)(\w+): location=(\w+); addr=([^;]+);?$")  # a device pointer


@dataclass
class Call:
    """One logged API call: its name, the cuDNN version that logged it, and its fields by
    dotted path (``rnnDesc.algo``), each value as cuDNN printed it."""
    name: str
    version: int
    fields: dict = field(default_factory=dict)

    def enum(self, path: str) -> int | None:
        """The number of an enumerated field (``CUDNN_LSTM (2)`` → 2)."""
        m = re.search(r"\((-?\d+)\)\s*$", self.fields.get(path, ""))
        return int(m.group(1)) if m else None

    def int(self, path: str) -> int | None:
        value = self.fields.get(path)
        return int(value) if value is not None and re.fullmatch(r"-?\d+", value) else None

    def ints(self, path: str) -> list[int] | None:
        value = self.fields.get(path)
        if value is None or not value.startswith("["):
            return None
        return [int(v) for v in value.strip("[]").split(",") if v.strip()]


def parse(text: str, only: tuple | None = None) -> list[Call]:
    """Every call block in a log, in order (only the calls named in ``only``, if given)."""
    calls: list[Call] = []
    stack: list[tuple[int, str]] = []  # (indent, name) of the enclosing fields
    current: Call | None = None
    for line in text.splitlines():
        head = _HEADER.match(line) if line.startswith("I! ") else None
        if head:
            current = None
            if only is None or head.group(2) in only:
                current = Call(head.group(2), int(head.group(1)))
                calls.append(current)
            stack = []
            continue
        if current is None:
            continue
        m = _FIELD.match(line.rstrip())
        if not m:
            p = _POINTER.match(line.rstrip())
            if p:
                path = ".".join([n for i, n in stack if i < len(p.group(1))] + [p.group(2)])
                current.fields.setdefault(path, p.group(4).strip())
            continue
        indent, name, value = len(m.group(1)), m.group(2), m.group(4)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = ".".join([n for _i, n in stack] + [name])
        if value is None:
            stack.append((indent, name))  # a structure: its members follow, indented
        else:
            current.fields.setdefault(path, value.strip())
    return calls


def rnn_forward_settings(calls: list[Call]) -> dict | None:
    """The configuration of the last ``cudnnRNNForward`` in the log, as enum members and
    sizes; None when the log has no such call."""
    fwd = next((c for c in reversed(calls) if c.name == "cudnnRNNForward"), None)
    if fwd is None:
        return None
    r = "rnnDesc."
    enums = {"algo": RNNAlgo, "cellMode": RNNMode, "biasMode": RNNBiasMode,
             "inputMode": RNNInputMode, "bidirectional": DirectionMode, "dataType": DataType,
             "mathPrec": DataType, "mathMode": MathType}
    out = {"cudnn_version": fwd.version}
    for key, enum in enums.items():
        number = fwd.enum(r + key)
        out[key] = enum(number) if number is not None else None
    for key in ("inputSize", "hiddenSize", "projSize", "numLayers"):
        out[key] = fwd.int(r + key)
    aux = re.search(r"\((0x[0-9a-fA-F]+|\d+)\)", fwd.fields.get(r + "auxFlags", ""))
    out["auxFlags"] = int(aux.group(1), 0) if aux else None
    mode = fwd.enum("fwdMode")
    out["fwdMode"] = ForwardMode(mode) if mode is not None else None
    layout = fwd.enum("xDesc.layout")
    out["layout"] = RNNDataLayout(layout) if layout is not None else None
    out["xDims"] = fwd.ints("xDesc.dimA")
    seq = fwd.fields.get("devSeqLengths")
    out["devSeqLengths"] = None if seq is None else ("NULL" if seq == "NULL_PTR" else "device")
    for key in ("workSpaceSize", "reserveSpaceSize", "weightSpaceSize"):
        out[key] = fwd.int(key)
    return out
