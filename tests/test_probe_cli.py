"""The probe as a user runs it: real libcudnn, worker processes, kill and resume, bad input."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dataclasses import fields

from cudnn_rnn.matrix.record import SCHEMA, Record

RECORD_KEYS = tuple(f.name for f in fields(Record))

from .test_cli import assert_one_line_exit_2, run

ROOT = Path(__file__).resolve().parent.parent
FAST = ("--dtype", "FLOAT,HALF,INT8,BFLOAT16", "--cell", "LSTM", "--math-type", "DEFAULT",
        "--hidden", "512")


def records(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def probe(tmp_path, *args, **env):
    env.setdefault("CUDNN_RNN_NO_GPU", "1")
    return run("cudnn_rnn.probe", "--out", str(tmp_path), *args, **env)


def _around_nothing(r: dict) -> bool:
    """A cell of the support matrix's product itself, not one of its variants."""
    return (r["direction"], r["input_mode"], r["bias_mode"], r["proj_size"], r["layout"],
            r["shape"]["layers"], r.get("lengths") or "equal") == (
        "UNIDIRECTIONAL", "LINEAR_INPUT", "DOUBLE_BIAS", r["shape"]["hidden"],
        "SEQ_MAJOR_PACKED", 2, "equal")


def test_descriptor_outcomes_of_known_cells(tmp_path):
    proc = probe(tmp_path, *FAST)
    assert proc.returncode == 0, proc.stderr
    assert "descriptor stages only" in proc.stdout
    recs = {(r["data_type"], r["math_prec"], r["algo"]): r for r in records(tmp_path / "default.jsonl")
            if r["block"] == "support matrix" and _around_nothing(r)}
    int8 = recs[("INT8", "INT8", "STANDARD")]
    assert (int8["outcome"], int8["failed_call"], int8["status"]) == (
        "NOT_SUPPORTED", "cudnnSetRNNDescriptor_v8", "NOT_SUPPORTED")
    assert int8["status_code"] in (3000, 9)
    half = recs[("HALF", "HALF", "PERSIST_STATIC")]
    assert half["outcome"] == "NOT_SUPPORTED" and "CUDNN_DATA_HALF" in half["reason"]
    bf16 = recs[("BFLOAT16", "FLOAT", "STANDARD")]
    assert bf16["outcome"] == "SKIPPED" and bf16["failed_call"] is None
    assert bf16["stages"] == ["dropout", "rnn_descriptor", "data_descriptors", "state_descriptors"]
    assert "forward_training" in bf16["skipped_stages"] and bf16["skip_reason"]
    for r in recs.values():
        assert set(r) == set(RECORD_KEYS) and r["schema"] == SCHEMA, set(r) ^ set(RECORD_KEYS)
        assert r["cudnn_version"] and r["library_path"]
    meta = json.loads((tmp_path / "default.run.json").read_text())
    assert meta["complete"] and meta["provenance"]["cudnn_version"]
    assert meta["provenance"]["commit"]
    assert meta["provenance"]["command"] == " ".join(
        ["python -m cudnn_rnn.probe", "--out", str(tmp_path), *FAST])


def test_the_console_command_records_the_same_command_line(tmp_path):
    proc = run("cudnn_rnn", "probe", "--out", str(tmp_path), "--spec", "seed_int8", "--report",
               CUDNN_RNN_NO_GPU="1")
    assert proc.returncode == 0, proc.stderr
    line = f"python -m cudnn_rnn.probe --out {tmp_path} --spec seed_int8 --report"
    assert json.loads((tmp_path / "seed_int8.run.json").read_text())["provenance"]["command"] == line
    assert json.loads((tmp_path / "summary.json").read_text())["report"]["command"] == line


def test_list_runs_nothing(tmp_path):
    proc = probe(tmp_path, "--list", "--dtype", "INT8", "--cell", "GRU")
    assert proc.returncode == 0
    assert "INT8/INT8/" in proc.stdout and "baseline" in proc.stdout
    assert not (tmp_path / "default.jsonl").exists()


