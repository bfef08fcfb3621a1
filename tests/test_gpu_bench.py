"""The benchmark and the overhead check on a GPU (marker ``gpu``), on a two-shape spec."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.timing]  # speed-ups asserted
ROOT = Path(__file__).resolve().parent.parent

SPEC = """
name = "bench-test"
objective = "forward_inference"
candidates = [
  ["FLOAT", "FLOAT", "DEFAULT", "STANDARD"],
  ["HALF", "FLOAT", "TENSOR_OP", "STANDARD"],
  ["HALF", "FLOAT", "TENSOR_OP", "PERSIST_STATIC"],
]
[[group]]
name = "seed"
cell = ["LSTM"]
layers = [2]
hidden = [512]
batch = [64]
seq_length = [20]
[[group]]
name = "large"
cell = ["LSTM"]
layers = [1]
hidden = [2048]
batch = [128]
seq_length = [10]
"""


def run(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))


@pytest.fixture(scope="module")
def bench_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("bench")
    (d / "spec.toml").write_text(SPEC)
    proc = run("cudnn_rnn.bench", "--spec", str(d / "spec.toml"), "--out", str(d))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    print(proc.stdout)
    return d


def test_bench_finds_verified_winners_and_measures_the_ceiling(cuda, bench_dir):
    summary = json.loads((bench_dir / "bench.json").read_text())
    assert [r["id"] for r in summary["shapes"]] == ["LSTM/T10L1H2048B128", "LSTM/T20L2H512B64"] or \
        {r["id"] for r in summary["shapes"]} == {"LSTM/T10L1H2048B128", "LSTM/T20L2H512B64"}
    recorded = {r["id"]: r for r in map(json.loads, (bench_dir / "bench.jsonl").read_text()
                                        .splitlines())}
    for row in summary["shapes"]:
        w = row["winner"]
        verified = [c["timing"]["median_ms"] for c in recorded[row["id"]]["candidates"]
                    if c["outcome"] == "OK" and c["timing"]]
        assert w["timing"]["median_ms"] == min(verified)  # the fastest verified candidate
        assert w["outcome"] == "OK" and w["max_error"] <= max(w["tolerance"], w["gradient_tolerance"])
        assert row["fp32"] and row["speedup_fp32"] == pytest.approx(
            row["fp32"]["timing"]["median_ms"] / w["timing"]["median_ms"])
        # the 16-bit candidates beat true FP32 by 3.5-8.7x at both shapes on the H200
        assert w["config"] != "FLOAT/FLOAT/FMA/STANDARD" and row["speedup_fp32"] > 1.7
        assert row["gemm_fraction"] and 0 < row["gemm_fraction"] < 1.5
    rates = summary["runs"][0]["gemm"]["rates"]
    assert rates["float16 8192x8192x8192"]["tflops"] > rates["float32 8192x8192x8192"]["tflops"] > 1
    assert "float16 8192x128x2048" in rates  # the large shape's recurrent step
    big = next(r for r in summary["shapes"] if r["shape"]["hidden"] == 2048)
    assert big["gemm_model"]["model_tflops"] > 0 and big["gemm_model"]["fp16_over_model"] > 0
    md = (bench_dir / "bench.md").read_text()
    assert "## Targets" in md and "## Ceilings measured in each run" in md
    print({r["id"]: (r["winner"]["config"], round(r["winner"]["timing"]["median_ms"], 4),
                     r["speedup_fp32"], r["speedup_torch"]) for r in summary["shapes"]})


def test_bench_resume_runs_nothing_twice(cuda, bench_dir):
    before = (bench_dir / "bench.jsonl").read_text()
    proc = run("cudnn_rnn.bench", "--spec", str(bench_dir / "spec.toml"), "--out", str(bench_dir),
               "--resume")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (bench_dir / "bench.jsonl").read_text() == before
    runs = json.loads((bench_dir / "bench.run.json").read_text())["runs"]
    assert len(runs) == 2 and runs[1]["gemm"]["rates"]


def test_overhead_check_runs_pytorchs_configuration(cuda):
    proc = run("cudnn_rnn.overhead", "--shape", "LSTM:20,1,128,8", "--shape", "LSTM:20,2,512,64",
               "--mode", "both", "--rounds", "2", "--processes", "2", "--json")
    try:
        import torch  # noqa: F401
    except ImportError:
        assert proc.returncode == 1
        rows = json.loads(proc.stdout)["rows"]
        assert all("PyTorch is not importable" in r["skipped"] for r in rows)
        pytest.skip("PyTorch is not installed: the comparison was skipped with that reason")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    for row in report["rows"]:
        assert "ratio" in row, row.get("skipped")
        seen, cfg = row["observed"], row["config"]
        assert (cfg["data_type"], cfg["math_type"], cfg["algo"], cfg["layout"]) == (
            seen["dataType"], seen["mathMode"].replace("_MATH", ""), seen["algo"], seen["layout"])
        assert row["fwd_mode"] == seen["fwdMode"] == ("TRAINING" if row["training_mode"] else "INFERENCE")
        assert row["verification"]["passed"]
        # the timed calls themselves checked: ours (PyTorch's devSeqLengths), and PyTorch's
        assert max(row["timed_call_errors"].values()) < 5e-3, row["timed_call_errors"]
        assert max(row["torch_errors"].values()) < 5e-3, row["torch_errors"]
        assert len(row["processes"]) == 2 and row["ratio_min"] <= row["ratio"] <= row["ratio_max"]
        assert row["arguments_differ"] == [], row["arguments"]  # the very call PyTorch made
        assert len(row["cudnn_objects_in_process"]) == 1  # PyTorch and we share one libcudnn
        assert 0.3 < row["ratio"] < 3
        # the same kernels, fed with the host far ahead: the GPU work of the two sides agrees
        assert row["queued"]["host_ahead"], row["queued"]
        assert 0.9 < row["queued_ratio"] < 1.1, row["queued"]
    print({f"{r['shape']['hidden']}/{r['fwd_mode']}": (round(r["ratio"], 3), round(r["queued_ratio"], 3),
                                                      r["host_enqueue"])
           for r in report["rows"]})
