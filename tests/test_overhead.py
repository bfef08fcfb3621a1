"""The overhead check's command line and shape parsing (no GPU needed)."""
import json
from pathlib import Path

import pytest

from cudnn_rnn import overhead
from cudnn_rnn.compare import overhead as measuring
from cudnn_rnn.cli import BadInput

from .test_cli import assert_one_line_exit_2, run


def test_shapes_parse():
    s = overhead.parse_shape("lstm:20,2,512,64")
    assert s == {"cell": "LSTM", "seq": 20, "layers": 2, "hidden": 512, "batch": 64,
                 "input_size": 512, "bidirectional": False, "dtype": "float32"}
    assert overhead.parse_shape("GRU:5,1,8,2:float16")["dtype"] == "float16"
    assert all(overhead.parse_shape(s) for s in overhead.DEFAULT_SHAPES)


@pytest.mark.parametrize("text", ["LSTM", "LSTM:1,2,3", "LSTMX:1,1,1,1", "LSTM:0,1,1,1",
                                  "LSTM:1,1,1,1:int8", "LSTM:1,1,1,1:float16:x"])
def test_bad_shapes(text):
    with pytest.raises(BadInput, match="CELL:T,L,H,B"):
        overhead.parse_shape(text)


def test_cli_errors_are_one_line():
    assert_one_line_exit_2(run("cudnn_rnn.overhead", "--shape", "LSTM:1,2"), "bad --shape")
    assert_one_line_exit_2(run("cudnn_rnn.overhead", "--mode", "x"), "invalid choice")
    assert_one_line_exit_2(run("cudnn_rnn.overhead", "--shape", "LSTM:2,1,8,2", CUDNN_RNN_NO_GPU="1"),
                           "needs a CUDA GPU")


def test_processes_below_one_is_a_one_line_error():
    assert_one_line_exit_2(run("cudnn_rnn.overhead", "--processes", "0"), "--processes")


# ------------------------------------------------- merging processes (two recorded H200 runs)
FIXTURES = Path(__file__).parent / "fixtures"
RUNS = [FIXTURES / "bench-h200-919" / "overhead.json",  # at 8920273: 5 rounds of 20 calls
        FIXTURES / "overhead" / "overhead-8f6ea0c.json"]  # at 8f6ea0c: 7 rounds of 50 calls


@pytest.fixture(scope="module")
def two_processes():
    return [json.loads(p.read_text())["rows"] for p in RUNS]


def test_one_process_is_reported_as_measured(two_processes):
    rows = two_processes[1]
    assert measuring.merge_processes([rows]) is rows


def test_ratio_is_the_median_over_processes_and_the_range_is_between_them(two_processes):
    merged = measuring.merge_processes(two_processes)
    assert len(merged) == len(two_processes[0])
    for row, a, b in zip(merged, *two_processes):
        assert row["shape"] == a["shape"] == b["shape"] and row["config"] == a["config"]
        assert [p["ratio"] for p in row["processes"]] == [a["ratio"], b["ratio"]]
        assert row["ratio"] == pytest.approx((a["ratio"] + b["ratio"]) / 2)
        assert (row["ratio_min"], row["ratio_max"]) == (min(a["ratio"], b["ratio"]),
                                                        max(a["ratio"], b["ratio"]))
        assert row["ours"]["median_ms"] == pytest.approx(
            (a["ours"]["median_ms"] + b["ours"]["median_ms"]) / 2)
        assert row["ours"]["rounds"] == a["ours"]["rounds"]  # details: the first process's


def test_a_pair_skipped_in_any_process_is_not_reported_as_measured(two_processes):
    first = [dict(r) for r in two_processes[0]]
    first[3] = {k: v for k, v in first[3].items() if k != "ratio"} | {"skipped": "our flow failed"}
    merged = measuring.merge_processes([first, two_processes[1]])
    assert "ratio" not in merged[3] and merged[3]["skipped"] == "our flow failed"
    assert all("ratio" in r for i, r in enumerate(merged) if i != 3)


def test_the_bench_report_says_what_the_range_is(two_processes):
    from cudnn_rnn.reporting import bench_overhead as report
    rows = measuring.merge_processes(two_processes)
    ratios = [r["ratio"] for r in rows]
    multi = {"target": 1.03, "processes": 2, "rounds": 7, "rows": rows,
             "worst_ratio": max(ratios), "median_ratio": 1.0,
             "worst_single_process": max(p["ratio"] for r in rows for p in r["processes"]),
             "provenance": {}}
    text = "\n".join(report.overhead_lines(multi))
    assert "median over 2 fresh processes" in text and "range over processes" in text
    single = json.loads(RUNS[1].read_text())
    text = "\n".join(report.overhead_lines(single))
    assert "one process" in text and "range over rounds" in text
    assert "the same as PyTorch's on every measured row" in text  # its arguments all matched


def test_the_host_ahead_ratio_is_reported_and_marked_when_the_host_fell_behind():
    from cudnn_rnn.reporting import bench_overhead as report
    recorded = json.loads((FIXTURES / "overhead" / "overhead-7444781.json").read_text())
    queued = [r["queued_ratio"] for r in recorded["rows"]]
    text = "\n".join(report.overhead_lines(recorded))
    assert f"Host-ahead ratios span {min(queued):.3f}–{max(queued):.3f}" in text
    assert "median over 3 fresh processes" in text and "(host fell behind)" not in text
    row = recorded["rows"][0]
    behind = dict(row, queued=dict(row["queued"], host_ahead=False))
    assert report.host_ahead(behind) == f"{row['queued_ratio']:.3f} (host fell behind)"


def test_graph_captured_pairs_are_reported_and_refusals_say_why():
    from cudnn_rnn.reporting import bench_overhead as report
    recorded = json.loads((FIXTURES / "overhead" / "overhead-7444781.json").read_text())
    rows = [r for r in recorded["rows"] if "ratio" in r]
    rows[0]["captured"] = {"ours_ms": 0.2, "torch_ms": 0.25, "ratio": 0.8}
    rows[1]["captured"] = {"skipped": "ours: CUDA ended the capture: X"}
    text = "\n".join(report.overhead_lines(recorded))
    s = rows[0]["shape"]
    assert f"{s['cell']} {s['hidden']}/{s['batch']} {s['dtype']}" in text and " 0.800" in text
    assert "not captured: " in text and "CUDA ended the capture: X" in text
    assert "CUDA-graph-captured" not in "\n".join(report.overhead_lines(
        json.loads((FIXTURES / "overhead" / "overhead-7444781.json").read_text())))


def test_the_captured_pair_is_merged_over_processes_like_the_plain_one(two_processes):
    first, second = (json.loads(json.dumps(rows)) for rows in two_processes)
    i = next(k for k, r in enumerate(first) if "ratio" in r and "ratio" in second[k])
    first[i]["captured"] = {"ours_ms": 0.2, "torch_ms": 0.25, "ratio": 0.8}
    second[i]["captured"] = {"ours_ms": 0.3, "torch_ms": 0.25, "ratio": 1.2}
    row = measuring.merge_processes([first, second])[i]
    assert row["captured"]["ratio"] == pytest.approx(1.0)  # the median of 0.8 and 1.2
    assert (row["captured"]["ratio_min"], row["captured"]["ratio_max"]) == (0.8, 1.2)
    assert row["captured"]["processes"] == 2
    second[i]["captured"] = {"skipped": "ours: CUDA ended the capture: X"}
    assert measuring.merge_processes([first, second])[i]["captured"] == second[i]["captured"]
