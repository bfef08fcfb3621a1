"""The benchmark's spec, search space and command line (no GPU needed)."""
from pathlib import Path

import pytest

from cudnn_rnn.bindings.enums import DataType, MathType, RNNAlgo
from cudnn_rnn import bench
from cudnn_rnn.matrix import bench as benchdata

from .test_cli import assert_one_line_exit_2, run


def test_the_shipped_spec_has_the_issues_shapes():
    spec = benchdata.load_spec("bench")
    ids = {s.id for s in spec.shapes}
    lstm = {f"LSTM/T{t}L1H{h}B{b}" for h in (512, 1024, 2048, 4096) for b in (16, 64, 128, 256)
            for t in (25, 50)}
    assert lstm <= ids
    assert {f"{c}/T20L2H512B64" for c in ("RNN_RELU", "RNN_TANH", "LSTM", "GRU")} <= ids
    assert any(i.startswith("GRU/T25") for i in ids) and any(i.startswith("RNN_TANH/T25") for i in ids)
    assert spec.objective == "forward_inference"
    assert (DataType.FLOAT, DataType.FLOAT, MathType.FMA_MATH, RNNAlgo.STANDARD) in spec.candidates


def test_candidates_put_the_fp32_baseline_first_and_add_it_when_missing():
    spec = benchdata.spec_from_dict({"candidates": [["HALF", "FLOAT", "TENSOR_OP", "STANDARD"]],
                                 "group": [{"name": "g", "cell": ["GRU"], "layers": [1],
                                            "hidden": [64], "batch": [8], "seq_length": [5]}]})
    cells = benchdata.candidate_cells(spec.shapes[0], spec)
    assert [c.config.data_type for c in cells] == [DataType.FLOAT, DataType.HALF]
    assert cells[0].implicit and not cells[1].implicit
    assert cells[1].config.math_type == MathType.TENSOR_OP_MATH
    assert cells[1].config.hidden_size == 64 and cells[1].config.seq_length == 5


def test_gemm_sizes_cover_each_fp16_target_shapes_time_step():
    spec = benchdata.load_spec("bench")
    sizes = bench.gemm_sizes(spec.shapes)
    assert {"dtype": "float16", "m": 8192, "n": 8192, "k": 8192} in sizes
    parts = {(s["m"], s["n"], s["k"]) for s in sizes[2:]}
    steps = {(4 * h, b, h) for h in (2048, 4096) for b in (128, 256)}
    inputs = {(4 * h, t * b, h) for h in (2048, 4096) for b in (128, 256) for t in (25, 50)}
    assert parts == steps | inputs


@pytest.mark.parametrize("data,needle", [
    ({"candidates": [], "group": []}, "non-empty list"),
    ({"candidates": [["FLOAT", "FLOAT", "FMA"]], "group": []}, "four names"),
    ({"candidates": [["FLOAT", "FLOAT", "FMA", "QUICK"]], "group": []}, "unknown cudnnRNNAlgo_t"),
    ({"candidates": [["FLOAT", "FLOAT", "FMA", "STANDARD"]]}, "[[group]]"),
    ({"candidates": [["FLOAT", "FLOAT", "FMA", "STANDARD"]],
      "group": [{"name": "g", "cell": ["LSTM"], "layers": [1], "hidden": [0], "batch": [1],
                 "seq_length": [1]}]}, "positive integers"),
    ({"candidates": [["FLOAT", "FLOAT", "FMA", "STANDARD"]], "shapes": []}, "unknown key"),
    ({"candidates": [["FLOAT", "FLOAT", "FMA", "STANDARD"]], "lowbit": "int8/both",
      "group": [{"name": "g", "cell": ["LSTM"], "layers": [1], "hidden": [8], "batch": [1],
                 "seq_length": [1]}]}, "'lowbit' must be a list"),
])
def test_malformed_specs_are_refused_with_the_reason(data, needle):
    with pytest.raises(benchdata.BenchSpecError, match=None) as exc:
        benchdata.spec_from_dict(data)
    assert needle in str(exc.value)


def test_cli_errors_are_one_line(tmp_path):
    bad = tmp_path / "b.toml"
    bad.write_text("candidates = [[1, 2]")
    assert_one_line_exit_2(run("cudnn_rnn.bench", "--spec", str(bad)), "not valid TOML")
    assert_one_line_exit_2(run("cudnn_rnn.bench", "--spec", "nope"), "not found")
    shipped = (Path(bench.__file__).parents[1] / "probes" / "bench.toml").read_text()
    unknown = tmp_path / "lowbit.toml"
    unknown.write_text(shipped.replace('lowbit = ["fp16"', 'lowbit = ["int4"'))
    assert_one_line_exit_2(run("cudnn_rnn.bench", "--spec", str(unknown), "--list"),
                           "lowbit: no engine configuration named 'int4'")
    assert_one_line_exit_2(run("cudnn_rnn.bench", "--group", "nope"), "no group named")
    assert_one_line_exit_2(run("cudnn_rnn.bench", "--reps", "x"), "argument --reps: expected a positive integer")
    assert_one_line_exit_2(run("cudnn_rnn.bench", "--group", "seed", CUDNN_RNN_NO_GPU="1"),
                           "needs a CUDA GPU")


def test_list_shows_every_shape_cheapest_first():
    proc = run("cudnn_rnn.bench", "--list")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == len(benchdata.load_spec("bench").shapes)
    assert "LSTM/T50L1H4096B256" in lines[-1]
