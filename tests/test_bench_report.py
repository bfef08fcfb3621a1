"""The benchmark report from a recorded real H200 run (no GPU needed)."""
import json
import shutil
from pathlib import Path

import pytest

from cudnn_rnn.matrix import bench as benchdata
from cudnn_rnn.matrix import overhead_file
from cudnn_rnn.reporting import bench as report, charts
from cudnn_rnn.matrix.record import read_records

from . import committed
from .test_cli import assert_one_line_exit_2, run

FIX = Path(__file__).parent / "fixtures" / "bench-h200-919"


@pytest.fixture(scope="module")
def recorded():
    records, _ = read_records(FIX / "bench.jsonl", benchdata.BENCH_RECORD, "benchmark record")
    runs = benchdata.read_run_file(FIX / "bench.run.json")["runs"]
    overhead = overhead_file.read_overhead(FIX / "overhead.json")
    return records, runs, overhead


def ms(c):
    return c["timing"]["median_ms"]


def test_each_row_is_the_fastest_verified_candidate_and_ratios_of_its_medians(recorded):
    records, runs, _ = recorded
    for rec in records:
        row = report.shape_row(rec, runs[0])
        ok = [c for c in rec["candidates"] if c["outcome"] == "OK" and c["timing"]]
        assert row["winner"] is not None and ms(row["winner"]) == min(ms(c) for c in ok)
        assert row["speedup_fp32"] == pytest.approx(ms(row["fp32"]) / ms(row["winner"]))
        assert row["fp32"]["config"] == "FLOAT/FLOAT/FMA/STANDARD"
        assert row["tf32"]["config"].startswith("FLOAT/FLOAT/")
        assert row["tf32"]["config"].split("/")[2] in ("DEFAULT", "TENSOR_OP_ALLOW_CONVERSION")
        assert row["speedup_torch"] == pytest.approx(rec["torch"]["ms"] / ms(row["winner"]))
        dense = runs[0]["gemm"]["rates"]["float16 8192x8192x8192"]["tflops"]
        assert row["gemm_fraction"] == pytest.approx(row["winner"]["tflops"] / dense)
        assert all(f["outcome"] != "OK" for f in row["refused"])


def test_targets_follow_from_the_rows(recorded):
    records, runs, overhead = recorded
    s = report.summarise(records, runs, overhead)
    seed = next(r for r in s["shapes"] if r["id"] == "LSTM/T20L2H512B64")
    t = s["targets"]
    assert t["seed_vs_torch"]["measured"] == seed["speedup_torch"]
    assert t["seed_vs_torch"]["met"] == (seed["speedup_torch"] >= 3.0)
    fp16 = [r["fp16_gemm_fraction"] for r in s["shapes"] if benchdata.fp16_target(r["shape"])]
    assert t["fp16_gemm_fraction"]["shapes"] == 2 and t["fp16_gemm_fraction"]["min"] == min(fp16)
    assert t["fp16_gemm_fraction"]["met"] == (min(fp16) >= 0.5)
    ratios = [r["ratio"] for r in overhead["rows"] if "ratio" in r]
    assert t["overhead"]["worst"] == max(ratios) and t["overhead"]["met"] == (max(ratios) <= 1.03)
    assert len(s["not_run"]) == 44 - len(records)  # the fixture keeps 6 of the run's 44 shapes


def test_markdown_carries_provenance_targets_and_every_shape(recorded):
    records, runs, overhead = recorded
    md = report.markdown(report.summarise(records, runs, overhead))
    p = runs[0]["provenance"]
    for needle in (p["gpu"], p["commit"], p["library_path"], p["driver_version"], "## Targets",
                   "## Overhead check", "## Ceilings measured in each run", "## Not run"):
        assert needle in md
    for rec in records:
        s = rec["shape"]
        assert f"| {s['cell']} {s['seq_length']}, {s['layers']}, {s['hidden']}, {s['batch']} |" in md
    if "not met" in md.split("## DeepBench")[0].split("FP16 LSTM forward")[1].splitlines()[0]:
        assert "Below 50%" in md or "stay below 50%" in md  # a missed target says why


