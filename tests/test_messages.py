"""Messages that say what to do (issue 25): no driver, a Python without the packages, a
folder given for a file, a benchmark given to the probe's report, --list with --report, the
enum's end marker, the progress bar's count, the GPU suite without a GPU, committed records
and --overwrite, and where the precision table and reports go."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cudnn_rnn.bindings.enums import RNNAlgo
from cudnn_rnn.engine import gpu
from cudnn_rnn.matrix import runs
from cudnn_rnn.matrix.progress import Progress

from .test_cli import assert_one_line_exit_2, run
from .test_probe_cli import probe, records

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"


def test_without_a_driver_it_says_no_nvidia_driver_found():
    """This machine has no NVIDIA driver: no CUDA sentence about an insufficient driver."""
    if not gpu.driver_missing():
        pytest.skip("an NVIDIA driver is installed here")
    proc = run("cudnn_rnn.example", "20", "2", "512", "64", "0")
    assert_one_line_exit_2(proc, "no NVIDIA driver found")
    assert "insufficient" not in proc.stderr
    listed = probe(Path("/nonexistent-never-written"), "--list", "--cell", "GRU", "--dtype", "INT8")
    assert listed.returncode == 0
    for line in subprocess.run([sys.executable, "-m", "pytest", "--co", "-q",
                                "tests/test_messages.py"], cwd=ROOT, capture_output=True,
                               text=True).stdout.splitlines()[:3]:
        assert "insufficient" not in line and line.strip() != "CUDNN_RNN_NO_GPU="


def test_the_test_header_shows_no_empty_setting():
    proc = subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "tests/test_messages.py",
                           "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if k != "CUDNN_RNN_NO_GPU"})
    assert "CUDNN_RNN_NO_GPU=" not in proc.stdout and "insufficient" not in proc.stdout


@pytest.mark.parametrize("marks", ["gpu", "gpu and not timing", "gpu  and timing"])
def test_the_gpu_suite_without_a_gpu_fails_in_one_line(marks):
    """Whole, or in the two parts make test-gpu runs."""
    if gpu.available():
        pytest.skip("a GPU is here")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-m", marks, "-q",
                           "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    out = [x for x in (proc.stdout + proc.stderr).splitlines() if x.strip()]
    assert proc.returncode != 0 and len(out) == 1, out
    assert "the GPU suite needs a usable GPU" in out[0]


@pytest.mark.parametrize("module", ["cudnn_rnn.probe", "cudnn_rnn.report", "cudnn_rnn.tune",
                                    "cudnn_rnn.bench", "cudnn_rnn"])
def test_a_python_without_the_packages_says_what_to_install(module):
    """``python -S`` leaves site-packages out: numpy and tabulate are missing."""
    proc = subprocess.run([sys.executable, "-S", "-m", module, "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert_one_line_exit_2(proc, "lacks numpy and tabulate", ".venv", "pip install")


def test_list_with_report_is_refused(tmp_path):
    proc = probe(tmp_path / "o", "--list", "--report", "--cell", "GRU")
    assert_one_line_exit_2(proc, "--list", "--report")
    assert not (tmp_path / "o").exists()


def test_the_algorithm_end_marker_is_no_choice(tmp_path):
    assert RNNAlgo.COUNT not in RNNAlgo.choices() and len(RNNAlgo.choices()) == 4
    for value in ("COUNT", "CUDNN_RNN_ALGO_COUNT", "4"):
        with pytest.raises(ValueError) as info:
            RNNAlgo.parse(value)
        assert "COUNT" not in str(info.value).split("choose from")[1]
    proc = probe(tmp_path / "o", "--algo", "COUNT", "--list")
    assert_one_line_exit_2(proc, "STANDARD, PERSIST_STATIC, PERSIST_DYNAMIC, PERSIST_STATIC_SMALL_H")
    assert "COUNT)" not in proc.stderr and ", COUNT" not in proc.stderr
    proc = run("cudnn_rnn.example", "20", "2", "512", "64", "0", "--algo", "COUNT")
    assert_one_line_exit_2(proc, "unknown cudnnRNNAlgo_t value 'COUNT'")
    assert ", COUNT" not in proc.stderr


def test_the_progress_bar_counts_the_cells_that_will_run(tmp_path):
    bar = Progress(10, stream=open(os.devnull, "w"))
    bar.update("NOT_SUPPORTED")
    bar.leave_out(6)  # the variants of a refused cell never run
    assert bar.total == 4 and "1/4" in bar.line() and "other" not in bar.line()
    bounded = Progress(10, stream=open(os.devnull, "w"), undecided=8)
    bounded.update("OK")
    assert "1/<=10 " in bounded.line() and "ETA <=" in bounded.line()
    bounded.decide(5)  # these will run
    bounded.leave_out(3)  # these will not: the total is known now
    assert bounded.undecided == 0 and "1/7 " in bounded.line() and "<=" not in bounded.line()
    proc = probe(tmp_path, "--cell", "GRU", "--dtype", "INT8,FLOAT", "--math-type", "DEFAULT")
    assert proc.returncode == 0, proc.stderr
    recorded = len(records(tmp_path / "default.jsonl"))
    shown = re.findall(r"\] (\d+)/(?:<=)?(\d+) \|", proc.stderr)
    assert shown and shown[-1] == (str(recorded), str(recorded)), (shown, recorded)
    assert all(int(total) >= recorded for _, total in shown)
    assert not re.search(r"\] \d+/<=\d+ \|[^\n]*$", proc.stderr.strip())  # the end is exact
    bar_end = proc.stderr.splitlines()[-1]
    assert "desc OK" in bar_end and "SKIPPED" not in bar_end and "other" not in proc.stderr
    assert "recorded as SKIPPED and shown as passed the descriptor stages" in proc.stdout
    # the summary names a descriptor-only cell as the report does, not "SKIPPED"
    assert "passed the descriptor stages (device stages not run on this machine)" in proc.stdout
    assert not re.search(r"^SKIPPED\s+\d+$", proc.stdout, re.M)


def test_weights_given_as_a_directory_say_so(tmp_path):
    proc = run("cudnn_rnn.precision", "--weights", str(tmp_path), "--inputs",
               str(FIX / "torch-rnn" / "gru-inputs.npy"), "--out", str(tmp_path / "o"))
    assert_one_line_exit_2(proc, f"{tmp_path} is a directory", ".pt", ".safetensors", ".npz")
    proc = run("cudnn_rnn.precision", "--weights", str(FIX / "torch-rnn" / "gru.npz"),
               "--inputs", str(tmp_path), "--out", str(tmp_path / "o"))
    assert_one_line_exit_2(proc, f"{tmp_path} is a directory", ".npy")
    assert not (tmp_path / "o").exists()


def test_report_of_a_benchmark_points_to_bench_report(tmp_path):
    proc = run("cudnn_rnn.report", str(FIX / "bench-h200-919"), "--out", str(tmp_path / "o"))
    assert_one_line_exit_2(proc, "python -m cudnn_rnn.bench_report")
    proc = run("cudnn_rnn.report", str(FIX / "bench-h200-919" / "bench.jsonl"),
               "--out", str(tmp_path / "o"))
    assert_one_line_exit_2(proc, "python -m cudnn_rnn.bench_report")
    assert not (tmp_path / "o").exists()


def test_reports_of_two_runs_never_share_a_folder(tmp_path):
    home = {"CUDNN_RNN_HOME": str(tmp_path)}
    for source in ("h200-919", "h200-914", "h200-919"):
        assert run("cudnn_rnn.report", str(FIX / source), **home).returncode == 0
    folders = sorted(p.name for p in (tmp_path / "reports").iterdir())
    assert len(folders) == 2, folders  # the same run again replaces only its own report
    assert all(re.fullmatch(r"nvidia-h200-9\.1[49]\.0-default-[0-9a-f]{8}", f) for f in folders)
    both = tmp_path / "both"
    shutil.copytree(FIX / "h200-919", both)
    shutil.copy(FIX / "refused-h200-919" / "default.jsonl", both / "other.jsonl")
    assert run("cudnn_rnn.report", str(both), **home).returncode == 0
    assert any("-default+other-" in p.name for p in (tmp_path / "reports").iterdir())


def _checkout_copy(dst: Path) -> Path:
    """A copy of the checkout's code, specs and one committed run (results/no-gpu/9.28.0):
    a command run from it takes it for the checkout (its results/ the committed one), so a
    test of the guard of committed records can never reach the real ones."""
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for part in ("cudnn_rnn", "bindings", "probes"):
        shutil.copytree(ROOT / part, dst / part, ignore=ignore)
    shutil.copytree(ROOT / "results" / "no-gpu" / "9.28.0", dst / "results" / "no-gpu" / "9.28.0")
    return dst


def test_an_overwrite_of_committed_records_needs_force(tmp_path, monkeypatch):
    """The checkout's results/ holds committed runs: --overwrite alone is refused. Run from a
    copy of the checkout (the probe takes the copy's results/ for the committed one), so a
    broken guard overwrites only the copy."""
    checkout = _checkout_copy(tmp_path / "checkout")
    committed = checkout / "results" / "no-gpu" / "9.28.0"
    before = {p.name: p.read_bytes() for p in committed.iterdir()}
    proc = subprocess.run([sys.executable, "-m", "cudnn_rnn.probe", "--out", str(committed),
                           "--overwrite", "--cell", "GRU", "--dtype", "INT8"],
                          capture_output=True, text=True, timeout=120, cwd=checkout,
                          env=dict(os.environ, PYTHONPATH=str(checkout), CUDNN_RNN_NO_GPU="1"))
    assert_one_line_exit_2(proc, "holds committed records", "default.jsonl.gz", "--force")
    assert {p.name: p.read_bytes() for p in committed.iterdir() if p.name in before} == before
    assert set(p.name for p in committed.iterdir()) == set(before)  # not even a lock file
    real = ROOT / "results" / "no-gpu" / "9.28.0"  # this checkout's, read only
    assert runs.committed_records(real / "default.jsonl") == ["default.jsonl.gz"]
    assert runs.committed_records(real / "seed_int8.jsonl") == ["seed_int8.jsonl"]
    assert runs.committed_records(real / "bench.jsonl") == []  # none there to replace
    h200 = ROOT / "results" / "nvidia-h200" / "9.19.0"
    assert runs.committed_records(h200 / "default.jsonl") == ["default.jsonl.gz"]  # not bench's
    assert runs.committed_records(tmp_path / "default.jsonl") == []


def test_the_precision_tables_default_folder_is_a_run_folder(tmp_path, monkeypatch):
    from cudnn_rnn import precision
    monkeypatch.setenv("CUDNN_RNN_HOME", str(tmp_path))
    info = {"library": {"cudnn_version": "9.19.0", "library_path": "/x/libcudnn.so.9"},
            "device": {"gpu": "NVIDIA H200", "compute_capability": "9.0",
                       "driver_version": "580"}, "device_stages": True}
    job = {"spec": {"model": str(ROOT / "cudnn_rnn" / "data" / "charlm" / "lstm.npz")},
           "reps": 20, "budget_s": 0.1, "methods": ("max",)}
    folder = precision._folder(None, info, job, "")
    assert folder.parent.parent == tmp_path / "runs" and folder.name.startswith("precision-")
    assert precision._folder(None, info, dict(job, reps=5), "") != folder
    assert precision._folder(None, info, job, "gru") != folder
    given = precision._folder(tmp_path / "out", info, job, "")
    assert given == tmp_path / "out" / "nvidia-h200" / "9.19.0"
    assert not (ROOT / "results" / "nvidia-h200" / "9.19.0" / ".writer.lock").exists()


def test_the_makefile_says_where_make_precision_writes():
    text = (ROOT / "Makefile").read_text()
    rule = text.split("\nprecision:")[1].split("\n\n")[0]
    assert rule.count("--out results") == 2
    assert "python -m cudnn_rnn.precision` alone" in text
    doc = json.dumps(text)  # the README names the make target that writes results/
    assert doc and "make precision" in (ROOT / "README.md").read_text()


def test_the_committed_runs_and_the_full_run_report_into_two_folders():
    """``report results/nvidia-h200/9.19.0`` and ``make report
    RESULTS=results/nvidia-h200/9.19.0/full``: two runs, two folders."""
    from cudnn_rnn.reporting import load
    from cudnn_rnn.reporting.matrix import run_name
    seed = run_name(load.load(ROOT / "results" / "nvidia-h200" / "9.19.0"))
    full = run_name(load.load(ROOT / "results" / "nvidia-h200" / "9.19.0" / "full"))
    assert seed.startswith("nvidia-h200-9.19.0-default+seed_int8-")
    assert full.startswith("nvidia-h200-9.19.0-full-") and seed != full


def test_a_foreign_stream_reaches_cupy_through_the_stream_protocol_or_external_stream():
    from types import SimpleNamespace
    from cudnn_rnn.engine.gpu import external_stream
    seen = []
    new = SimpleNamespace(cuda=SimpleNamespace(Stream=SimpleNamespace(
        from_external=lambda obj: seen.append(obj.__cuda_stream__()) or "wrapped")))
    assert external_stream(new, 0xBEEF, 3) == "wrapped"
    assert seen == [(0, 0xBEEF)]
    old = SimpleNamespace(cuda=SimpleNamespace(ExternalStream=lambda ptr, dev: ("ext", ptr, dev)))
    assert external_stream(old, 0xBEEF, 3) == ("ext", 0xBEEF, 3)


def test_a_probe_run_given_to_the_benchmarks_report_names_the_probes_report():
    proc = run("cudnn_rnn.bench_report", str(FIX / "cpu-928"))
    assert_one_line_exit_2(proc, "holds probe results, not a benchmark",
                           f"python -m cudnn_rnn.report {FIX / 'cpu-928'}")


def test_a_default_folder_that_cannot_be_made_names_where_it_was_put(tmp_path):
    """No --out given: the message names the variable that moved the default, not --out."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for command, args in (("cudnn_rnn.report", [str(FIX / "cpu-928")]),
                          ("cudnn_rnn.report", ["--diff", str(FIX / "h200-919"),
                                                str(FIX / "h200-914")])):
        proc = run(command, *args, CUDNN_RNN_HOME=str(blocker))
        assert_one_line_exit_2(proc, f"the report folder (under CUDNN_RNN_HOME={blocker})",
                               "a part of that path is a file")
        assert "--out" not in proc.stderr.split("(see:")[0]