def test_a_crashing_worker_is_recorded_and_the_run_goes_on(tmp_path):
    proc = probe(tmp_path, *FAST, CUDNN_RNN_FAULT="crash:HALF/HALF/DEFAULT/PERSIST_STATIC/")
    assert proc.returncode == 0, proc.stderr
    recs = records(tmp_path / "default.jsonl")
    crashed = [r for r in recs if r["outcome"] == "CRASH"]
    # the cell and its variants (whose ids contain its text): each crash is recorded alone
    assert crashed == [r for r in recs if "HALF/HALF/DEFAULT/PERSIST_STATIC/" in r["id"]]
    assert all(r["status"] == "SIGSEGV" and "died" in r["reason"] for r in crashed)
    index = [r["id"] for r in recs].index(crashed[0]["id"])
    assert index < len(recs) - 1  # later cells still ran, in a fresh worker
    n = len(crashed)
    assert 2 <= len({r["worker_pid"] for r in recs if r.get("worker_pid")}) <= n + 1
    assert f"workers: {n + 1} started, {n} lost" in proc.stdout


def test_a_hanging_cell_times_out(tmp_path):
    proc = probe(tmp_path, "--dtype", "INT8", "--cell", "GRU", "--algo", "STANDARD",
                 "--math-type", "FMA", "--math-prec", "INT8,FLOAT", "--timeout", "3",
                 CUDNN_RNN_FAULT="hang:INT8/INT8/")
    assert proc.returncode == 0, proc.stderr
    outcomes = {r["math_prec"] + r["data_type"]: r["outcome"] for r in records(tmp_path / "default.jsonl")}
    assert outcomes["INT8INT8"] == "TIMEOUT"
    assert outcomes["FLOATINT8"] == "NOT_SUPPORTED"


def test_kill_minus_9_then_resume_gives_every_cell_once(tmp_path):
    out = tmp_path / "default.jsonl"
    env = dict(os.environ, PYTHONPATH=str(ROOT), CUDNN_RNN_NO_GPU="1", CUDNN_RNN_FAULT="slow:0.002")
    args = [sys.executable, "-m", "cudnn_rnn.probe", "--out", str(tmp_path), "--cell", "LSTM,GRU"]
    proc = subprocess.Popen(args, env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        if out.exists() and out.read_bytes().count(b"\n") >= 100:
            break
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)  # the parent and its worker, no clean-up
    proc.wait()
    partial = out.read_bytes().count(b"\n")
    # what an uninterrupted run records (variants of refused cells are never run)
    clean = tmp_path / "clean"
    assert probe(clean, "--cell", "LSTM,GRU").returncode == 0
    expected = [r["id"] for r in records(clean / "default.jsonl")]
    total = len(expected)
    assert 100 <= partial < total
    resumed = probe(tmp_path, "--cell", "LSTM,GRU", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    ids = [r["id"] for r in records(out)]
    assert len(ids) == total and set(ids) == set(expected)
    again = probe(tmp_path, "--cell", "LSTM,GRU", "--resume")
    assert "0 to run" in again.stdout
    assert len(records(out)) == total


@pytest.mark.parametrize("args,needle", [
    (("--dtype", "FLOAT,QUARTER"), "--dtype: unknown data_type value 'QUARTER'"),
    (("--dtype", ","), "--dtype needs at least one value"),  # the option as typed
    (("--math-prec", "HALF", "--layers", "two"), "--layers takes integers"),
    (("--spec", "nosuchspec"), "not found"),
    (("--reps", "0"), "--reps"),
    (("--reps", "many"), "argument --reps: expected a positive integer"),
    (("--resume", "--overwrite"), "exclude"),
    (("--force",), "--force goes with --overwrite"),  # alone it would do nothing
    (("--cudnn", ""), "--cudnn needs the path of a libcudnn"),
    (("--list", "--overwrite"), "--list runs nothing, so there is no run to --overwrite"),
    (("--hidden", "3"), "no cell of spec 'default' passes the filters: its cells' --hidden "
                        "values are "),
    (("--hidden", "-5"), "--hidden takes positive integers, got '-5'"),
    (("--cell", "GRU", "--dtype", "INT8", "--hidden", "125", "--batch", "64"),
     "passes the filters together (each alone keeps some cells): widen one"),
    (("--bogus",), "unrecognized"),
])
def test_bad_arguments(tmp_path, args, needle):
    assert_one_line_exit_2(probe(tmp_path, *args), needle)


def test_malformed_spec_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[[block]]\nname = "x"\ndata_type = ["HALF"]\nmath_prec = ["FLOAT"]\n'
                   'math_type = ["DEFAULT"]\nalgo = ["STANDARD"]\ncell = ["LSTMX"]\n'
                   'shapes = [{seq_length=1, layers=1, hidden=8, batch=8}]\n')
    assert_one_line_exit_2(probe(tmp_path, "--spec", str(bad)), "unknown cell value 'LSTMX'")


