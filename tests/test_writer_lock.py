"""One writer per run folder (cudnn_rnn/matrix/writer_lock.py), as users meet it: a second
probe (or make matrix) into a folder being written is refused in one line naming the first,
exit 2, and writes nothing; readers read whole records meanwhile; a torn last line is said.

No test waits for a time: a writer that must stay busy hangs on a known cell
(``CUDNN_RNN_FAULT=hang:ID``) and the test waits for what the probe announces (its records
written); a lock held by another process is held by a helper that says so on stdout."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cudnn_rnn import probe as probe_cmd
from cudnn_rnn.matrix import writer_lock
from cudnn_rnn.matrix.record import read_records
from cudnn_rnn.reporting import load

from .test_cli import assert_one_line_exit_2, run
from .test_probe_cli import ctrl_c_heard, probe

ROOT = Path(__file__).resolve().parent.parent
SMALL = ("--cell", "GRU", "--dtype", "INT8,FLOAT", "--math-type", "DEFAULT")
HOLDER = ("import sys; from cudnn_rnn.matrix import writer_lock; "
          "writer_lock.hold(sys.argv[1], 'the holder of this test'); print('held', flush=True); "
          "sys.stdin.read()")


def files(folder: Path) -> dict:
    """The run's files (the info file says who holds the lock, here the test: not the run's)."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())
            if p.is_file() and p.name != writer_lock.INFO_FILE}


def wait_for(predicate, what: str, proc=None, limit_s: float = 300.0):
    """Poll for an event the code announces; the limit only turns a hang into a failure."""
    deadline = time.monotonic() + limit_s
    while not predicate():
        assert proc is None or proc.poll() is None, (what, proc.communicate())
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.02)


class Holder:
    """Another process holding a folder's writer lock until the test lets it go."""

    def __init__(self, folder: Path):
        self.proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], cwd=ROOT,
                                     env=dict(os.environ, PYTHONPATH=str(ROOT)), text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.proc.stdout.readline().strip() == "held"

    def release(self):
        self.proc.stdin.close()
        assert self.proc.wait(timeout=60) == 0


def test_a_second_probe_is_refused_naming_the_first_and_writes_nothing(tmp_path):
    assert probe(tmp_path, *SMALL).returncode == 0
    before = files(tmp_path)
    writer_lock.hold(tmp_path, "python -m cudnn_rnn.probe --out somewhere")
    try:
        for extra in ((), ("--overwrite",)):
            refused = probe(tmp_path, *SMALL, *extra)
            assert_one_line_exit_2(refused, "is being written by another process",
                                   f"pid {os.getpid()}", "`python -m cudnn_rnn.probe --out "
                                   "somewhere`", "started 20")
            assert files(tmp_path) == before  # nothing recorded before it is lost or changed
    finally:
        writer_lock.release(tmp_path)
    assert probe(tmp_path, *SMALL).returncode == 0  # the lock went with its holder


def test_the_lock_is_counted_and_goes_with_its_holder(tmp_path):
    writer_lock.hold(tmp_path)
    writer_lock.hold(tmp_path)
    writer_lock.release(tmp_path)
    assert writer_lock.holds(tmp_path)
    writer_lock.release(tmp_path)
    assert not writer_lock.holds(tmp_path)
    holder = Holder(tmp_path)
    assert writer_lock.other_writer(tmp_path)["command"] == "the holder of this test"
    with pytest.raises(writer_lock.RunLocked, match=f"pid {holder.proc.pid}"):
        writer_lock.hold(tmp_path)
    holder.proc.kill()  # a killed writer leaves nothing to clean up
    holder.proc.wait(timeout=60)
    assert writer_lock.other_writer(tmp_path) is None
    writer_lock.hold(tmp_path)
    writer_lock.release(tmp_path)


def test_a_refusal_never_names_a_writer_that_has_ended(tmp_path):
    """The last writer's info file stays when it ends; a new holder that has not yet said
    who it is (a probe opening its run) is named as such, not as the one that ended."""
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    gone = int(ended.stdout)  # a process that has ended
    (tmp_path / writer_lock.INFO_FILE).write_text(json.dumps(
        {"pid": gone, "command": "python -m cudnn_rnn.probe --report", "started": "earlier"}))
    quiet = subprocess.Popen([sys.executable, "-c", HOLDER.replace(
        "'the holder of this test'", "tell=False"), str(tmp_path)], cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)), text=True, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE)
    try:
        assert quiet.stdout.readline().strip() == "held"
        with pytest.raises(writer_lock.RunLocked) as refused:
            writer_lock.hold(tmp_path)
        assert f"pid {gone}" not in str(refused.value)
        assert "a process that has not yet said who it is" in str(refused.value)
    finally:
        quiet.stdin.close()
        assert quiet.wait(timeout=60) == 0
    assert json.loads((tmp_path / writer_lock.INFO_FILE).read_text())["pid"] == gone  # kept


