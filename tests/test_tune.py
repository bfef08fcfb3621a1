"""The tuner's search space, ranking and output, from recorded real runs (no GPU needed)."""
from pathlib import Path

import pytest

from cudnn_rnn.bindings.enums import DataType, MathType, RNNMode
from cudnn_rnn import tune
from cudnn_rnn.matrix import baseline, families
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.matrix.record import read_records
from cudnn_rnn.reporting import load
from cudnn_rnn.compare.pytorch import time_torch

from .test_cli import assert_one_line_exit_2, run
from .test_report import FIX


def test_search_space_per_family():
    sizes = {f: len(tune.search_space(f)) for f in tune.FAMILIES}
    assert sizes == {"fp32": 4, "tf32": 12, "fp16": 32, "bf16": 16, "any": 64, "int8": 8,
                     "fp8": 4}
    assert {m for _, _, m, _ in tune.search_space("fp32")} == {MathType.FMA_MATH}
    assert {d for d, _, _, _ in tune.search_space("bf16")} == {DataType.BFLOAT16}
    assert {p for _, p, _, _ in tune.search_space("fp16")} == {DataType.FLOAT, DataType.HALF}
    assert len(set(tune.search_space("any"))) == 64
    assert {a for *_, a in tune.search_space("tf32")} == set(families.ALGOS)


def test_candidates_start_with_the_fp32_baseline():
    shape = RNNConfig(mode=RNNMode.LSTM)
    cells = tune.candidate_cells(shape, "fp16")
    first = cells[0].config
    assert (first.data_type, first.math_prec, first.math_type, first.algo) == baseline.BASELINE
    assert cells[0].implicit  # fp16 does not contain it: timed only as the reference point
    assert len(cells) == 33
    assert not tune.candidate_cells(shape, "fp32")[0].implicit


@pytest.fixture(scope="module")
def lstm_records():
    recs = [r for r in load.load(FIX / "h200-919").records if r["cell"] == "LSTM"
            and load.is_sample_shape(r)]
    assert any(r["outcome"] == "OK" for r in recs)
    return recs


@pytest.mark.parametrize("training", [False, True])
def test_ranking_and_table_from_a_recorded_run(lstm_records, training):
    s = tune.summarise(lstm_records, training)
    ranked = s["ranked"]
    assert ranked and s["winner"] == ranked[0]
    times = [r["ms"] for r in ranked]
    assert times == sorted(times)
    assert all(r["max_error"] is not None for r in ranked)  # only verified cells are ranked
    base = next(r for r in ranked if r["config"] == "FLOAT/FLOAT/FMA/STANDARD")
    assert base["speedup_fp32"] == pytest.approx(1.0)
    # the winner, recomputed from the raw records: the least time of any verified cell
    kinds = tune.TRAINING_KINDS if training else ("forward_inference",)
    times = {r["id"]: sum(r["timings"][k]["median_ms"] for k in kinds)
             for r in lstm_records if r["outcome"] == "OK" and r.get("timings")}
    fastest = min(times, key=times.get)
    assert s["winner"]["id"] == fastest and s["winner"]["ms"] == pytest.approx(times[fastest])
    base_id = next(i for i in times if i.startswith("FLOAT/FLOAT/FMA/STANDARD/"))
    assert s["winner"]["speedup_fp32"] == pytest.approx(times[base_id] / times[fastest])
    assert fastest != base_id  # on the H200 FP16 and TF32 configurations beat true FP32 here
    refused = {f["outcome"] for f in s["not_verified_or_refused"]}
    assert refused and "OK" not in refused
    text = tune.table(s)
    assert ranked[0]["config"] in text.splitlines()[2]


def test_torch_speedup_is_its_time_over_ours(lstm_records):
    s = tune.summarise(lstm_records, False, {"ms": 2.0})
    for r in s["ranked"]:
        assert r["speedup_torch"] == pytest.approx(2.0 / r["ms"])
        assert r["speedup_torch_best"] is None  # no variants were timed


