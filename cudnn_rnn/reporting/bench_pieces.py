"""Pieces of the benchmark report's text (:mod:`.bench_markdown` and its sections): a
percentage, a span of figures, a time with its spread, a markdown table's row and header,
a shape's name."""
from __future__ import annotations


def pct(v) -> str:
    """A share as a whole percentage (empty where there is none)."""
    return "" if v is None else f"{100 * v:.0f}%"


def paren(text: str) -> str:
    """`` (text)``, or nothing for no text."""
    return f" ({text})" if text else ""


def span(values, fmt) -> str:
    """The range of the figures in ``values`` as ``fmt`` writes them: one figure where both
    ends read the same, ``not measured`` where there is none."""
    values = [v for v in values if v is not None]
    if not values:
        return "not measured"
    lo, hi = min(values), max(values)
    return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)}–{fmt(hi)}"


def timed(c: dict | None) -> str:
    """A candidate's time as the reports write it: median ms with its interquartile range
    and repeats, ``0.1958 (0.1956-0.1960, n=20)``; empty where it was not timed."""
    if not c or not c.get("timing"):
        return ""
    t = c["timing"]
    return f"{t['median_ms']:.4f} ({t['q1_ms']:.4f}-{t['q3_ms']:.4f}, n={t['reps']})"


def two_decimals(v: float) -> str:
    return f"{v:.2f}"


def met(flag) -> str:
    return "met" if flag else "not met"


def row(cells: list) -> str:
    """A markdown table row of ``cells`` as ``str`` writes them (an empty cell is two
    spaces between its bars)."""
    return "| " + " | ".join(map(str, cells)) + " |"


def header(titles: list[str]) -> list[str]:
    return [row(titles), "|" + "---|" * len(titles)]


def shape_name(s: dict) -> str:
    """A bench shape as the tables name it: ``LSTM 20, 2, 512, 64`` (cell T, L, H, B)."""
    return f"{s['cell']} {s['seq_length']}, {s['layers']}, {s['hidden']}, {s['batch']}"
