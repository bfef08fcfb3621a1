"""The per-axis-value view of a product run and the wrong-results list, on a cut of the real
verification-only run of probes/full.toml on the H200 (tests/fixtures/h200-919-full-cut)."""
import re
from pathlib import Path

import pytest

from cudnn_rnn.reporting import axes, load, product

FIX = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="module")
def full_cut():
    return load.load(FIX / "h200-919-full-cut")


def test_every_axis_value_counts_each_cell_once_with_the_library_s_own_causes(full_cut):
    recs = full_cut.records
    rows = product.summarise(recs)
    shown = {r["axis"] for r in rows}  # the cut: one cell (RNN_RELU, no projection), one layer
    assert shown == set(product.AXES) - {"cell", "layers", "proj_size"}
    for axis in shown:
        mine = [r for r in rows if r["axis"] == axis]
        assert sum(r["cells"] for r in mine) == len(recs), axis
        for row in mine:
            held = [r for r in recs if product._value(r, axis) == row["value"]]
            assert sum(row["outcomes"].values()) == row["cells"] == len(held)
            failing = [r for r in held if r["outcome"] not in axes.WORKS]
            counts = [c["count"] for c in row["causes"]]
            assert counts == sorted(counts, reverse=True) and sum(counts) <= len(failing)
            for c in row["causes"]:  # each is one call, status and reason the records hold
                assert c["count"] == sum(axes.cause(r) == (c["call"], c["status"], c["reason"])
                                         for r in failing)
    values = {(r["axis"], r["value"]) for r in rows}
    # a record without projection holds projSize = hiddenSize (32 here)
    assert axes.value_of(recs[0], "proj_size") == "none"
    assert axes.value_of(dict(recs[0], proj_size=16), "proj_size") == "projection 16"
    assert {v for a, v in values if a == "lengths"} == {
        "lengths equal", "lengths descending:2", "lengths random:2:3"}


def test_a_run_with_variants_leaves_the_per_value_view_to_the_axis_view():
    recs = load.load(FIX / "h200-919-full-cut").records
    varied = [dict(recs[0], varies={"base": recs[1]["id"], "axis": "direction"}), *recs[1:]]
    assert product.summarise(varied) == [] and product.summarise([]) == []


def test_wrong_results_are_grouped_with_the_outputs_outside_tolerance(full_cut):
    wrong = [r for r in full_cut.records if r["outcome"] == "WRONG_RESULT"]
    assert len(wrong) == 6
    groups = product.wrong(full_cut.records)
    assert [(g["configuration"], g["cell"], g["direction"], g["count"]) for g in groups] == [
        ("HALF/FLOAT/TENSOR_OP/PERSIST_STATIC_SMALL_H", "RNN_RELU", "BIDIRECTIONAL", 6)]
    g = groups[0]
    for name, worst in g["largest_errors"].items():
        assert worst == max(r["errors"][name] for r in wrong)
    # the names the verification gave when it failed each cell (its reason) are the group's
    named = set()
    for r in wrong:
        named |= set(re.findall(r"\b(d?[a-z]+) [0-9.]+e[-+]\d+", r["reason"]))
    assert g["outside"] == "outside tolerance: " + ", ".join(sorted(named))
    assert g["example"] in {r["id"] for r in wrong}


def test_the_report_lists_the_wrong_results_and_every_axis_value(full_cut, tmp_path):
    from cudnn_rnn.reporting import matrix as report
    report.write_report(full_cut, tmp_path, "test")
    md = (tmp_path / "matrix.md").read_text()
    assert "## Wrong results" in md and "## Every axis value across the run" in md
    assert "| HALF/FLOAT/TENSOR_OP/PERSIST_STATIC_SMALL_H | RNN_RELU | BIDIRECTIONAL | 6 |" in md
    page = (tmp_path / "matrix.html").read_text()
    assert "<h2>Wrong results</h2>" in page and "Every axis value across the run" in page
