"""What a report says and leaves out, from recorded runs: the descriptor-only run's words,
no empty section, a refusal that covers a whole grid said once, the HTML carrying every
section of the markdown with its legend in colour, and the INT8 answer's figures."""
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from cudnn_rnn.reporting import constraints as cons, html, load, markdown, mdhtml
from cudnn_rnn.reporting import matrix as report

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
INFO = {"command": "python -m cudnn_rnn.report test", "commit": "test", "date": "test",
        "sources": ["fixture"]}


def both(result):
    rules = cons.load()
    a = report.analyse(result, rules)
    md = markdown.render(result, a, INFO, rules)
    return md, html.render(result, a, INFO, md)


@pytest.fixture(scope="module")
def no_gpu():
    """The committed descriptor-only run: 5,816 cells, INT8/INT32/FP8 refused whole."""
    return both(load.load(ROOT / "results" / "no-gpu" / "9.28.0"))


@pytest.fixture(scope="module")
def h919():
    return both(load.load(FIX / "h200-919"))


class Page(HTMLParser):
    """Headings, the text of the page and the classes of the legend's entries."""

    def __init__(self):
        super().__init__()
        self.headings, self.text, self.legend, self._tag, self._in_legend = [], [], [], [], 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self._tag.append(tag)
        if a.get("class") == "legend":
            self._in_legend = len(self._tag)
        elif self._in_legend and tag == "span":
            self.legend.append(a.get("class"))

    def handle_endtag(self, tag):
        if self._in_legend == len(self._tag):
            self._in_legend = 0
        if self._tag:
            self._tag.pop()

    def handle_data(self, data):
        self.text.append(data)
        if self._tag and self._tag[-1] in ("h1", "h2", "h3"):
            self.headings.append(data.strip())


def parsed(page: str) -> Page:
    p = Page()
    p.feed(page)
    p.close()
    return p


def test_descriptor_only_cells_read_as_passed_not_skipped(no_gpu):
    md, page = no_gpu
    for text in (md, page.split("</style>")[1]):  # (SKIP_INPUT, an input mode, stays)
        assert "SKIPPED" not in text and not re.search(r"\bskip\b", text, re.IGNORECASE)
    assert ("passed the descriptor stages (device stages not run on this machine) 2224"
            in md.splitlines()[2])
    assert "desc OK" in md and "| passed the descriptor stages 240 |" in md


def test_no_section_without_data(no_gpu):
    md, page = no_gpu
    assert "Why no tensor-op speed-up?" not in md and "Why no tensor-op" not in page
    assert "No timed shape sweep" not in page and "Fastest verified cells" not in md
    sections = mdhtml.sections(md)
    for title, text in sections[1:]:
        body = [line for line in text.splitlines()[1:] if line.strip()]
        assert body, f"section {title!r} is empty"


def test_a_refusal_covering_a_whole_grid_is_one_line(no_gpu):
    md, page = no_gpu
    for dt in ("INT8", "INT32", "FP8_E4M3", "FP8_E5M2"):
        section = md.split(f"### {dt}\n")[1].split("\n#")[0].strip()
        assert section == ("All 384 cells (24 math precision x math type rows, 16 algorithm x "
                           "cell columns) are refused by `cudnnSetRNNDescriptor_v8` with "
                           "`CUDNN_STATUS_NOT_SUPPORTED` (cuDNN logs no reason).")
    assert len(md.encode()) < 80_000  # was 112 KB with the four grids repeating it
    # the page says it once too, and keeps each cell (with its hover text) one click away
    assert page.count("<details><summary>the 384 cells</summary>") == 4
    # grids with more than one outcome stay grids
    assert "### FLOAT\n\n| prec / math" in md and "### BFLOAT16\n\n| prec / math" in md


