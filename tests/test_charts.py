"""The reports' charts (reporting/charts.py and the reports that draw one): a PNG beside each
markdown report that has a chart, the same chart inline in its HTML page, what each chart
shows taken from the report's own figures, and every report still written without
matplotlib, saying so in one line."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cudnn_rnn.reporting import bench, bench_chart, charts, frontier, load
from cudnn_rnn.reporting import matrix as matrix_report, precision

from . import committed

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
H200 = ROOT / "results" / "nvidia-h200" / "9.19.0"
needs_matplotlib = pytest.mark.skipif(not charts.available(), reason=(
    "matplotlib is not installed here (the reports extra; make test installs it)"))
NO_MATPLOTLIB = "import sys; sys.modules['matplotlib'] = None; "  # import fails, as uninstalled


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=cwd, timeout=300, env=dict(os.environ, PYTHONPATH=str(ROOT)))


def test_the_bench_chart_shows_the_reports_own_figures():
    """Per shape of the persistent kernel's run: cuDNN's winner, PyTorch's best, the GEMM
    engine's best 8-bit and the persistent kernel's best, at the times bench.md gives, and
    the 16-bit and INT8 floors of its floor section."""
    summary = bench.read(H200 / "persistent")
    groups, values, notes, marks = bench_chart.series(summary)
    assert len(groups) == len(summary["shapes"]) == 7
    floors = {label: where for label, _style, where in marks}
    for row, g in zip(summary["shapes"], groups):
        assert values[(g, bench_chart.CUDNN)] == row["winner"]["timing"]["median_ms"]
        assert values[(g, bench_chart.TORCH)] == row["torch_best"]["ms"]
        eight = next(r for r in summary["eight_bit"]["shapes"] if r["id"] == row["id"])
        front = next(c for c in summary["frontier"]["shapes"] if c["id"] == row["id"])
        assert eight["best_8bit_gemm"]["engine"] == "cuBLASLt"
        assert values[(g, bench_chart.EIGHT)] == eight["best_8bit_gemm"]["timing"]["median_ms"]
        assert values[(g, bench_chart.PERSISTENT)] == front["persistent"]["timing"]["median_ms"]
        assert floors["floor, 16-bit"][g] == front["floors"]["16-bit"]["ms"]
        assert floors["floor, 8-bit (INT8)"][g] == front["floors"]["int8"]["ms"]
        assert notes[(g, bench_chart.CUDNN)].endswith(row["winner"]["config"])
    # a benchmark before the 8-bit engines has the two series it measured, and no floor
    old = bench.read(H200)
    groups, values, _notes, marks = bench_chart.series(old)
    assert len(groups) == 44 and not marks
    assert {s for (_g, s), v in values.items() if v is not None} == {bench_chart.CUDNN,
                                                                     bench_chart.TORCH}


def test_the_frontier_has_no_row_where_the_run_measured_no_floor():
    """The GEMM engine's benchmark ran before the floor: no row reads it against nothing,
    and the section says so, with its count of shapes."""
    summary = bench.read(H200 / "lowbit")
    assert summary["eight_bit"]["shapes"] and summary["frontier"]["shapes"] == []
    text = frontier.markdown(summary["frontier"])
    assert "No run of this benchmark measured the floor" in text and "| " not in text
    assert f"its {summary['frontier']['without_floor']} shapes stand" in text


@needs_matplotlib
def test_each_report_writes_its_chart_beside_its_markdown_and_inline_in_its_page(tmp_path):
    (tmp_path / "m").mkdir()
    matrix_report.write_report(load.load(FIX / "h200-919"), tmp_path / "m", "test")
    doc = json.loads((H200 / "precision.json").read_text())
    precision.write(doc, tmp_path, "precision")
    bench.write(FIX / "bench-h200-919", tmp_path)
    for md, png, page in (
            (tmp_path / "m" / "matrix.md", "matrix.png", tmp_path / "m" / "matrix.html"),
            (tmp_path / "precision.md", "precision.png", tmp_path / "precision.html"),
            (tmp_path / "bench.md", "bench.png", None)):
        links = committed.IMAGE_LINE.findall(md.read_text())
        assert len(links) == 1 and links[0].endswith(f"]({png})"), links
        w, h = committed.png_size((md.parent / png).read_bytes())
        assert w == charts.WIDTH_IN * charts.DPI and h > 200
        if page:
            text = page.read_text()
            assert text.count("<svg ") == 1 and 'role="img"' in text
            # self-contained: no script, nothing fetched (namespace names are not fetched)
            bare = re.sub(r'xmlns(:\w+)?="[^"]*"', "", text)
            assert "<script" not in bare and "http" not in bare and "<image" not in bare
            assert "<img" not in text and "(" + png + ")" not in text


@needs_matplotlib
def test_a_chart_renders_to_the_same_bytes_twice(tmp_path):
    doc = json.loads((H200 / "precision-gru.json").read_text())
    first, second = precision.chart(doc), precision.chart(doc)
    assert first.png() == second.png() and first.svg() == second.svg()
    assert "Date" not in first.svg() and "<?xml" not in first.svg()


def test_without_matplotlib_every_report_is_written_and_says_its_chart_was_left_out(tmp_path):
    """matplotlib made unimportable (as when it is not installed): the matrix report, the
    benchmark report and the precision table are written as before, no PNG, and each says
    in one line where its chart would be that it was left out."""
    code = NO_MATPLOTLIB + (
        "import json; from pathlib import Path; "
        "from cudnn_rnn.reporting import bench, load, matrix, precision; "
        f"out = Path({str(tmp_path)!r}); (out / 'm').mkdir(); "
        f"matrix.write_report(load.load({str(FIX / 'h200-919')!r}), out / 'm', 'test'); "
        f"bench.write({str(FIX / 'bench-h200-919')!r}, out); "
        f"precision.write(json.loads(Path({str(H200 / 'precision.json')!r}).read_text()), "
        "out, 'precision'); print('matplotlib' in sys.modules and sys.modules['matplotlib'])")
    proc = _python(code, tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == "None", proc.stderr
    assert not list(tmp_path.rglob("*.png"))
    for md in (tmp_path / "m" / "matrix.md", tmp_path / "bench.md", tmp_path / "precision.md"):
        lines = md.read_text().splitlines()
        assert lines.count(charts.LEFT_OUT) == 1
        assert not committed.IMAGE_LINE.search(md.read_text())
    for page in (tmp_path / "m" / "matrix.html", tmp_path / "precision.html"):
        text = page.read_text()
        assert "<svg" not in text and text.count("Chart left out: matplotlib is not installed") == 1


def test_the_reports_import_matplotlib_only_to_draw():
    """Importing every report and command module leaves matplotlib unimported."""
    code = ("import sys; import cudnn_rnn.report, cudnn_rnn.bench_report, cudnn_rnn.precision, "
            "cudnn_rnn.reporting.html, cudnn_rnn.reporting.bench, cudnn_rnn.reporting.precision; "
            "print('matplotlib' in sys.modules)")
    proc = _python(code, ROOT)
    assert proc.returncode == 0 and proc.stdout.strip() == "False", proc.stderr