def test_cli_rebuilds_the_report_without_touching_the_run(tmp_path):
    d = tmp_path / "r"
    shutil.copytree(FIX, d)
    before = {f.name: f.read_bytes() for f in d.iterdir()}
    proc = run("cudnn_rnn.bench_report", str(d), "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    md = (tmp_path / "out" / "bench.md").read_text()
    assert md.startswith("# Benchmark: NVIDIA H200, cuDNN 9.19.0")
    assert json.loads((tmp_path / "out" / "bench.json").read_text())["schema"] == report.SCHEMA
    assert {f.name: f.read_bytes() for f in d.iterdir()} == before  # reading never writes
    home = tmp_path / "home"
    proc = run("cudnn_rnn.bench_report", str(d), CUDNN_RNN_HOME=str(home))
    assert proc.returncode == 0, proc.stderr
    written = list((home / "reports").glob("nvidia-h200-9.19.0-bench-*/bench.md"))
    assert len(written) == 1 and written[0].read_text() == md  # the folder names the run
    assert {f.name: f.read_bytes() for f in d.iterdir()} == before
    assert_one_line_exit_2(run("cudnn_rnn.bench_report", str(tmp_path)), "no bench.jsonl")


@pytest.mark.parametrize("torch_config, says", [
    ("winner", "(our winner); here that configuration took"),
    ("other", "(not our winner); here that configuration took"),
    ("HALF/HALF/FMA/PERSIST_DYNAMIC", "not among this benchmark's verified candidates"),
    ("not observed: PyTorch is not importable", "was not observed: PyTorch is not importable")])
def test_where_pytorchs_best_is_faster_the_report_names_its_cudnn_configuration(
        recorded, torch_config, says):
    records, runs, _ = recorded
    rec = json.loads(json.dumps(records[0]))
    ok = sorted((c for c in rec["candidates"] if c["outcome"] == "OK" and c["timing"]), key=ms)
    win, other = ok[0], ok[1]
    label = {"winner": win["config"], "other": other["config"]}.get(torch_config, torch_config)
    dtype = "float16"
    # this recorded run timed plain calls only: PyTorch's eager variants are what compares
    rec["torch"] = dict(rec["torch"], variants={f"{dtype} eager": {"ms": ms(win) / 2}},
                        cudnn={dtype: label})
    row = report.shape_row(rec, runs[0])
    b = row["behind_torch_best"]
    assert b["torch_config"] == label and b["torch_ms"] == pytest.approx(ms(win) / 2)
    same = {"winner": win, "other": other}.get(torch_config)
    assert b["same_config_ms"] == (ms(same) if same else None)
    summary = report.summarise([rec], runs)
    assert summary["targets"]["winner_vs_torch_best"]["met"] is False
    md = report.markdown(summary)
    section = md.split("## Where PyTorch's best is faster")[1].split("\n## ")[0]
    assert says in section
    # PyTorch slower than our winner: nothing to explain, and the target is met there
    rec["torch"]["variants"][f"{dtype} eager"]["ms"] = ms(win) * 2
    assert report.shape_row(rec, runs[0])["behind_torch_best"] is None
    assert report.summarise([rec], runs)["targets"]["winner_vs_torch_best"]["met"] is True


@pytest.mark.parametrize("run", ["9.19.0", "9.19.0/lowbit", "9.19.0/persistent"])
def test_the_committed_benchmark_reports_regenerate_as_committed(tmp_path, run):
    """Every line of bench.md (bench_markdown's sections, the 8-bit one, the floor's) and of
    bench.json from the committed records, as committed; the chart beside it is there and
    linked (its pixels are matplotlib's: tests/committed.py)."""
    d = Path(__file__).resolve().parent.parent / "results" / "nvidia-h200" / run
    md = (d / "bench.md").read_text()
    assert report.write(d, tmp_path).read_text() == committed.markdown_as_here(md)
    assert json.loads((tmp_path / "bench.json").read_text()) == json.loads(
        (d / "bench.json").read_text())
    assert "](bench.png)" in md and (d / "bench.png").is_file()
    if charts.available():
        assert committed.png_size((tmp_path / "bench.png").read_bytes()) == committed.png_size(
            (d / "bench.png").read_bytes())


def test_the_fp16_explanation_divides_each_step_rate_by_its_own_shapes_dense_rate():
    """A shape below the FP16 target without a GEMM model beside one with a model (each
    shape's dense rate is its own run's): the step GEMM's share is the modelled shape's."""
    from cudnn_rnn.reporting.bench_markdown import _why_below
    shape = {"cell": "LSTM", "layers": 2, "hidden": 2048, "batch": 128}
    rows = [{"shape": dict(shape, seq_length=25), "fp16_gemm_fraction": 0.3,
             "gemm_model": None, "dense_fp16_tflops": 800.0},
            {"shape": dict(shape, seq_length=50), "fp16_gemm_fraction": 0.4,
             "dense_fp16_tflops": 500.0,
             "gemm_model": {"step_gemm_tflops": 100.0, "recurrent_share": 0.8,
                            "fp16_over_model": 1.2}}]
    text = _why_below(rows)
    assert "Why 2048/128/25, 2048/128/50 (hidden/batch/seq) stay below 50%" in text
    assert "one step's GEMM reaches 20% of the dense rate" in text
    assert "the steps are 80% of the GEMM-only model's time. cuDNN runs 1.20×" in text


PERSISTENT = Path(__file__).resolve().parent.parent / "results" / "nvidia-h200" / "9.19.0" / \
    "persistent"  # a run with every section: PyTorch's variants, GEMM rates, the floor


def _broken(tmp_path, base, change):
    """The recorded run ``base`` copied with its files changed: ``change(records, run_file,
    overhead)`` edits the parsed files in place (overhead None where the run has none)."""
    d = tmp_path / change.__name__
    shutil.copytree(base, d, ignore=lambda folder, names: [n for n in names
                                                           if (Path(folder) / n).is_dir()])
    records = [json.loads(line) for line in (d / "bench.jsonl").read_text().splitlines()]
    run_file = json.loads((d / "bench.run.json").read_text())
    has_overhead = (d / "overhead.json").is_file()
    overhead = json.loads((d / "overhead.json").read_text()) if has_overhead else None
    change(records, run_file, overhead)
    (d / "bench.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (d / "bench.run.json").write_text(json.dumps(run_file))
    if has_overhead:
        (d / "overhead.json").write_text(json.dumps(overhead))
    return d


def _variant(records, run_file, overhead):
    variants = records[0]["torch"]["variants"]
    variants[next(iter(variants))] = "x"


def _rate(records, run_file, overhead):
    rates = run_file["runs"][0]["engine_gemm"]["rates"]
    rates[next(iter(rates))] = "fast"


def _floor(records, run_file, overhead):
    floor = run_file["runs"][0]["engine_floor"]["per_round_us"]
    floor.update({k: "slow" for k in floor})


def _floor_spread(records, run_file, overhead):
    run_file["runs"][0]["engine_floor"]["per_round_spread_us"] = {"0": [2.0, 1.0]}


def _captured(records, run_file, overhead):
    rows = [r for r in overhead["rows"] if (r.get("captured") or {}).get("ratio") is not None]
    assert rows
    for row in rows:
        row["captured"].pop("ratio_max")


@pytest.mark.parametrize("base,change,needle", [
    (PERSISTENT, _variant, "torch.variants.bfloat16 eager: expected an object"),
    (PERSISTENT, _rate, "engine_gemm.rates.bf16 1280x1536x512: expected an object"),
    (PERSISTENT, _floor, "engine_floor.per_round_us.0: expected a positive"),
    (PERSISTENT, _floor_spread, "engine_floor.per_round_spread_us.0: expected [first quartile"),
    (PERSISTENT.parent, _captured, "captured: 'ratio_min' without the other end")])
def test_a_recorded_value_of_the_wrong_form_is_one_line_and_nothing_is_written(tmp_path, base,
                                                                                change, needle):
    d = _broken(tmp_path, base, change)
    out = tmp_path / "out"
    out.mkdir()
    proc = run("cudnn_rnn.bench_report", str(d), "--out", str(out))
    assert_one_line_exit_2(proc, needle)
    assert not any(out.iterdir())


def _refused_forms(records, run_file, overhead):
    """What a run writes where PyTorch, cuBLASLt or a job refuses, and one process's ratio."""
    variants = records[0]["torch"]["variants"]
    variants[next(iter(variants))] = {"skipped": "capture failed: RuntimeError: x"}
    if "engine_gemm" in run_file["runs"][0]:
        rates = run_file["runs"][0]["engine_gemm"]["rates"]
        rates[next(iter(rates))] = {"refused": "cublasLtMatmulAlgoGetHeuristic: NOT_SUPPORTED"}
    else:
        run_file["runs"][0]["engine_gemm"] = {"skipped": "engine_rates did not finish"}
    run_file["runs"][0]["engine_floor"] = {"skipped": "barrier_read did not finish"}
    if overhead:
        for row in overhead["rows"]:
            if (row.get("captured") or {}).get("ratio") is not None:
                row["captured"] = {"ours_ms": 0.5, "torch_ms": 0.6, "ratio": 0.8333}


@pytest.mark.parametrize("base", [PERSISTENT, PERSISTENT.parent])
def test_what_a_run_records_of_a_refusal_is_read_and_reported(tmp_path, base):
    d = _broken(tmp_path, base, _refused_forms)
    proc = run("cudnn_rnn.bench_report", str(d), "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr


def test_a_run_without_records_is_refused(tmp_path):
    d = tmp_path / "empty"
    shutil.copytree(FIX, d)
    (d / "bench.jsonl").write_text("")
    out = tmp_path / "out"
    out.mkdir()
    assert_one_line_exit_2(run("cudnn_rnn.bench_report", str(d), "--out", str(out)),
                           "holds no records")
    assert not any(out.iterdir())


def test_a_report_file_that_is_a_folder_is_one_line_and_leaves_no_temporary(tmp_path):
    out = tmp_path / "out"
    (out / "bench.json").mkdir(parents=True)
    proc = run("cudnn_rnn.bench_report", str(FIX), "--out", str(out))
    assert_one_line_exit_2(proc, "cannot write the report")
    assert sorted(p.name for p in out.iterdir()) == ["bench.json"]


def test_each_runs_provenance_names_the_pytorch_its_records_were_compared_with(recorded):
    """bench.md's provenance names, per run, the PyTorch of that run's records (a second
    session with another PyTorch is named as such; a session without PyTorch, nothing)."""
    from cudnn_rnn.reporting import bench_markdown
    records, runs, overhead = recorded
    first = records[0]["session"]
    other = dict(records[-1], session="other", torch=dict(records[-1]["torch"], torch="9.9.9"))
    bare = {k: v for k, v in records[-1].items() if k != "torch"} | {"session": "bare"}
    found = report.pytorch_versions(records + [other, bare])
    want = {f"{r['torch']['torch']} (CUDA {r['torch']['torch_cuda']}, cuDNN "
            f"{r['torch']['torch_cudnn']})" for r in records if r["session"] == first}
    assert set(found[first]) == want and found["other"][0].startswith("9.9.9 (")
    assert "bare" not in found
    all_runs = runs + [dict(runs[0], session="other"), dict(runs[0], session="bare")]
    text = bench_markdown.markdown(report.summarise(records + [other, bare], all_runs, overhead))
    lines = {s: next(line for line in text.splitlines() if line.startswith(f"- run `{s}`"))
             for s in (first, "other", "bare")}
    assert f"PyTorch {found[first][0]}, commit" in lines[first]
    assert "PyTorch 9.9.9 (" in lines["other"] and "PyTorch" not in lines["bare"]


def test_an_out_folder_of_another_benchmark_is_refused_and_kept(tmp_path):
    """bench_report --out: a folder holding another benchmark's records, or its report, is
    refused in one line and left as it was; the benchmark's own folder (make rerender)
    and its own earlier report take it."""
    root = Path(__file__).resolve().parent.parent / "results" / "nvidia-h200" / "9.19.0"
    lowbit, persistent = root / "lowbit", root / "persistent"
    beside = tmp_path / "beside"
    shutil.copytree(lowbit, beside)
    before = {p.name: p.read_bytes() for p in beside.iterdir()}
    proc = run("cudnn_rnn.bench_report", str(persistent), "--out", str(beside))
    assert_one_line_exit_2(proc, f"--out {beside} holds another benchmark's records")
    assert {p.name: p.read_bytes() for p in beside.iterdir()} == before
    out = tmp_path / "out"
    assert run("cudnn_rnn.bench_report", str(persistent), "--out", str(out)).returncode == 0
    kept = (out / "bench.md").read_bytes()
    proc = run("cudnn_rnn.bench_report", str(lowbit), "--out", str(out))
    assert_one_line_exit_2(proc, f"--out {out} holds the report of another benchmark")
    assert (out / "bench.md").read_bytes() == kept
    assert run("cudnn_rnn.bench_report", str(persistent), "--out", str(out)).returncode == 0
    assert run("cudnn_rnn.bench_report", str(beside), "--out", str(beside)).returncode == 0
    # a benchmark run again from scratch (--overwrite) and cut before its report: the old
    # report in its own folder lists sessions it no longer has, and is still its own
    bench = json.loads((beside / "bench.json").read_text())
    bench["runs"] = [dict(r, session="an-earlier-run") for r in bench["runs"]]
    (beside / "bench.json").write_text(json.dumps(bench))
    assert run("cudnn_rnn.bench_report", str(beside), "--out", str(beside)).returncode == 0
