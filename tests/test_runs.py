"""Whose run is it: a run continues only on the setup that recorded it (real library, CPU)."""
import json
import shutil
from pathlib import Path

from cudnn_rnn import runs

from .test_cli import assert_one_line_exit_2, run

FIX = Path(__file__).parent / "fixtures"
QUICK = ("--cell", "GRU", "--dtype", "INT8,FLOAT", "--math-type", "DEFAULT")


def probe(home, *args, **env):
    return run("cudnn_rnn.probe", *args, CUDNN_RNN_NO_GPU="1", CUDNN_RNN_HOME=str(home), **env)


def only_run(home) -> Path:
    found = list(Path(home).glob("runs/*/*/default.jsonl"))
    assert len(found) == 1, found
    return found[0]


def test_this_machines_run_continues_in_its_own_folder(tmp_path):
    first = probe(tmp_path, *QUICK)
    assert first.returncode == 0, first.stderr
    path = only_run(tmp_path)
    assert path.parent.parent.name.startswith("no-gpu-cudnn")
    assert "results/no-gpu/" in first.stdout and "left as they are" in first.stdout
    n = len(path.read_text().splitlines())
    more = probe(tmp_path, "--cell", "GRU,LSTM", "--dtype", "INT8,FLOAT", "--math-type",
                 "DEFAULT", "--resume")
    assert more.returncode == 0, more.stderr
    assert only_run(tmp_path) == path and f" {n} already recorded" in more.stdout
    ids = [json.loads(x)["id"] for x in path.read_text().splitlines()]
    assert len(ids) == len(set(ids)) > n
    meta = json.loads(path.with_suffix(".run.json").read_text())
    assert len(meta["sessions"]) == 2 and meta["identity"]["machine"]["device_stages"] is False
    assert meta["identity"]["spec_sha256"] and meta["kind"] == "probe"


def test_an_edited_spec_starts_a_new_run_beside_the_old_one(tmp_path):
    spec = tmp_path / "s.toml"
    text = (Path(__file__).resolve().parent.parent / "probes" / "seed_int8.toml").read_text()
    spec.write_text(text)
    assert probe(tmp_path, "--spec", str(spec)).returncode == 0
    spec.write_text(text.replace("description", "# an edit of the content\ndescription", 1)
                    .replace('"INT8"', '"INT8", "HALF"', 1))
    again = probe(tmp_path, "--spec", str(spec), "--resume")
    assert again.returncode == 0, again.stderr
    folders = sorted(p.parent for p in tmp_path.glob("runs/*/*/seed_int8.jsonl"))
    assert len(folders) == 2 and " 0 already recorded" in again.stdout
    assert "spec's content differs" in again.stdout  # the one line about the old run


def test_a_run_of_another_setup_is_never_resumed(tmp_path):
    out = tmp_path / "out"
    shutil.copytree(FIX / "h200-919", out)
    before = {f.name: f.read_bytes() for f in out.iterdir()}
    proc = probe(tmp_path, "--out", str(out), "--resume", *QUICK)
    assert_one_line_exit_2(proc, "is not resumed, it is a run of another setup",
                           "carries no identity")
    assert {f.name: f.read_bytes() for f in out.iterdir()} == before


def test_other_settings_are_named_and_refused_on_resume(tmp_path):
    out = tmp_path / "out"
    assert probe(tmp_path, "--out", str(out), "--no-time", *QUICK).returncode == 0
    before = {f.name: f.read_bytes() for f in out.iterdir()}
    proc = probe(tmp_path, "--out", str(out), "--resume", *QUICK)
    assert_one_line_exit_2(proc, "setting time False there, True here")
    assert {f.name: f.read_bytes() for f in out.iterdir()} == before


def test_differences_name_each_part_of_the_identity():
    machine = {"gpu": "NVIDIA H200", "compute_capability": "9.0", "driver_version": "580.1",
               "device_stages": True, "cudnn_version": "9.19.0", "library_path": "/a/libcudnn.so.9",
               "project_version": "0.2.0"}
    mine = runs.run_identity(machine, "default", "ab" * 32, {"reps": 20, "time": True})
    assert runs.differences(mine, mine) == []
    other = json.loads(json.dumps(mine))
    other["machine"].update(driver_version="575.2", library_path="/b/libcudnn.so.9")
    other["settings"]["reps"] = 5
    said = runs.differences(other, mine)
    assert said == ["driver_version '575.2' there, '580.1' here",
                    "library_path '/b/libcudnn.so.9' there, '/a/libcudnn.so.9' here",
                    "setting reps 5 there, 20 here"]
    assert runs.run_dir(mine) != runs.run_dir(other)  # another machine: another folder
    assert runs.differences(None, mine) and runs.differences({"machine": 1}, mine)