def test_speedup_over_pytorchs_best_compares_like_with_like(lstm_records, captured_records):
    variants = {"float16 graph": {"ms": 0.25}, "bfloat16 graph": {"ms": 0.3},
                "float16 eager": {"ms": 0.6}, "float32 eager": {"ms": 2.0}}
    torch = {"ms": 2.0, "variants": variants, "best": {"variant": "float16 graph", "ms": 0.25}}
    # a run timed by plain calls only: PyTorch's fastest eager variant over our plain calls
    s = tune.summarise(lstm_records, False, torch)
    for r in s["ranked"]:
        assert r["basis"] == "plain" and r["torch_best_variant"] == "float16 eager"
        assert r["speedup_torch_best"] == pytest.approx(0.6 / r["plain_ms"])
    # a captured run: its fastest graph-captured variant over our replays
    s = tune.summarise(captured_records, False, torch)
    for r in s["ranked"]:
        assert r["basis"] == "graph" and r["torch_best_variant"] == "float16 graph"
        assert r["speedup_torch_best"] == pytest.approx(0.25 / r["ms"])
    assert "x torch best" in tune.table(s).splitlines()[0]


@pytest.fixture(scope="module")
def captured_records():
    recs, _ = read_records(Path(__file__).parent / "fixtures" / "graphs-h200-919"
                           / "default.jsonl")
    return [r for r in recs if r["cell"] == "LSTM"]


def test_torch_comparison_is_skipped_with_a_reason_when_unavailable():
    try:
        import torch  # noqa: F401
        pytest.skip("PyTorch is installed here; the skip path is for machines without it")
    except ImportError:
        pass
    result = time_torch("LSTM", 2, 1, 8, 2, 8, False, False, reps=1)
    assert "skipped" in result and "PyTorch" in result["skipped"]


@pytest.mark.parametrize("args,needle", [
    (("--hidden", "512", "--batch", "64"), "required"),
    (("--cell", "LSTMX", "--hidden", "512", "--batch", "64"), "unknown cudnnRNNMode_t"),
    (("--cell", "LSTM", "--hidden", "0", "--batch", "64"), "positive integer"),
    (("--cell", "LSTM", "--hidden", "512", "--batch", "64", "--precision", "fp4"), "invalid choice"),
    (("--cell", "LSTM", "--hidden", "512", "--batch", "64", "--budget", "0"),
     "argument --budget: expected a positive, finite number"),
    (("--cell", "LSTM", "--hidden", "512", "--batch", "64", "--budget", "nan"), "--budget"),
    (("--cell", "LSTM", "--hidden", "512", "--batch", "64", "--timeout", "-1"), "--timeout"),
    (("--cell", "LSTM", "--hidden", str(2 ** 32 + 512), "--batch", "64"),
     "hidden_size = 4294967808 does not fit the C int"),
])
def test_bad_arguments(args, needle):
    assert_one_line_exit_2(run("cudnn_rnn.tune", *args), needle)


def test_no_gpu_is_one_line(tmp_path):
    proc = run("cudnn_rnn.tune", "--cell", "LSTM", "--hidden", "64", "--batch", "8",
               CUDNN_RNN_NO_GPU="1")
    assert_one_line_exit_2(proc, "the tuner needs a CUDA GPU: CUDNN_RNN_NO_GPU is set")


def _slower(records, factor):
    """The same run as another process would record it, every timing ``factor`` times longer."""
    import copy
    out = copy.deepcopy(records)
    for r in out:
        for kinds in (r.get("timings"), r.get("graph_timings")):
            for t in (kinds or {}).values():
                t["median_ms"] *= factor
    return out


