"""tools/gpu_check.sh, the maintainers' one-go GPU run: its steps are checked before any
runs (one line, exit 2, nothing written), and a step that runs leaves its log and its
timestamped line in the chosen folder."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cudnn_rnn.engine import gpu

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "gpu_check.sh"


def _run(*args):
    return subprocess.run(["bash", str(TOOL), *args], capture_output=True, text=True,
                          timeout=300, cwd="/", env=dict(os.environ, PYTHON=sys.executable))


@pytest.mark.parametrize("steps", [[], ["bogus"], ["matrix:x"], ["suite", "matrix:0"], [":5"]])
def test_a_step_it_does_not_know_is_one_line_before_anything_runs(tmp_path, steps):
    out = tmp_path / "out"
    proc = _run(str(out), *steps)
    lines = [x for x in (proc.stdout + proc.stderr).splitlines() if x.strip()]
    assert proc.returncode == 2 and len(lines) == 1, lines
    assert "STEP" in lines[0] and "matrix" in lines[0] and "suite" in lines[0]
    assert not out.exists()


def test_a_step_that_runs_leaves_its_log_and_its_line(tmp_path):
    """Without a GPU, the suite step's make test-gpu fails in its one line: the step says so
    (rc 2) and the log holds the line."""
    if gpu.available():
        pytest.skip("a GPU is here: the step would run the whole GPU suite")
    out = tmp_path / "out"
    proc = _run(str(out), "suite:120")
    assert proc.returncode == 0, proc.stderr
    steps = (out / "steps.txt").read_text().splitlines()
    assert len(steps) == 1 and steps[0].startswith("suite rc=2 "), steps
    assert "the GPU suite needs a usable GPU" in (out / "suite.log").read_text()


def test_what_the_steps_wrote_under_runs_comes_back_as_one_archive(tmp_path):
    """A device's copy-back takes at most 8 files from OUT: the run folders' files (the
    report's html left out) travel as OUT/runs.tgz, RUN/FILE inside, beside the logs."""
    import tarfile
    repo = tmp_path / "repo"
    (repo / "tools").mkdir(parents=True)
    (repo / "tools" / "gpu_check.sh").write_bytes(TOOL.read_bytes())
    for run in ("default-1", "persistent-2"):  # a machine's run folders, written by steps
        d = repo / "runs" / "machine" / run
        d.mkdir(parents=True)
        for name in ("a.jsonl", "b.md", "c.png", "d.html"):
            (d / name).write_text(run)
    out = tmp_path / "out"
    (out / "probe").mkdir(parents=True)  # what the probe step writes
    (out / "probe" / "persistent_probe.json").write_text("probe")
    proc = subprocess.run(["bash", str(repo / "tools" / "gpu_check.sh"), str(out), "suite:60"],
                          capture_output=True, text=True, timeout=120, cwd="/",
                          env=dict(os.environ, PYTHON=sys.executable))
    assert proc.returncode == 0, proc.stderr
    files = sorted(p.name for p in out.rglob("*") if p.is_file())
    assert "runs.tgz" in files and len(files) <= 8, files
    with tarfile.open(out / "runs.tgz") as tar:
        names = {n.lstrip("./") for n in tar.getnames() if tar.getmember(n).isfile()}
        assert names == {f"{run}/{name}" for run in ("default-1", "persistent-2")
                         for name in ("a.jsonl", "b.md", "c.png")} | {
                             "probe/persistent_probe.json"}
        assert tar.extractfile("./persistent-2/a.jsonl").read() == b"persistent-2"
    assert not (out / "probe").exists()  # in the archive, not beside it


def test_an_earlier_calls_archive_is_not_left_for_this_ones(tmp_path):
    """With no run folder written, OUT holds no runs.tgz, not even one left by an earlier
    call into the same folder (the copy of the tool has no Makefile beside it: its suite
    step fails at once, GPU or not)."""
    repo = tmp_path / "repo"
    (repo / "tools").mkdir(parents=True)
    (repo / "tools" / "gpu_check.sh").write_bytes(TOOL.read_bytes())
    out = tmp_path / "out"
    out.mkdir()
    (out / "runs.tgz").write_text("an earlier call's")
    proc = subprocess.run(["bash", str(repo / "tools" / "gpu_check.sh"), str(out), "suite:60"],
                          capture_output=True, text=True, timeout=120, cwd="/",
                          env=dict(os.environ, PYTHON=sys.executable))
    assert proc.returncode == 0, proc.stderr
    assert (out / "steps.txt").exists() and not (out / "runs.tgz").exists()
