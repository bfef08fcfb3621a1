"""Bad input to the command lines: one line, exit code 2, no traceback."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run(*args, **env):
    full_env = dict(os.environ, PYTHONPATH=str(ROOT), **env)
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True,
                          env=full_env, timeout=120, cwd=ROOT)


def assert_one_line_exit_2(proc, *needles):
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.parametrize("args,needle", [
    ((), "required"),
    (("20", "2", "512"), "required"),
    (("20", "2", "512", "64", "7"), "mode is 0-3 or a name (0 RNN_RELU, 1 RNN_TANH, 2 LSTM, 3 GRU), got '7'"),
    (("20", "2", "512", "64", "-1"), "mode is 0-3 or a name"),
    (("20", "x", "512", "64", "0"), "positive integer"),
    (("20", "2", "512", "64", "0", "--data-type", "FLOAT9"), "unknown cudnnDataType_t"),
    (("20", "2", "512", "64", "0", "--dropout", "1.5"), "dropout"),
    (("20", "2", "512", "64", "0", "--frobnicate"), "unrecognized"),
])
def test_example_bad_arguments(args, needle):
    assert_one_line_exit_2(run("cudnn_rnn.example", *args), needle, "--help")


def test_example_without_gpu_says_it_needs_one():
    proc = run("cudnn_rnn.example", "20", "2", "512", "64", "0", CUDNN_RNN_NO_GPU="1")
    assert_one_line_exit_2(proc, "the example needs a CUDA GPU: CUDNN_RNN_NO_GPU is set")


def test_example_with_a_named_library_missing_says_to_name_another(tmp_path):
    proc = run("cudnn_rnn.example", "20", "2", "512", "64", "0",
               CUDNN_LIBRARY=str(tmp_path / "libcudnn.so.9"))
    assert_one_line_exit_2(proc, "does not exist", "name a libcudnn.so.9 that exists and loads")


def test_probe_runs_the_default_matrix_at_the_descriptor_stage_without_gpu(tmp_path):
    import time
    started = time.monotonic()
    proc = run("cudnn_rnn.probe", "--out", str(tmp_path), CUDNN_RNN_NO_GPU="1")
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    assert "NOT_SUPPORTED" in proc.stdout and "SKIPPED" in proc.stdout
    lines = (tmp_path / "default.jsonl").read_text().splitlines()
    assert len(lines) >= 3072
    print(f"descriptor-only default matrix: {len(lines)} cells in {elapsed:.1f} s")


def test_one_console_command_runs_each_command_as_its_module():
    listed = run("cudnn_rnn", "--help")
    assert listed.returncode == 0
    from cudnn_rnn.__main__ import MODULES
    for name in MODULES:
        assert f"  {name} " in listed.stdout, name
    direct = run("cudnn_rnn.probe", "--list", "--spec", "seed_int8")
    via = run("cudnn_rnn", "probe", "--list", "--spec", "seed_int8")
    assert via.returncode == direct.returncode == 0 and via.stdout == direct.stdout
    assert_one_line_exit_2(run("cudnn_rnn"), "name a command")
    assert_one_line_exit_2(run("cudnn_rnn", "probes"), "unknown command 'probes'")
    # a command named as its module (the README's python -m form) is that command
    by_module = run("cudnn_rnn", "bench_report", "--help")
    assert by_module.returncode == 0 and by_module.stdout == run("cudnn_rnn", "bench-report",
                                                                 "--help").stdout
    assert_one_line_exit_2(run("cudnn_rnn", "example", "20"), "required")


@pytest.mark.parametrize("args", [["cudnn_rnn", "--help"], ["cudnn_rnn", "probe", "--help"],
                                  ["cudnn_rnn.probe", "--list", "--cell", "LSTM"]])
def test_a_reader_that_has_gone_ends_the_command_quietly(args):
    """Output into a pipe whose reader has gone (``cudnn-rnn --help | head -1`` once head
    has what it wants): exit 0, nothing on stderr (no BrokenPipeError traceback, no
    'Exception ignored' at exit). The pipe's read end is closed before the command starts,
    so its first write already finds the reader gone."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run([sys.executable, "-m", *args], stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=120, cwd=ROOT,
                              env=dict(os.environ, PYTHONPATH=str(ROOT)))
    finally:
        os.close(write)
    assert proc.returncode == 0 and proc.stderr == "", (proc.returncode, proc.stderr)


def test_a_command_called_through_cudnn_rnn_points_to_its_help_as_called():
    proc = run("cudnn_rnn", "probe", "--bogus")
    assert_one_line_exit_2(proc, "see: cudnn-rnn probe --help")
    assert proc.stderr.startswith("cudnn-rnn probe: error: ")
    assert_one_line_exit_2(run("cudnn_rnn.probe", "--bogus"),
                           "see: python -m cudnn_rnn.probe --help")
