"""The probe matrix end to end on a GPU (marker ``gpu``).

``CUDNN_RNN_PROBE_OUT`` keeps the runs' results in that directory (for results/);
otherwise they go to a temporary one.
"""
import json
import os
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parent.parent


def run_probe(out_dir, *args, timeout=900):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "cudnn_rnn.probe", "--out", str(out_dir), "--overwrite",
                           *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)
    return proc, time.monotonic() - started


@pytest.fixture(scope="module")
def out_root(tmp_path_factory):
    keep = os.environ.get("CUDNN_RNN_PROBE_OUT")
    return Path(keep) if keep else tmp_path_factory.mktemp("probe")


def load(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def test_seed_spec_answers_the_int8_question(cuda, out_root):
    proc, _ = run_probe(out_root / "seed", "--spec", "seed_int8")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    recs = {r["data_type"]: r for r in load(out_root / "seed" / "seed_int8.jsonl")}
    int8 = recs["INT8"]
    assert int8["outcome"] == "NOT_SUPPORTED"
    assert int8["failed_call"] == "cudnnSetRNNDescriptor_v8" and int8["stages"] == ["handle", "dropout"]
    fp32 = recs["FLOAT"]
    assert fp32["outcome"] == "OK" and fp32["verification"]["passed"]
    assert set(fp32["timings"]) == {"forward_inference", "forward_training", "backward_data",
                                    "backward_weights"}


def test_default_spec_end_to_end(cuda, out_root):
    """The default spec's GRU cells in FLOAT and HALF, every axis varied around them (the
    whole matrix is ``make matrix``'s; this slice keeps the suite's time in bounds)."""
    proc, wall = run_probe(out_root / "default", "--cell", "GRU", "--dtype", "FLOAT,HALF")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    print(proc.stdout[-6000:])
    print(f"default matrix (GRU, FLOAT and HALF) wall time {wall:.1f} s")
    recs = load(out_root / "default" / "default.jsonl")
    meta = json.loads((out_root / "default" / "default.run.json").read_text())
    # every planned cell is recorded, or is a variant whose base cuDNN refused at its descriptor
    assert meta["complete"] and len(recs) > 300 and meta["not_run_base_refused"] > 0
    assert len(recs) + meta["not_run_base_refused"] == meta["cells"]
    timed = [r for r in recs if r["outcome"] == "OK"]
    variants = [r for r in timed if r["varies"]]
    assert variants and len(variants) < len(timed)
    # a variant's measurements get --variant-reps (5) calls of --variant-kinds (forward
    # training), a cell of the product --reps (20) of all four
    assert sum(bool(r["graph_timings"]) for r in variants) > len(variants) // 2
    assert all(t["reps"] == 5 for r in variants for t in (r["graph_timings"] or {}).values())
    assert all(t["reps"] == 5 for r in timed for t in r["timings"].values())  # plain: a share
    assert all(t["reps"] == 20 for r in timed if not r["varies"]
               for t in (r["graph_timings"] or {}).values())
    counts = Counter(r["outcome"] for r in recs)
    print("outcomes:", dict(counts))
    assert counts["CRASH"] == 0 and counts["TIMEOUT"] == 0 and counts["SKIPPED"] == 0
    ok_types = defaultdict(int)
    for r in recs:
        if r["outcome"] == "OK":
            v = r["verification"]
            assert v["passed"] and all(e is not None for e in r["errors"].values())
            assert set(r["timings"]) == ({"forward_training"} if r["varies"] else {
                "forward_inference", "forward_training", "backward_data", "backward_weights"})
            assert all(t["median_ms"] > 0 and t["tflops"] > 0 for t in r["timings"].values())
            assert r["speedup"], r["id"]
            ok_types[r["data_type"]] += 1
            if r["algo"] == "PERSIST_DYNAMIC":
                assert any("cudnnBuildRNNDynamic" in n for n in r["notes"])
        elif r["outcome"] == "WRONG_RESULT":
            assert r["timings"] is None and r["reason"].startswith("outside tolerance")
        else:
            assert r["timings"] is None and r["failed_call"], r["id"]
    # the run is filtered to FLOAT and HALF data (its FP32 baselines are FLOAT too): both
    # verify somewhere, and no other data type is in it
    assert set(ok_types) == {"FLOAT", "HALF"}, ok_types
    assert {r["data_type"] for r in recs} == {"FLOAT", "HALF"} and {r["cell"] for r in recs} == {"GRU"}
    # resources are released cell by cell: no cuDNN object outlives its cell, and the
    # device memory in use after each cell stays flat
    assert all(r["live_descriptors"] == 0 for r in recs)
    for pid in {r["worker_pid"] for r in recs}:
        used = [r["device_memory_bytes"] for r in recs
                if r["worker_pid"] == pid and r.get("device_memory_bytes") is not None]
        assert used and max(used) == min(used), (pid, min(used), max(used))
    # the PERSIST_DYNAMIC cells ran in a worker of their own, whose builders compiled beside
    # the other worker's cells: no process ran cells of both kinds
    dynamic = {r["worker_pid"] for r in recs if r["algo"] == "PERSIST_DYNAMIC"}
    others = {r["worker_pid"] for r in recs if r["algo"] != "PERSIST_DYNAMIC"}
    assert meta["sessions"][-1]["persist_dynamic_worker"] and dynamic and not dynamic & others
    # PERSIST_DYNAMIC cells waiting for their builds let the others go first
    # (matrix.ahead.Order), and still every variant ran after the cell it varies
    at = {r["id"]: n for n, r in enumerate(recs)}
    assert all(at[r["varies"]["base"]] < at[r["id"]] for r in recs if r["varies"])


def test_reference_on_gpu_equals_the_cpu_reference(cuda):
    from cudnn_rnn.bindings.enums import RNNMode, DirectionMode
    from cudnn_rnn.check import reference as R
    from cudnn_rnn.engine.config import RNNConfig
    rng = np.random.default_rng(5)
    cfg = RNNConfig(seq_length=5, num_layers=2, hidden_size=16, mini_batch=4, input_size=8,
                    mode=RNNMode.LSTM, direction=DirectionMode.BIDIRECTIONAL, proj_size=8)
    params = R.random_params(cfg, rng)
    data = [rng.uniform(-1, 1, size=s) for s in (cfg.x_shape(), cfg.h_shape(), cfg.c_shape())]
    cpu = R.forward(cfg, params, *data)
    gparams = [R.LayerParams([None if a is None else cuda.asarray(a) for a in p.W],
                             [cuda.asarray(a) for a in p.R], [cuda.asarray(a) for a in p.bW],
                             [cuda.asarray(a) for a in p.bR], cuda.asarray(p.P)) for p in params]
    gpu = R.forward(cfg, gparams, *[cuda.asarray(d) for d in data])
    np.testing.assert_allclose(cuda.asnumpy(gpu.y), cpu.y, rtol=1e-12, atol=1e-12)
    dy = rng.uniform(-1, 1, size=cfg.y_shape())
    dh = rng.uniform(-1, 1, size=cfg.h_shape())
    dc = rng.uniform(-1, 1, size=cfg.c_shape())
    g_cpu = R.backward(cfg, params, cpu, dy, dh, dc)
    g_gpu = R.backward(cfg, gparams, gpu, cuda.asarray(dy), cuda.asarray(dh), cuda.asarray(dc))
    np.testing.assert_allclose(cuda.asnumpy(g_gpu.dx), g_cpu.dx, rtol=1e-11, atol=1e-12)