def test_training_without_a_gpu_names_its_job_and_writes_nothing(tmp_path):
    """As the example and the tuner do (tests/test_cli.py, tests/test_tune.py)."""
    out = tmp_path / "out"
    proc = run("cudnn_rnn.train", "--out", str(out), CUDNN_RNN_NO_GPU="1")
    assert_one_line_exit_2(proc, "training needs a CUDA GPU: CUDNN_RNN_NO_GPU is set")
    assert not out.exists()


@pytest.mark.parametrize("tool,args", [("torch_targets.py", ["--shapes", "seed"]),
                                       ("torch_fixture.py", ["--help"])])
def test_the_torch_tools_without_pytorch_say_so_in_one_line(tool, args):
    """The tools docs/torch.md prints, on a Python without PyTorch: what to install, exit 2,
    not a ModuleNotFoundError traceback."""
    import importlib.util
    if importlib.util.find_spec("torch") is not None:
        pytest.skip("PyTorch is installed here")
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / tool), *args],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert_one_line_exit_2(proc, "needs PyTorch", "pip install 'cudnn-rnn[torch]'")


def test_a_filter_given_twice_is_refused_not_half_kept(tmp_path):
    proc = probe(tmp_path, "--cell", "LSTM", "--cell", "GRU", "--list")
    assert_one_line_exit_2(proc, "--cell given twice: give one comma-separated list")