def test_running_again_continues_and_never_overwrites_silently(tmp_path):
    assert probe(tmp_path, "--dtype", "INT8", "--cell", "GRU").returncode == 0
    before = (tmp_path / "default.jsonl").read_bytes()
    again = probe(tmp_path, "--dtype", "INT8", "--cell", "GRU")
    assert again.returncode == 0 and " 0 to run" in again.stdout, again.stderr
    assert (tmp_path / "default.jsonl").read_bytes() == before
    first = before.splitlines(keepends=True)[0]
    (tmp_path / "default.jsonl").write_bytes(first + b"broken\n" + first)
    damaged = (tmp_path / "default.jsonl").read_bytes()
    assert_one_line_exit_2(probe(tmp_path, "--dtype", "INT8", "--cell", "GRU"),
                           "line 2 is not JSON", "--overwrite")
    assert (tmp_path / "default.jsonl").read_bytes() == damaged
    fresh = probe(tmp_path, "--dtype", "INT8", "--cell", "GRU", "--overwrite")
    assert fresh.returncode == 0 and (tmp_path / "default.jsonl").read_bytes() != damaged


def test_missing_library(tmp_path):
    out = tmp_path / "out"
    proc = probe(out, "--cudnn", str(tmp_path / "libcudnn.so.9"), "--dtype", "INT8")
    assert_one_line_exit_2(proc, "does not exist")
    assert not out.exists()  # a refused library leaves no empty output folder behind


@pytest.mark.parametrize("damage", ["alone", "truncated"])
def test_a_named_library_that_ends_its_loader_is_one_line_for_probe_and_example(
        tmp_path, lib, damage):
    """A libcudnn.so.9 copied without its sub-libraries aborts inside cuDNN, a truncated one
    faults on mapping (SIGABRT, SIGBUS): each command says so in one line, before any work."""
    import shutil
    copy = tmp_path / damage / "libcudnn.so.9"
    copy.parent.mkdir()
    shutil.copy(lib.path, copy)
    if damage == "truncated":
        copy.write_bytes(copy.read_bytes()[:4096])
    out = tmp_path / "out"
    assert_one_line_exit_2(probe(out, "--cudnn", str(copy), "--dtype", "INT8"),
                           f"loading {copy} ended the process", "sub-libraries")
    assert not out.exists()
    assert_one_line_exit_2(run("cudnn_rnn.example", "20", "2", "512", "64", "2", "--cudnn",
                               str(copy)), f"loading {copy} ended the process")


