"""The committed precision tables (results/<gpu>/<cudnn>/precision*.json, from real H200 runs):
the summary and the report are functions of the records, and every figure is consistent."""
import json
from pathlib import Path

import pytest

from cudnn_rnn.charlm import network
from cudnn_rnn.charlm.summary import TARGETS, summarise
from cudnn_rnn.lowbit.calibration import METHODS
from cudnn_rnn.reporting import charts, precision as report

from . import committed

ROOT = Path(__file__).resolve().parent.parent
FOUND = sorted((ROOT / "results").glob("*/*/precision*.json"))
MODELS = {"precision.json": "lstm", "precision-gru.json": "gru"}


def test_both_shipped_models_have_a_committed_table():
    assert {p.name for p in FOUND} >= set(MODELS)


@pytest.fixture(params=FOUND, ids=lambda p: str(p.relative_to(ROOT)))
def doc(request):
    return request.param, json.loads(request.param.read_text())


def test_the_report_is_rendered_from_the_records(doc, tmp_path):
    """The committed .md, .html and .png are what :func:`report.write` makes of the JSON
    (the chart compared as tests/committed.py says)."""
    path, d = doc
    assert summarise(d["result"]) == d["summary"]
    written = report.write(d, tmp_path, path.stem)
    fresh = {p.suffix: p for p in written}
    assert fresh[".md"].read_text() == committed.markdown_as_here(path.with_suffix(".md").read_text())
    page, now = path.with_suffix(".html").read_text(), fresh[".html"].read_text()
    assert committed.page_without_chart(page) == committed.page_without_chart(now)
    png = path.with_suffix(".png")
    assert f"]({png.name})" in path.with_suffix(".md").read_text() and png.is_file()
    if charts.available():
        assert committed.chart_words(page) == committed.chart_words(now)
        assert committed.png_size(png.read_bytes()) == committed.png_size(fresh[".png"].read_bytes())
        # one bar per timed row, each with the row's id
        timed = [r for r in d["summary"]["rows"] if r["speedup_fp32"] is not None]
        assert now.count('id="row-') == len(timed) == page.count('id="row-')


def test_every_row_was_verified_and_its_figures_agree(doc):
    path, d = doc
    res, s = d["result"], d["summary"]
    records = {r["id"]: r for r in res["records"]}
    base = records[res["baseline"]]
    assert base["label"].startswith("FLOAT/FLOAT/FMA_MATH/")
    assert {r["family"] for r in s["rows"]} == {"fp32", "tf32", "fp16", "bf16", "int8", "fp8"}
    for r in s["rows"]:
        rec = records[r["id"]]
        assert rec["outcome"] == "OK"
        checked = rec.get("errors_twin") or rec.get("errors_held") or rec["errors"]
        assert max(checked.values()) <= rec["bound"], r["id"]
        timing = (rec.get("graph_timings") or rec["timings"])["forward_inference"]
        assert r["ms"] == timing["median_ms"] and r["basis"] == ("graph" if rec.get(
            "graph_timings") else "plain")
        if r["basis"] == "graph":
            assert r["speedup_fp32"] == pytest.approx(
                base["graph_timings"]["forward_inference"]["median_ms"] / r["ms"])
        assert r["us_per_sequence"] == pytest.approx(1000 * r["ms"] / res["source"]["shape"]["batch"])
        fp32_bpc = base["metrics"]["bpc"]
        assert r["dbpc_pct"] == pytest.approx(100 * (r["bpc"] - fp32_bpc) / fp32_bpc)
    # every verified 8-bit record is nearer its quantized twin than the unquantized reference
    for rec in res["records"]:
        if rec.get("errors_twin") and rec["outcome"] == "OK":
            assert all(rec["errors_twin"][n] < rec["errors"][n] for n in rec["errors_twin"])
    # a cuDNN row is the fastest verified configuration of its family
    for r in (r for r in s["rows"] if r["engine"] == "cuDNN"):
        same = [x for x in res["records"] if x["engine"] == "cuDNN" and x["family"] == r["family"]
                and x["outcome"] == "OK"]
        assert r["ms"] == min((x.get("graph_timings") or x["timings"])["forward_inference"][
            "median_ms"] for x in same)
    # an 8-bit row of the GEMM engine is the best calibration of its format and part; the
    # persistent kernel's row of that plan runs the method the GEMM engine found best
    for r in (r for r in s["rows"] if r["family"] in ("int8", "fp8")):
        cal = s["calibration"][f"{records[r['id']]['format']}/{r['parts']}"]
        best = min(cal.values(), key=lambda c: (c["bpc"], METHODS.index(c["calibration"])))
        assert set(cal) == set(METHODS)
        if r["engine"] == "cuBLASLt":
            assert r["bpc"] == best["bpc"]
        else:
            assert r["engine"] == "persistent" and r["calibration"] == best["calibration"]