@pytest.mark.parametrize("how", ["--cudnn", "CUDNN_LIBRARY"])
def test_a_missing_library_the_user_named_says_to_name_another(tmp_path, how):
    """The install hint (pip install ...) is for a library not found; a library the user
    named that is not there gets what to name instead."""
    missing = str(tmp_path / "nowhere" / "libcudnn.so.9")
    proc = probe(tmp_path / "o", "--cudnn", missing) if how == "--cudnn" else \
        probe(tmp_path / "o", CUDNN_LIBRARY=missing)
    assert_one_line_exit_2(proc, f"{missing} (", "does not exist",
                           "name a libcudnn.so.9 that exists and loads (--cudnn or CUDNN_LIBRARY)")
    assert "pip install" not in proc.stderr and "(explicit)" not in proc.stderr


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_every_test_phase_time_is_written_as_it_ends(tmp_path, workers):
    """CUDNN_RNN_TEST_TIMES=FILE: a JSON line for each phase of each test, once (under
    xdist the controlling process writes the workers' reports), with its outcome."""
    times = tmp_path / "times.jsonl"
    chosen = ["tests/test_lowbit_engine.py::test_float_operands_round_to_their_type",
              "tests/test_messages.py::test_the_test_header_shows_no_empty_setting"]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *workers, *chosen], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, CUDNN_RNN_TEST_TIMES=str(times)))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = [json.loads(x) for x in times.read_text().splitlines()]
    tests = {x["test"] for x in lines}
    assert len(tests) == 5 and any("header" in t for t in tests)  # 4 precisions + 1
    assert sorted((x["test"], x["phase"]) for x in lines) == sorted(
        (t, p) for t in tests for p in ("setup", "call", "teardown"))
    assert all(x["outcome"] == "passed" and x["s"] >= 0 for x in lines)
    header = [x["s"] for x in lines if "header" in x["test"] and x["phase"] == "call"]
    assert header[0] > 0.1  # that test runs pytest in a subprocess: its time, not zero