def test_processes_merge_to_medians_and_keep_ratios_measured_in_each(lstm_records):
    torch = [{"ms": 2.0, "variants": {"float32 eager": {"ms": 2.0}, "float16 graph": {"ms": 0.3}},
              "best": {"variant": "float16 graph", "ms": 0.3}}]
    runs = [tune.summarise(_slower(lstm_records, f), False, dict(torch[0])) for f in (1, 2, 4)]
    merged = tune.merge(runs)
    assert merged["processes"] == 3
    one = {r["id"]: r for r in runs[0]["ranked"]}
    for r in merged["ranked"]:
        assert r["ms"] == pytest.approx(2 * one[r["id"]]["ms"])  # the median process
        assert r["spread"]["ms"]["min"] == pytest.approx(one[r["id"]]["ms"])
        assert r["spread"]["ms"]["max"] == pytest.approx(4 * one[r["id"]]["ms"])
        # the FP32 ratio was the same in every process: its median is that ratio
        assert r["speedup_fp32"] == pytest.approx(one[r["id"]]["speedup_fp32"])
    assert [r["ms"] for r in merged["ranked"]] == sorted(r["ms"] for r in merged["ranked"])
    assert merged["torch"]["best"] == {"variant": "float16 graph", "ms": 0.3}
    text = tune.table(merged)
    assert "-" in text.splitlines()[2]  # a range is shown beside the median
    assert "float16 graph (best)" in tune.torch_table(merged["torch"])


def test_pytorchs_variants_merge_with_their_range_over_processes():
    runs = [{"ms": ms, "variants": {"float32 eager": {"ms": ms}, "float16 graph": {"ms": ms / 4}}}
            for ms in (1.0, 1.2, 1.6)]
    merged = tune._merge_torch(runs)
    assert merged["ms"] == pytest.approx(1.2)
    assert merged["spread"]["ms"] == {"median": 1.2, "min": 1.0, "max": 1.6}
    assert merged["variants"]["float16 graph"]["spread"]["ms"]["max"] == pytest.approx(0.4)
    text = tune.torch_table(merged)
    assert "0.3000 (0.2500-0.4000)" in text and "1.2000 (1.0000-1.6000)" in text


def test_a_candidate_missing_from_one_process_is_not_ranked(lstm_records):
    first = tune.summarise(lstm_records, False)
    dropped = first["ranked"][0]["id"]
    second = tune.summarise([r for r in lstm_records if r["id"] != dropped], False)
    merged = tune.merge([first, second])
    assert dropped not in {r["id"] for r in merged["ranked"]}
    assert merged["not_in_every_process"] == [dropped]
    assert merged["winner"]["id"] == first["ranked"][1]["id"]


def test_pytorch_variants_that_failed_in_one_process_say_why():
    ok = {"ms": 1.0, "variants": {"float32 eager": {"ms": 1.0}, "float16 graph": {"ms": 0.5}}}
    bad = {"ms": 1.2, "variants": {"float32 eager": {"ms": 1.2},
                                   "float16 graph": {"skipped": "capture failed: X"}}}
    merged = tune._merge_torch([ok, bad])
    assert merged["variants"]["float16 graph"] == {"skipped": "capture failed: X"}
    assert merged["best"]["variant"] == "float32 eager"
    assert merged["ms"] == pytest.approx(1.1)


def test_observed_configs_say_why_without_a_gpu_pytorch():
    from cudnn_rnn.compare import pytorch
    why = pytorch.unavailable()
    if why is None:
        pytest.skip("PyTorch with CUDA is available here; the GPU bench covers observation")
    shapes = [RNNConfig(mode=RNNMode.LSTM), RNNConfig(mode=RNNMode.GRU, hidden_size=64)]
    got = pytorch.observed_configs(shapes)
    assert [set(g) for g in got] == [set(pytorch.VARIANT_DTYPES)] * 2
    assert all(v == f"not observed: {why}" for g in got for v in g.values())


def test_settings_label_uses_the_records_names():
    from cudnn_rnn.compare.pytorch import settings_label
    assert settings_label({"dataType": "HALF", "mathPrec": "FLOAT", "mathMode": "TENSOR_OP_MATH",
                           "algo": "STANDARD"}) == "HALF/FLOAT/TENSOR_OP/STANDARD"
