"""How the reports draw their charts: matplotlib, the ``reports`` extra.

A report with a chart writes it twice: a PNG beside its markdown (which links it) and the
same figure as inline SVG in its HTML page (self-contained: no script, no link, no font
fetched; labels stay text, in the browser's sans-serif where DejaVu Sans is missing). What
a chart shows is its report's business (:mod:`.html`, :mod:`.precision`, :mod:`.bench_chart`);
this module only draws bars.

matplotlib is imported here only, and only when a chart is drawn, with its Agg canvas (no
display, no pyplot state). Without it :func:`bars` returns None and the report says so in
one line (:data:`LEFT_OUT`). For one matplotlib version the files are reproducible: no
date or software tag, ids salted with a constant, so re-rendering a committed report
rewrites nothing but what changed.
"""
from __future__ import annotations

import io
import re
import textwrap
from dataclasses import dataclass

LEFT_OUT = ("Chart left out: matplotlib is not installed here (the reports extra: "
            "pip install -e '.[reports]', which make install includes).")
RC = {"svg.fonttype": "none", "svg.hashsalt": "cudnn-rnn", "font.family": "sans-serif",
      "font.size": 9, "axes.titlesize": 10, "axes.spines.top": False,
      "axes.spines.right": False}
DPI = 120
WIDTH_IN = 10.0
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#d62728", "#8c564b", "#17becf")


def available() -> bool:
    try:
        import matplotlib  # noqa: F401  (optional: the reports extra)
    except ImportError:
        return False
    return True


@dataclass
class Chart:
    figure: object  # a matplotlib Figure on an Agg canvas
    alt: str  # what the chart shows, in words: the image's alt text and the SVG's label

    def png(self) -> bytes:
        import matplotlib  # lazy: the reports extra, imported only to draw
        buf = io.BytesIO()
        with matplotlib.rc_context(RC):
            self.figure.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
        return buf.getvalue()

    def svg(self) -> str:
        """The figure as one ``<svg>`` element to put inside an HTML page."""
        import matplotlib  # lazy: the reports extra, imported only to draw
        buf = io.StringIO()
        with matplotlib.rc_context(RC):
            self.figure.savefig(buf, format="svg", metadata={
                "Date": None, "Creator": None, "Format": None, "Type": None})
        text = buf.getvalue()
        text = text[text.index("<svg"):]  # no XML prolog, no DOCTYPE (a URL)
        label = self.alt.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
        return re.sub(r"^<svg ", f'<svg role="img" aria-label="{label}" '
                      'style="max-width:100%;height:auto" ', text, count=1).rstrip() + "\n"

    def markdown(self, file_name: str) -> str:
        return f"![{self.alt}]({file_name})"


def bars(groups: list[str], series: list[str], values: dict, *, title: str, xlabel: str,
         alt: str, colours: dict | None = None, notes: dict | None = None, log: bool = False,
         ref: tuple[float, str] | None = None, marks: tuple = (), ids: dict | None = None,
         side_by_side: bool = True) -> Chart | None:
    """Horizontal bars, one group per entry of ``groups`` (top to bottom), one bar per
    entry of ``series`` that has a value (``values[(group, series)]``; missing or None:
    no bar). ``colours`` maps a series, or a (group, series) pair, to its colour;
    ``notes`` (group, series) to the text at the bar's end; ``ref`` draws a dashed line
    at a value with its label; ``marks`` are (label, line style, {group: value}): a
    vertical stroke across each group (a bound such as a floor); ``ids`` (group, series)
    to the bar's id in the SVG. ``side_by_side=False``: one bar per group, the series
    telling only its colour and legend entry. None without matplotlib."""
    if not available():
        return None
    import matplotlib  # lazy: the reports extra, imported only to draw
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    colours, notes, ids = colours or {}, notes or {}, ids or {}
    shown = [s for s in series if any(values.get((g, s)) is not None for g in groups)]
    slots = len(shown) if side_by_side else 1
    step = 0.8 / max(slots, 1)
    handles = {}  # legend entries in the order drawn: the series, then marks and ref
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(WIDTH_IN, 1.6 + len(groups) * (0.17 * slots + 0.2)),
                     layout="constrained")
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        for si, s in enumerate(shown):
            for gi, g in enumerate(groups):
                v = values.get((g, s))
                if v is None:
                    continue
                y = gi + ((si - (len(shown) - 1) / 2) * step if side_by_side else 0)
                colour = colours.get((g, s)) or colours.get(s) or PALETTE[si % len(PALETTE)]
                patch = ax.barh(y, v, height=step * 0.9, color=colour)[0]
                handles.setdefault(s, patch)
                if (g, s) in ids:
                    patch.set_gid(ids[(g, s)])
                if notes.get((g, s)):
                    ax.annotate(notes[(g, s)], (v, y), xytext=(3, 0), textcoords="offset points",
                                va="center", fontsize=7.5)
        for label, style, where in marks:
            for gi, g in enumerate(groups):
                if where.get(g) is not None:
                    handles.setdefault(label, ax.vlines(
                        where[g], gi - 0.45, gi + 0.45, colors="black", linestyles=style,
                        linewidth=1.4))
        if ref:
            handles[ref[1]] = ax.axvline(ref[0], color="#6b7280", linestyle="--", linewidth=1)
        if log:
            ax.set_xscale("log")
            ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
            ax.xaxis.set_minor_formatter(NullFormatter())
        ax.margins(x=0.3 if log else 0.12)  # room for the notes at the bars' ends
        ax.set_yticks(range(len(groups)), groups)
        ax.set_ylim(len(groups) - 0.5, -0.5)
        ax.set_xlabel(xlabel)
        fig.suptitle("\n".join(textwrap.wrap(title, 120)), x=0.01, ha="left", fontsize=10)
        ax.grid(axis="x", color="#e5e7eb", linewidth=0.6)
        ax.set_axisbelow(True)
        if handles:
            fig.legend(list(handles.values()), list(handles), loc="outside lower left",
                       ncols=min(len(handles), 3), frameon=False)
    return Chart(fig, alt)