@pytest.mark.parametrize("which", ["no_gpu", "h919"])
def test_the_html_carries_every_section_and_line_of_the_markdown(which, request):
    md, page = request.getfixturevalue(which)
    p = parsed(page)
    text = " ".join("".join(p.text).split())
    for line in md.splitlines():
        if re.match(r"#{1,3} ", line):
            assert line.lstrip("#").strip() in p.headings, line
    words = [line for line in md.splitlines() if line.startswith("- ")
             or (line and not line.startswith(("|", "#", "-")))]
    assert words
    for line in words:  # the prose and every list item, as the page shows it
        plain = re.sub(r"\*\*|`|(?<!\w)\*|\*(?!\w)", "", line[2:] if line.startswith("- ")
                       else line)
        assert " ".join(plain.split()) in text, plain[:80]
    rows = [line for line in md.splitlines() if line.startswith("|") and "---" not in line]
    for row in rows:  # every table cell of the markdown is a cell of the page
        for cell in row.strip("|").split("|"):
            shown = re.sub(r"`", "", cell.strip())
            assert not shown or shown in text, shown


@pytest.mark.parametrize("which,shown", [
    ("no_gpu", ["ns", "bp", "desc"]),  # what a descriptor-only run's grids hold
    ("h919", ["ok-fast", "ns", "bp"])])  # a GPU run without a wrong, crashed or errored cell
def test_the_legend_is_in_colour_and_explains_what_the_grids_hold(which, shown, request):
    md, page = request.getfixturevalue(which)
    legend = parsed(page).legend
    assert legend == shown
    css = html.MATRIX_CSS.replace("\n", "")
    for cls in legend:
        assert re.search(r"\." + re.escape(cls) + r"\{background:#[0-9a-f]{6}", css), cls
    assert 'style="background:inherit"' not in page
    said = md.split("Legend:\n\n")[1].split("\n\n")[0].splitlines()
    assert len(said) == len(shown) and "`WRONG`" not in md  # neither run has a wrong cell
    timed = "Times are medians of CUDA-event timed calls" in md
    assert timed == (which == "h919") and ("No cell was timed" in md) == (not timed)


def test_the_int8_answer_gives_both_speedups_of_a_cell_of_the_seeds_configuration(h919):
    md, page = h919
    line = next(x for x in md.splitlines() if x.startswith("**The fastest verified alternative**"))
    assert re.search(r"\*\*\d+\.\d\dx\*\* true FP32 \(inference \d+\.\d\dx\)", line), line
    assert "(inference x)" not in md


def test_a_variant_is_never_the_int8_alternative():
    """A variant changes an axis of the seed's configuration and is timed in forward training
    only: the alternative is a cell of the product, with its inference speed-up."""
    from cudnn_rnn.reporting import analysis
    result = load.load(FIX / "h200-919")
    best = analysis.int8_answer(result.records, result.meta)["alternative"]
    faster = dict(next(r for r in result.records if r["id"] == best["id"]))
    faster.update(id=faster["id"].replace("LINEAR_INPUT", "SKIP_INPUT"),
                  varies={"base": best["id"], "axis": "input_mode"},
                  speedup={"forward_training": 99.0},
                  graph_timings={k: dict(v, median_ms=v["median_ms"] / 10)
                                 for k, v in (faster.get("graph_timings") or {}).items()
                                 if k == "forward_training"} or None,
                  timings={k: dict(v, median_ms=v["median_ms"] / 10)
                           for k, v in faster["timings"].items() if k == "forward_training"})
    again = analysis.int8_answer(result.records + [faster], result.meta)["alternative"]
    assert again["id"] == best["id"] and again["speedup_inference"] is not None


def test_md_to_html_escapes_and_formats():
    out = mdhtml.to_html("## A <b> & `x<y`\n\npara **bold** *em* `code`\n\n- one\n- two\n\n"
                         "| a | b |\n|---|---|\n| 1 | `c` |\n")
    assert "<h2>A &lt;b&gt; &amp; <code>x&lt;y</code></h2>" in out
    assert "<p>para <b>bold</b> <i>em</i> <code>code</code></p>" in out
    assert "<ul><li>one</li><li>two</li></ul>" in out
    assert "<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td><code>c</code></td></tr></table>" in out
