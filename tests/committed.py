"""Comparing a committed report with the one its renderer makes now.

The markdown and the HTML compare as text. Two parts are set aside, each for a stated reason:

* a chart's drawing (the inline ``<svg>`` of a page; the PNG beside a markdown is a file of
  its own): its bytes are matplotlib's and change with its version, so a page compares with
  its chart replaced by ``[chart]``, and the chart by its words (:func:`chart_words`: the
  labels and notes it draws, not its axis numbers, which a version may place elsewhere);
* without matplotlib a report says in one line that its chart was left out where it would
  link or carry it: the committed markdown's image line compares as that line then.

A matrix report also names the command, commit and date that rendered it
(:func:`without_report_rows`): those say when, not what.
"""
from __future__ import annotations

import re
import struct
from html import escape

from cudnn_rnn.reporting import charts

IMAGE_LINE = re.compile(r"^!\[[^\]]*\]\([^)\s]+\.png\)$", re.M)
SVG = re.compile(r"(<figure>)?<svg .*?</svg>\s*(</figure>)?", re.S)
TEXT = re.compile(r"<text[^>]*>([^<]*)</text>")
AXIS_NUMBER = re.compile(r"[\d.,\u2212\-x%]+")
REPORT_ROWS = re.compile(r"^\| report (command|commit|date) .*$|<tr><td>report (command|commit|"
                         r"date)</td>.*?</tr>", re.M)


def markdown_as_here(committed: str) -> str:
    """The committed markdown as this environment renders it: with its image lines, or,
    without matplotlib, the line saying the chart was left out in their place."""
    return committed if charts.available() else IMAGE_LINE.sub(charts.LEFT_OUT, committed)


def page_without_chart(page: str) -> str:
    out = SVG.sub("[chart]", page)
    for left_out in (f"<p>{escape(charts.LEFT_OUT)}</p>",
                     f"<p>{escape(charts.LEFT_OUT, quote=False)}</p>"):
        out = out.replace(left_out, "[chart]")
    return out


def chart_words(page: str) -> list[str]:
    """The words the page's charts draw: titles, labels, legend entries and notes at the
    bars (matplotlib writes them as SVG text), axis numbers left out."""
    return [t for svg in SVG.finditer(page) for t in TEXT.findall(svg.group(0))
            if not AXIS_NUMBER.fullmatch(t.strip())]


def without_report_rows(text: str) -> str:
    return REPORT_ROWS.sub("[report row]", text)


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])
