"""Type checks for JSON read back from disk (records, run.json files, reports' inputs).

A file this tool wrote may have been edited, truncated, or written by another program;
readers check its structure first, so that a wrong type becomes one line naming the
field instead of a traceback deep inside a report. A type is a small tree of checkers::

    RECORD = Obj({"id": STR, "shape": Obj({"hidden": POS_INT}), "notes": Opt(List(STR))},
                 required={"id", "shape"})
    problem(value, RECORD)   # None, or "shape.hidden: expected a positive integer, got 0"
"""
from __future__ import annotations

import math
import re


class Check:
    def __call__(self, value, where: str) -> str | None:  # pragma: no cover - interface
        raise NotImplementedError


class Pred(Check):
    """A leaf: ``test(value)`` must hold; ``what`` says what was expected."""

    def __init__(self, test, what: str):
        self.test, self.what = test, what

    def __call__(self, value, where):
        return None if self.test(value) else f"{where}: expected {self.what}, got {_show(value)}"


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v) -> bool:
    """A number a report can print: a finite float, or an integer a float can hold."""
    if _is_int(v):
        return abs(v) <= 1e300
    return isinstance(v, float) and math.isfinite(v)


STR = Pred(lambda v: isinstance(v, str), "a string")
BOOL = Pred(lambda v: isinstance(v, bool), "true or false")
INT = Pred(_is_int, "an integer")
NON_NEG_INT = Pred(lambda v: _is_int(v) and v >= 0, "an integer >= 0")
POS_INT = Pred(lambda v: _is_int(v) and v > 0, "a positive integer")
NUM = Pred(_is_num, "a finite number")
POS_NUM = Pred(lambda v: _is_num(v) and v > 0, "a positive, finite number")
NAME = Pred(lambda v: isinstance(v, str) and re.fullmatch(r"[A-Za-z0-9_]+", v) is not None,
            "a name such as FLOAT or NOT_SUPPORTED")
QUARTILES = Pred(lambda v: isinstance(v, list) and len(v) == 2 and all(map(POS_NUM.test, v))
                 and v[0] <= v[1], "[first quartile, third quartile], positive, in order")
ANY = Pred(lambda v: True, "anything")
SCALAR = Pred(lambda v: v is None or isinstance(v, (str, int, float, bool)),
              "a string, number, boolean or null")


class Opt(Check):
    """``inner`` or null."""

    def __init__(self, inner: Check):
        self.inner = inner

    def __call__(self, value, where):
        return None if value is None else self.inner(value, where)


class Either(Check):
    """One of ``choices`` (e.g. a timing, or why it was skipped); the problem said is the
    first choice's whose shape the value is closest to: the choice whose required fields
    it holds, else the last."""

    def __init__(self, *choices: Check):
        self.choices = choices

    def __call__(self, value, where):
        found = [c(value, where) for c in self.choices]
        if any(f is None for f in found):
            return None
        held = [f for c, f in zip(self.choices, found) if isinstance(value, dict)
                and getattr(c, "required", None) and c.required <= set(value)]
        return (held or found)[-1]


class List(Check):
    def __init__(self, item: Check):
        self.item = item

    def __call__(self, value, where):
        if not isinstance(value, list):
            return f"{where}: expected a list, got {_show(value)}"
        for i, v in enumerate(value):
            found = self.item(v, f"{where}[{i}]")
            if found:
                return found
        return None


class Dict(Check):
    """An object with any keys, every value of type ``value``."""

    def __init__(self, value: Check):
        self.value = value

    def __call__(self, data, where):
        if not isinstance(data, dict):
            return f"{where}: expected an object, got {_show(data)}"
        for k, v in data.items():
            found = self.value(v, f"{where}.{k}")
            if found:
                return found
        return None


class Obj(Check):
    """An object with these fields (others are allowed and ignored, unless ``closed``);
    ``required`` must be present. ``rule(data)`` may add a check across fields (returns a
    problem or None)."""

    def __init__(self, fields: dict, required=(), rule=None, closed: bool = False):
        self.fields, self.required, self.rule = fields, set(required), rule
        self.closed = closed

    def __call__(self, data, where):
        if not isinstance(data, dict):
            return f"{where}: expected an object, got {_show(data)}"
        for key in sorted(self.required - set(data)):
            return f"{where}: lacks {key!r}"
        if self.closed:
            for key in sorted(set(data) - set(self.fields)):
                return f"{where}: has an unknown key {_show(key)}"
        for key, check in self.fields.items():
            if key in data:
                found = check(data[key], f"{where}.{key}")
                if found:
                    return found
        return self.rule(data, where) if self.rule else None


def problem(value, check: Check, what: str) -> str | None:
    """What is wrong with ``value`` as ``check`` (None when nothing is); fields are named
    by their path, the whole value by ``what``."""
    found = check(value, "\0")
    if found is None:
        return None
    return found.replace("\0.", "", 1) if found.startswith("\0.") else found.replace("\0", what, 1)


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
