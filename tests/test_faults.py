"""A cell that kills, hangs or breaks its worker takes no other cell down with it.

Each fault of ``CUDNN_RNN_FAULT`` hits the third of six cells; every other cell must be
recorded exactly as in a run without the fault, the faulted cell with what happened to
it, and the worker counts must be true. On the CPU the valid cells stop after the
descriptor stages (their true outcome there); with a GPU (marker ``gpu``) they must be
OK, verified against float64, and the sticky CUDA error is added to the faults.
"""
import json

import pytest

from .test_cli import run

SPEC = """
name = "faults"
[defaults]
cell = ["GRU"]
[[block]]
name = "fp32"
data_type = ["FLOAT"]
math_prec = ["FLOAT"]
math_type = ["FMA", "DEFAULT"]
algo = ["STANDARD"]
shapes = [{seq_length = 5, layers = 1, hidden = 64, batch = 8}]
[[block]]
name = "fp16"
data_type = ["HALF"]
math_prec = ["FLOAT"]
math_type = ["DEFAULT", "TENSOR_OP"]
algo = ["STANDARD"]
shapes = [{seq_length = 5, layers = 1, hidden = 64, batch = 8}]
[[block]]
name = "others"
data_type = ["DOUBLE", "INT8"]
math_prec = ["DOUBLE", "INT8"]
math_type = ["FMA"]
algo = ["STANDARD"]
shapes = [{seq_length = 5, layers = 1, hidden = 64, batch = 8}]
"""
TARGET = "HALF/FLOAT/DEFAULT/STANDARD/GRU/"
KEY = ("outcome", "failed_stage", "failed_call", "status", "stages")


def probe(tmp_path, name, no_gpu, fault=None, *extra):
    spec = tmp_path / "faults.toml"
    spec.write_text(SPEC)
    out = tmp_path / name
    env = {"CUDNN_RNN_FAULT": fault} if fault else {}
    if no_gpu:
        env["CUDNN_RNN_NO_GPU"] = "1"
    proc = run("cudnn_rnn.probe", "--spec", str(spec), "--out", str(out), "--timeout", "20",
               "--no-time", *extra, **env)
    lines = (out / "faults.jsonl").read_text().splitlines() if (out / "faults.jsonl").exists() else []
    return proc, [json.loads(line) for line in lines], out


def check(tmp_path, no_gpu, fault, outcome, status):
    clean_proc, clean, _ = probe(tmp_path, "clean", no_gpu)
    assert clean_proc.returncode == 0, clean_proc.stderr
    assert len(clean) >= 6 and TARGET in clean[2]["id"]
    proc, recs, out = probe(tmp_path, fault, no_gpu, f"{fault}:{TARGET}")
    assert proc.returncode == (1 if outcome == "ERROR" else 0), proc.stdout[-2000:] + proc.stderr
    assert [r["id"] for r in recs] == [r["id"] for r in clean]  # every cell once, in order
    hit = recs[2]
    assert (hit["outcome"], hit["status"]) == (outcome, status), hit
    for mine, want in zip(recs[:2] + recs[3:], clean[:2] + clean[3:]):
        assert {k: mine.get(k) for k in KEY} == {k: want.get(k) for k in KEY}, mine["id"]
    pids = [r["worker_pid"] for r in recs if r.get("worker_pid")]
    if fault == "exit":  # the first worker died before acknowledging: nobody's crash
        assert hit["outcome"] == clean[2]["outcome"] and hit["worker_pid"] != recs[1]["worker_pid"]
    else:
        assert len(set(pids[:2])) == 1 and recs[3]["worker_pid"] != recs[1]["worker_pid"]
    session = json.loads((out / "faults.run.json").read_text())["sessions"][-1]
    assert (session["workers_started"], session["workers_lost"]) == (2, 1), session
    assert "workers: 2 started, 1 lost" in proc.stdout
    if outcome == "ERROR":
        assert "InjectedFault" in hit["reason"] and "ERROR" in proc.stderr
    again = run("cudnn_rnn.probe", "--spec", str(tmp_path / "faults.toml"), "--out", str(out),
                "--no-time", "--resume", **({"CUDNN_RNN_NO_GPU": "1"} if no_gpu else {}))
    assert "0 to run" in again.stdout, again.stdout + again.stderr
    return clean, recs


FAULTS = [("raise", "ERROR", "InjectedFault"), ("crash", "CRASH", "SIGSEGV"),
          ("abort", "CRASH", "SIGABRT"), ("hang", "TIMEOUT", "TIMEOUT")]


@pytest.mark.parametrize("fault,outcome,status", FAULTS + [("exit", "SKIPPED", None)])
def test_each_fault_stays_with_its_cell(tmp_path, fault, outcome, status):
    clean, recs = check(tmp_path, True, fault, outcome, status)
    assert {r["outcome"] for r in clean} == {"SKIPPED", "NOT_SUPPORTED"}


@pytest.mark.gpu
@pytest.mark.parametrize("fault,outcome,status",
                         FAULTS + [("cuda", "CRASH", "CUDA_ERROR"), ("exit", "OK", None)])
def test_each_fault_stays_with_its_cell_on_the_gpu(cuda, tmp_path, fault, outcome, status):
    clean, recs = check(tmp_path, False, fault, outcome, status)
    valid = [r for r in recs if TARGET not in r["id"]
             and "INT8" not in (r["data_type"], r["math_prec"])]
    assert valid and all(r["outcome"] == "OK" and r["verification"]["passed"] for r in valid)
    if fault == "cuda":
        assert "cuda" in (recs[2]["reason"] or "").lower(), recs[2]
    print(fault, [(r["id"].split("/GRU")[0], r["outcome"]) for r in recs])


@pytest.mark.parametrize("value", ["slow:x", "slow:-1", "slow:inf", "bogus:1", "crash"])
def test_a_fault_hook_the_workers_cannot_read_is_one_line_before_any_worker(tmp_path, value):
    from .test_cli import assert_one_line_exit_2, run
    proc = run("cudnn_rnn.probe", "--out", str(tmp_path / "o"), "--dtype", "INT8", "--cell",
               "GRU", CUDNN_RNN_NO_GPU="1", CUDNN_RNN_FAULT=value)
    assert_one_line_exit_2(proc, f"CUDNN_RNN_FAULT={value!r}")
    assert not list((tmp_path / "o").rglob("*.jsonl"))