def test_two_probes_at_once_one_records_the_other_is_refused_the_folder_reads_whole(tmp_path):
    spec, cells = probe_cmd.plan(probe_cmd.build_parser().parse_args(["--out", "x", *SMALL]))
    before = 12  # the first probe records these, then stays on the next until interrupted
    first = subprocess.Popen(
        [sys.executable, "-m", "cudnn_rnn.probe", "--out", str(tmp_path), *SMALL,
         "--timeout", "600"], cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=dict(os.environ, PYTHONPATH=str(ROOT), CUDNN_RNN_NO_GPU="1",
                 CUDNN_RNN_FAULT=f"hang:{cells[before].id}"),
        preexec_fn=ctrl_c_heard)
    path = tmp_path / "default.jsonl"
    try:
        wait_for(lambda: path.exists() and path.read_bytes().count(b"\n") >= before,
                 "the first probe's records", first)
        second = probe(tmp_path, *SMALL)
        assert_one_line_exit_2(second, f"pid {first.pid}", "python -m cudnn_rnn.probe --out")
        got = load.load(tmp_path)  # a reader while the run is written: whole records only
        assert [r["id"] for r in got.records] == [c.id for c in cells[:before]]
        assert len(read_records(path)[0]) == before
    finally:
        first.send_signal(signal.SIGINT)  # what Ctrl-C sends
        _out, err = first.communicate(timeout=120)
    assert first.returncode == 130 and "Traceback" not in err, err
    kept, size = read_records(path)
    assert [r["id"] for r in kept] == [c.id for c in cells[:before]]
    assert size == path.stat().st_size  # every byte is a whole line: none torn
    resumed = probe(tmp_path, *SMALL)
    assert resumed.returncode == 0, resumed.stderr
    ids = [r["id"] for r in read_records(path)[0]]
    assert len(ids) == len(set(ids)) and set(ids) <= {c.id for c in cells}
    assert json.loads((tmp_path / "default.run.json").read_text())["complete"] is True


def test_two_make_matrix_at_once_the_second_is_refused(tmp_path):
    env = {"CUDNN_RNN_HOME": str(tmp_path), "CUDNN_RNN_NO_GPU": "1"}
    make = ["make", "-s", "matrix", "VENV=", f"SYSTEM_PYTHON={sys.executable}",
            "PROBE_ARGS=" + " ".join(SMALL)]

    def matrix():
        return subprocess.run(make, cwd=ROOT, capture_output=True, text=True, timeout=600,
                              env={k: v for k, v in os.environ.items() if k != "MAKEFLAGS"}
                              | env)
    assert matrix().returncode == 0
    (folder,) = [p.parent for p in tmp_path.glob("runs/*/*/default.jsonl")]
    before = files(folder)
    holder = Holder(folder)
    try:
        again = matrix()
    finally:
        holder.release()
    ours = [x for x in again.stderr.splitlines() if not x.startswith("make")]
    assert again.returncode != 0 and len(ours) == 1, again.stderr
    assert f"pid {holder.proc.pid}" in ours[0] and "the holder of this test" in ours[0]
    assert files(folder) == before


def test_a_torn_last_line_is_said_once_and_left_out(tmp_path, capsys):
    first = probe(tmp_path, *SMALL)
    assert first.returncode == 0
    path = tmp_path / "default.jsonl"
    whole = path.read_bytes()
    count = whole.count(b"\n")
    path.write_bytes(whole + b'{"id": "cut mid-wri')  # a kill during a write
    kept, _ = read_records(path)
    assert len(kept) == count
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"cudnn-rnn: {path}: line {count + 1} is torn (the run was cut mid-write); "
                   "that record is left out"]
    report = run("cudnn_rnn.report", str(tmp_path), "--out", str(tmp_path / "r"))
    assert report.returncode == 0 and report.stderr.count("is torn") == 1, report.stderr
    assert f"line {count + 1} is torn" in report.stderr and str(path) in report.stderr


def test_an_unfinished_last_line_of_a_run_being_written_is_not_called_torn(tmp_path, capsys):
    assert probe(tmp_path, *SMALL).returncode == 0
    path = tmp_path / "default.jsonl"
    count = path.read_bytes().count(b"\n")
    with open(path, "ab") as fh:
        fh.write(b'{"id": "being writ')
    holder = Holder(tmp_path)  # the writer is at work: its last line may be unfinished
    try:
        assert len(read_records(path)[0]) == count
        assert capsys.readouterr().err == ""
    finally:
        holder.release()
    assert len(read_records(path)[0]) == count
    assert "is torn" in capsys.readouterr().err