def ctrl_c_heard() -> None:
    """In the child before it starts: SIGINT as a terminal delivers it, even where this test
    runs with SIGINT ignored (a job started in the background of a shell without job control,
    e.g. ``nohup make test &``), a disposition children inherit and Python then keeps."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_stops_cleanly_and_keeps_what_finished(tmp_path):
    """Independent of the machine's load: the probe stays on a known cell (the worker hangs
    there) and the test waits for what the probe announces, its records, not for a time."""
    from cudnn_rnn import probe as command
    out = tmp_path / "default.jsonl"
    _spec, cells = command.plan(command.build_parser().parse_args(["--cell", "GRU"]))
    finished = 50  # the cells recorded before the one it stays on
    env = dict(os.environ, PYTHONPATH=str(ROOT), CUDNN_RNN_NO_GPU="1",
               CUDNN_RNN_FAULT=f"hang:{cells[finished].id}")
    proc = subprocess.Popen([sys.executable, "-m", "cudnn_rnn.probe", "--out", str(tmp_path),
                             "--cell", "GRU", "--timeout", "600"], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=ctrl_c_heard)
    deadline = time.monotonic() + 600  # only turns a hang of the test into a failure
    while not (out.exists() and out.read_bytes().count(b"\n") >= finished):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)  # what Ctrl-C sends to the parent
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "the same command continues" in stderr
    kept = records(out)
    assert [r["id"] for r in kept] == [c.id for c in cells[:finished]]
    meta = json.loads((tmp_path / "default.run.json").read_text())
    assert meta["sessions"][-1]["interrupted"] is True and meta["complete"] is False
    resumed = probe(tmp_path, "--cell", "GRU", "--resume")
    assert resumed.returncode == 0
    assert json.loads((tmp_path / "default.run.json").read_text())["complete"] is True


def test_a_run_records_its_variant_repeats(tmp_path):
    """--variant-reps changes what a variant's timing means: part of the run's identity (on
    a GPU another setup: tests/test_runs.py)."""
    assert probe(tmp_path, "--dtype", "INT8", "--cell", "GRU").returncode == 0
    settings = json.loads((tmp_path / "default.run.json").read_text())["identity"]["settings"]
    assert settings["variant_reps"] == 5 and settings["reps"] == 20
    capped = probe(tmp_path / "c", "--dtype", "INT8", "--cell", "GRU", "--reps", "4")
    assert capped.returncode == 0, capped.stderr
    settings = json.loads((tmp_path / "c" / "default.run.json").read_text())["identity"]
    assert settings["settings"]["variant_reps"] == 4  # never more than --reps


@pytest.mark.parametrize("value,want", [
    ("forward_training", ["forward_training"]),
    ("backward_data,forward_inference", ["forward_inference", "backward_data"]),
    ("all", ["forward_inference", "forward_training", "backward_data", "backward_weights"]),
])
def test_the_calls_a_variant_times_are_part_of_the_runs_identity(tmp_path, value, want):
    proc = probe(tmp_path, "--dtype", "INT8", "--cell", "GRU", "--variant-kinds", value)
    assert proc.returncode == 0, proc.stderr
    identity = json.loads((tmp_path / "default.run.json").read_text())["identity"]
    assert identity["settings"]["variant_kinds"] == want


@pytest.mark.parametrize("value", ["forward", "", "all,forward_training"])
def test_unknown_calls_for_variants_are_one_line_exit_2(tmp_path, value):
    assert_one_line_exit_2(probe(tmp_path, "--variant-kinds", value), "--variant-kinds")


def test_report_beside_a_run_never_replaces_the_report_of_another_run_in_its_folder(tmp_path):
    """A folder of several runs (as results/<gpu>/<version>/ is) keeps the report it holds:
    a run of another spec with --report writes its own where `report` would put it."""
    folder, home = tmp_path / "runs", tmp_path / "home"
    first = probe(folder, "--dtype", "INT8", "--cell", "GRU", "--report", CUDNN_RNN_HOME=str(home))
    assert first.returncode == 0, first.stderr
    kept = {n: (folder / n).read_bytes() for n in ("matrix.md", "matrix.html", "summary.json")}
    again = probe(folder, "--dtype", "INT8", "--cell", "GRU", "--report", CUDNN_RNN_HOME=str(home))
    assert again.returncode == 0 and "written apart" not in again.stderr  # its own: replaced
    spec = tmp_path / "tiny.toml"
    spec.write_text('name = "tiny"\n[[block]]\nname = "b"\ndata_type = ["FLOAT"]\n'
                    'math_prec = ["FLOAT"]\nmath_type = ["FMA"]\nalgo = ["STANDARD"]\n'
                    'cell = ["LSTM"]\nshapes = [{seq_length = 4, layers = 1, hidden = 8, '
                    'batch = 2}]\n')
    kept = {n: (folder / n).read_bytes() for n in kept}
    other = probe(folder, "--spec", str(spec), "--report", CUDNN_RNN_HOME=str(home))
    assert other.returncode == 0, other.stderr
    assert "holds the report of" in other.stderr and "written apart" in other.stderr
    assert {n: (folder / n).read_bytes() for n in kept} == kept
    apart = list((folder / "reports").glob("*-tiny-*/matrix.md"))  # inside the chosen folder
    assert len(apart) == 1 and not (home / "reports").exists()


def test_a_report_whose_sources_are_relative_to_another_directory_is_judged_by_their_ends(
        tmp_path):
    """A report written from another working directory names its runs relative to it: one
    whose path ends as this run's does is this run's (an archive's .gz as its run), another
    (or one climbing with ..) is not."""
    from cudnn_rnn.reporting.matrix import parts, same_run
    own = parts(tmp_path / "runs" / "B" / "default.jsonl")
    assert same_run("runs/B/default.jsonl", own) and same_run("./B/default.jsonl.gz", own)
    assert same_run(str(tmp_path / "runs" / "B" / "default.jsonl"), own)
    assert not same_run("runs/A/default.jsonl", own)
    assert not same_run("../B/default.jsonl", own)
    assert not same_run(str(tmp_path / "runs" / "A" / "default.jsonl"), own)
    # written in another checkout (or before it moved): the same folders and file at the end
    here = parts(tmp_path / "results" / "gpu" / "9.19.0" / "default.jsonl")
    assert same_run("/elsewhere/checkout/results/gpu/9.19.0/default.jsonl.gz", here)
    assert not same_run("/elsewhere/checkout/results/gpu/9.14.0/default.jsonl", here)
    assert not same_run("/scratch/other/gpu/9.19.0/default.jsonl", here)  # not results/


def test_report_beside_another_runs_records_is_written_apart(tmp_path):
    """A folder holding another run's records and no report yet (a run of another spec,
    without --report): this run's --report does not sit beside them as if it were theirs;
    it goes apart, as beside another run's report, and `report` of that folder's runs
    together still takes the folder."""
    folder, home = tmp_path / "runs", tmp_path / "home"
    spec = tmp_path / "tiny.toml"
    spec.write_text('name = "tiny"\n[[block]]\nname = "b"\ndata_type = ["FLOAT"]\n'
                    'math_prec = ["FLOAT"]\nmath_type = ["FMA"]\nalgo = ["STANDARD"]\n'
                    'cell = ["LSTM"]\nshapes = [{seq_length = 4, layers = 1, hidden = 8, '
                    'batch = 2}]\n')
    assert probe(folder, "--spec", str(spec), CUDNN_RNN_HOME=str(home)).returncode == 0
    mine = probe(folder, "--dtype", "INT8", "--cell", "GRU", "--report",
                 CUDNN_RNN_HOME=str(home))
    assert mine.returncode == 0, mine.stderr
    assert "holds another run's records (tiny.jsonl)" in mine.stderr
    assert not (folder / "matrix.md").exists()
    assert len(list((folder / "reports").glob("*/matrix.md"))) == 1
    both = run("cudnn_rnn.report", str(folder), "--out", str(folder), CUDNN_RNN_HOME=str(home))
    assert both.returncode == 0, both.stderr


def test_a_filter_that_matches_nothing_names_the_values_the_spec_has():
    """cells.unmatched: the first filter no cell passes, with the spec's own values on its
    axis (numbers in order), read from the spec itself."""
    from cudnn_rnn.matrix import cells, spec as specs
    spec = specs.load("default")
    hidden = sorted({c.config.hidden_size for c in spec.cells})
    assert cells.unmatched(spec.cells, {"hidden": {3}}) == ("hidden", [str(h) for h in hidden])
    assert cells.unmatched(spec.cells, {"hidden": {hidden[0]}}) is None
