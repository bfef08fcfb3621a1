"""The markdown the reports write, as HTML: so a page carries every section its markdown does.

Only what :mod:`.markdown` and its helpers write is understood: ``#``-``###`` headings,
paragraphs, ``- `` lists, GitHub pipe tables (tabulate's ``github`` format), a chart's
line ``![what it shows](file.png)`` (replaced by the page's inline copy of that chart), and
inline ```code```, ``**bold**`` and ``*emphasis*``. Everything is escaped first.
"""
from __future__ import annotations

import re
from html import escape

INLINE = ((re.compile(r"`([^`]+)`"), r"<code>\1</code>"),
          (re.compile(r"\*\*(.+?)\*\*"), r"<b>\1</b>"),
          (re.compile(r"(?<![*\w])\*(?!\s)([^*]+?)\*(?![*\w])"), r"<i>\1</i>"))
IMAGE = re.compile(r"^!\[(?P<alt>[^\]]*)\]\((?P<file>[^)\s]+)\)$")
SEPARATOR = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?$")


def inline(text: str) -> str:
    """One line of markdown text as escaped HTML with its code, bold and emphasis."""
    out = escape(text, quote=False)
    for pattern, repl in INLINE:
        out = pattern.sub(repl, out)
    return out


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def table(lines: list[str]) -> str:
    """A pipe table (header, separator, rows) as an HTML table."""
    head = "".join(f"<th>{inline(c)}</th>" for c in _cells(lines[0]))
    body = "".join("<tr>" + "".join(f"<td>{inline(c)}</td>" for c in _cells(line)) + "</tr>"
                   for line in lines[2:])
    return f"<table><tr>{head}</tr>{body}</table>"


def blocks(text: str) -> list[tuple[str, list[str]]]:
    """The markdown's blocks in order: (kind, lines), kind one of heading, table, list, para."""
    out: list = []
    for line in text.splitlines():
        kind = ("blank" if not line.strip() else "heading" if re.match(r"#{1,6} ", line)
                else "table" if line.lstrip().startswith("|") else "list"
                if line.startswith("- ") else "para")
        if kind == "blank":
            out.append(("blank", []))
        elif out and out[-1][0] == kind and kind in ("table", "list", "para"):
            out[-1][1].append(line)
        else:
            out.append((kind, [line]))
    return [(k, lines) for k, lines in out if k != "blank"]


def to_html(text: str, figures: dict | None = None) -> str:
    """The markdown ``text`` as HTML (see the module docstring for what it understands);
    ``figures`` maps a chart's file name to its inline HTML (an ``<svg>``): the page
    carries the chart itself, never a link to a file beside it."""
    parts = []
    for kind, lines in blocks(text):
        image = IMAGE.match(lines[0].strip()) if kind == "para" and len(lines) == 1 else None
        if image:
            inline_copy = (figures or {}).get(image["file"])
            parts.append(f"<figure>{inline_copy}</figure>" if inline_copy
                         else f"<p>{inline(image['alt'])}</p>")
            continue
        if kind == "heading":
            level = len(lines[0]) - len(lines[0].lstrip("#"))
            parts.append(f"<h{level}>{inline(lines[0][level:].strip())}</h{level}>")
        elif kind == "table" and len(lines) >= 2 and SEPARATOR.match(lines[1].strip()):
            parts.append(table(lines))
        elif kind == "list":
            parts.append("<ul>" + "".join(f"<li>{inline(x[2:])}</li>" for x in lines) + "</ul>")
        else:
            parts.append(f"<p>{inline(' '.join(x.strip() for x in lines))}</p>")
    return "\n".join(parts)


def sections(text: str) -> list[tuple[str, str]]:
    """``text`` cut at its ``## `` headings: (heading without the hashes, the section's
    markdown with its heading); the part before the first is headed ``""``."""
    out: list = [("", [])]
    for line in text.splitlines():
        if line.startswith("## "):
            out.append((line[3:].strip(), []))
        out[-1][1].append(line)
    return [(title, "\n".join(lines)) for title, lines in out if lines]
