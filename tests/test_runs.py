"""Whose run is it: a run continues only on the setup that recorded it (real library, CPU)."""
import json
import shutil
from pathlib import Path

from cudnn_rnn.matrix import runs

from .test_cli import assert_one_line_exit_2, run

FIX = Path(__file__).parent / "fixtures"
QUICK = ("--cell", "GRU", "--dtype", "INT8,FLOAT", "--math-type", "DEFAULT")


def run_files(folder):
    """A run folder's files, every byte (a refused writer writes nothing, not even its name)."""
    return {f.name: f.read_bytes() for f in folder.iterdir()}


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
    n = len(path.read_text().splitlines())
    # a run of the same spec by another setup, where this machine's runs live
    other = path.parent.parent.parent / (path.parent.parent.name[:-8] + "0badcafe") / \
        path.parent.name
    shutil.copytree(path.parent, other)
    meta = json.loads((other / "default.run.json").read_text())
    meta["identity"]["machine"]["driver_version"] = "999.1"
    (other / "default.run.json").write_text(json.dumps(meta))
    kept = run_files(other)
    more = probe(tmp_path, "--cell", "GRU,LSTM", "--dtype", "INT8,FLOAT", "--math-type", "DEFAULT")
    assert more.returncode == 0, more.stderr
    assert f" {n} already recorded" in more.stdout
    told = [x for x in more.stdout.splitlines() if x.startswith("not resumed, left as they are")]
    assert len(told) == 1 and "0badcafe" in told[0] and "driver_version '999.1' there" in told[0]
    assert "this machine's run is continued" in told[0]
    assert run_files(other) == kept  # left as it is
    ids = [json.loads(x)["id"] for x in path.read_text().splitlines()]
    assert len(ids) == len(set(ids)) > n
    meta = json.loads(path.with_suffix(".run.json").read_text())
    assert len(meta["sessions"]) == 2 and meta["identity"]["machine"]["device_stages"] is False
    assert meta["identity"]["spec_sha256"] and meta["kind"] == "probe"


def test_the_committed_run_of_this_gpu_and_cudnn_is_named_and_left_alone(tmp_path):
    from cudnn_rnn.matrix.provenance import ROOT
    first = probe(tmp_path, *QUICK)
    assert first.returncode == 0, first.stderr
    version = json.loads(only_run(tmp_path).with_suffix(".run.json").read_text())[
        "identity"]["machine"]["cudnn_version"]
    committed = ROOT / "results" / "no-gpu" / version / "default.jsonl.gz"
    if committed.exists():
        assert f"results/no-gpu/{version}/default.jsonl.gz (committed" in first.stdout
    else:
        assert "left as they are" not in first.stdout


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
    before = run_files(out)
    proc = probe(tmp_path, "--out", str(out), *QUICK)
    assert_one_line_exit_2(proc, "is not resumed: it is a run of another setup",
                           "carries no identity")
    assert run_files(out) == before


def test_timing_settings_are_no_other_setup_where_nothing_is_timed(tmp_path):
    """Without a GPU a run times nothing: --no-time or other repeats are the same setup (a
    given --out continues), where on a GPU they are another (see below). Each still has a
    default folder of its settings, as runs before this rule had."""
    assert probe(tmp_path, "--no-time", *QUICK).returncode == 0
    assert probe(tmp_path, "--reps", "3", *QUICK).returncode == 0
    folders = {p.parent.name for p in tmp_path.glob("runs/*/*/default.jsonl")}
    assert len(folders) == 2
    out = tmp_path / "out"
    assert probe(tmp_path, "--out", str(out), "--no-time", *QUICK).returncode == 0
    proc = probe(tmp_path, "--out", str(out), "--variant-reps", "2", *QUICK)
    assert proc.returncode == 0, proc.stderr


def test_timing_settings_are_another_setup_on_a_gpu_said_as_the_flags_that_set_them():
    gpu = {"gpu": "NVIDIA H200", "compute_capability": "9.0", "driver_version": "580.1",
           "device_stages": True, "cudnn_version": "9.19.0", "library_path": "/a/libcudnn.so.9",
           "project_version": "0.2.0"}
    settings = {"reps": 20, "variant_reps": 5, "variant_kinds": ["forward_training"],
                "time": True, "graphs": True}
    mine = runs.run_identity(gpu, "default", "ab" * 32, settings)
    other = runs.run_identity(gpu, "default", "ab" * 32, dict(
        settings, reps=3, variant_kinds=["forward_training", "backward_data"], time=False,
        graphs=False))
    assert runs.differences(other, mine) == [
        "--reps 3 there, --reps 20 here",
        "--variant-kinds forward_training,backward_data there, "
        "--variant-kinds forward_training here",
        "--no-time there, timed here", "--no-graphs there, graphs here"]
    assert runs.run_dir(other) != runs.run_dir(mine)
    cpu = dict(gpu, gpu=None, compute_capability=None, driver_version=None,
               device_stages=False)
    assert runs.differences(dict(other, machine=cpu), dict(mine, machine=cpu)) == []
    # two --no-time runs on a GPU time nothing either: their repeats are no difference
    untimed = runs.run_identity(gpu, "default", "ab" * 32, dict(settings, time=False))
    assert runs.differences(dict(untimed, settings=dict(untimed["settings"], reps=3)),
                            untimed) == []
    assert runs.differences(other, untimed) == []  # --no-graphs too: nothing timed either
    assert "--no-time there, timed here" in runs.differences(untimed, mine)


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
                    "--reps 5 there, --reps 20 here"]
    assert runs.run_dir(mine) != runs.run_dir(other)  # another machine: another folder
    assert runs.run_dir(mine).parent != runs.run_dir(other).parent
    same_machine = dict(mine, settings={"reps": 5, "time": True})
    assert runs.run_dir(same_machine).parent == runs.run_dir(mine).parent
    assert runs.run_dir(same_machine) != runs.run_dir(mine)  # other settings: another folder
    assert runs.differences(None, mine) and runs.differences({"machine": 1}, mine)


def test_an_archived_run_is_named_and_not_continued_and_an_overwrite_replaces_it(tmp_path):
    """A run whose records are gzipped (as committed runs are) cannot be appended to: the
    refusal names the .gz and the way on; --overwrite leaves no archive beside the new run."""
    out = tmp_path / "out"
    assert probe(tmp_path, "--out", str(out), *QUICK).returncode == 0
    import gzip
    plain = out / "default.jsonl"
    (out / "default.jsonl.gz").write_bytes(gzip.compress(plain.read_bytes()))
    plain.unlink()
    before = run_files(out)
    proc = probe(tmp_path, "--out", str(out), *QUICK)
    assert_one_line_exit_2(proc, f"{out / 'default.jsonl.gz'} is an archived run (gzip): it is "
                                 "read, not continued", "or --overwrite to replace it")
    assert run_files(out) == before
    assert probe(tmp_path, "--out", str(out), "--overwrite", *QUICK).returncode == 0
    assert sorted(f.name for f in out.glob("default.jsonl*")) == ["default.jsonl"]


def test_a_value_a_run_lacks_reads_as_none_not_as_pythons_none():
    machine = {"gpu": None, "cudnn_version": "9.19.0"}
    mine = runs.run_identity(machine, "default", "ab" * 32, {})
    there = runs.run_identity(dict(machine, gpu="NVIDIA H200"), "default", "ab" * 32, {})
    assert runs.differences(there, mine) == ["gpu 'NVIDIA H200' there, none here"]