def test_the_recorded_figures_are_the_shipped_models(doc):
    path, d = doc
    model = network.load(network.shipped(MODELS[path.name]))
    res = d["result"]
    assert res["source"]["recorded"] == model.meta["heldout"]
    assert res["reference"]["bpc"] == pytest.approx(model.meta["heldout"]["bpc"], rel=1e-12)
    for key in ("gpu", "compute_capability", "driver_version", "cudnn_version", "library_path",
                "commit", "command", "date"):
        assert d["provenance"].get(key), key
    assert d["provenance"]["cublaslt"]["cublaslt_version"] and d["provenance"]["cublaslt"]["cublaslt_path"]


def test_the_targets_and_the_answer_follow_from_the_rows(doc):
    _, d = doc
    s = d["summary"]
    rows = {r["id"]: r for r in s["rows"]}
    for fam, t in s["targets"].items():
        assert t["met"] == (t["dbpc_pct"] <= TARGETS[fam])
    deploy = rows[s["answer"]["deploy"]]
    assert deploy["family"] == "fp32" or deploy["dbpc_pct"] <= TARGETS.get(deploy["family"], 0.1)
    quicker = [r for r in s["rows"] if r["ms"] < deploy["ms"] and r["id"] not in s["answer"]["tied"]]
    assert all(r["dbpc_pct"] > TARGETS.get(r["family"], 0.1) for r in quicker)


def test_a_regenerated_result_does_not_mark_the_code_dirty(tmp_path, monkeypatch):
    import subprocess
    from cudnn_rnn.matrix import provenance
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "precision.md").write_text("old\n")
    (tmp_path / "code.py").write_text("x = 1\n")
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "c"]):
        subprocess.run(git + cmd, cwd=tmp_path, check=True, capture_output=True)
    monkeypatch.delenv("CUDNN_RNN_COMMIT", raising=False)
    monkeypatch.setattr(provenance, "ROOT", tmp_path)
    (tmp_path / "results" / "precision.md").write_text("regenerated\n")
    assert not provenance.commit().endswith("-dirty")
    (tmp_path / "code.py").write_text("x = 2\n")
    assert provenance.commit().endswith("-dirty")


def test_every_timed_row_shows_its_median_inside_its_interquartile_range(doc):
    """The table's ms/batch is the median with the quartiles of its timed calls (the
    standard: times with their spread), and the median lies between them."""
    import re
    path, data = doc
    headers, rows = report.table_rows(data)
    col = headers.index("ms/batch (IQR)")
    timed = [(r, row) for r, row in zip(data["summary"]["rows"], rows[1:] if rows and
                                       rows[0][0] == "float64 reference" else rows)
             if r.get("ms") is not None]
    assert timed
    for r, row in timed:
        m = re.fullmatch(r"(\d+\.\d{4}) \((\d+\.\d{4})-(\d+\.\d{4})\)", row[col])
        assert m, (r["id"], row[col])
        median, lo, hi = map(float, m.groups())
        assert lo <= median <= hi and median == pytest.approx(r["ms"], abs=1e-4)
