"""The precision table on a GPU (marker ``gpu``): the shipped model's full table, and a
user's module from a state_dict file."""
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cudnn_rnn.charlm import network
from cudnn_rnn.reporting import charts

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures" / "torch-rnn"


def _run(tmp_path, *args):
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "cudnn_rnn.precision", *args, "--out",
                           str(tmp_path)], capture_output=True, text=True, timeout=600,
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    found = list(tmp_path.rglob("*.json"))
    assert len(found) == 1, found
    return json.loads(found[0].read_text()), found[0], time.monotonic() - started


@pytest.mark.timing  # its wall time against the 60 s target
def test_the_shipped_lstms_table(cuda, tmp_path):
    doc, path, wall = _run(tmp_path)
    res, s = doc["result"], doc["summary"]
    assert path.name == "precision.json" and path.with_suffix(".md").is_file()
    if charts.available():  # the chart: one bar per timed row, each with the row's id
        assert path.with_suffix(".html").read_text().count('id="row-') == sum(
            r["speedup_fp32"] is not None for r in s["rows"])
        assert path.with_suffix(".png").is_file()
    rows = {r["family"]: r for r in s["rows"] if r["engine"] == "cuDNN"}
    assert set(rows) == {"fp32", "tf32", "fp16", "bf16"}
    recorded = network.load(network.shipped("lstm")).meta["heldout"]
    assert res["reference"]["bpc"] == pytest.approx(recorded["bpc"], rel=1e-12)
    fp32 = rows["fp32"]
    assert fp32["label"].startswith("FLOAT/FLOAT/FMA_MATH/") and fp32["speedup_fp32"] == 1.0
    assert fp32["bpc"] == pytest.approx(recorded["bpc"], rel=1e-5)
    assert res["reference"]["agreement"] > 0.999  # float64's top-1 against FP32's
    base = next(r for r in res["records"] if r["id"] == res["baseline"])
    for r in s["rows"]:
        assert r["ms"] > 0 and r["agreement"] > 0.9 and r["top1"] > 0.6, r
        if r["basis"] == "graph" and base["graph_timings"]:
            assert r["speedup_fp32"] == pytest.approx(
                base["graph_timings"]["forward_inference"]["median_ms"] / r["ms"])
    eight = [r for r in res["records"] if r.get("format")]
    # the GEMM engine on every format, part and method; the persistent kernel on every
    # format and part at the GEMM engine's best method
    by_engine = {e: [r for r in eight if r["engine"] == e] for e in ("cuBLASLt", "persistent")}
    assert len(by_engine["cuBLASLt"]) == 2 * 3 * 6 and len(by_engine["persistent"]) == 2 * 3
    assert all(r["outcome"] == "OK" for r in eight), \
        [(r["id"], r.get("reason")) for r in eight if r["outcome"] != "OK"]
    for r in eight:  # verified against the quantized network's float64 twin
        assert max(r["errors_twin"].values()) <= r["bound"]
    assert {r["family"] for r in s["rows"]} == {"fp32", "tf32", "fp16", "bf16", "int8", "fp8"}
    assert s["answer"]["deploy"] and s["targets"]["fp16"]["met"] is not None
    # PERSIST_DYNAMIC rows that verified ran on descriptors built ahead (a row whose build
    # had not begun when it came builds its own: how many depends on the machine's pace)
    dynamic = [r for r in res["records"] if r["id"].endswith("/PERSIST_DYNAMIC")
               and r["outcome"] == "OK"]
    assert dynamic and any(r.get("built_ahead_s", 0) > 0 for r in dynamic), dynamic
    assert wall <= 60.0, f"the table took {wall:.1f} s (target: 60 s on the H200); " \
        f"phases {res['phases_s']}"


def test_a_users_module_from_its_state_dict(cuda, tmp_path):
    weights = FIX / ("lstm.pt" if importlib.util.find_spec("torch") else "lstm.safetensors")
    doc, path, _ = _run(tmp_path, "--weights", str(weights), "--inputs",
                        str(FIX / "lstm-inputs.npy"), "--methods", "max,entropy")
    assert path.name == "precision-user-lstm.json"
    res, s = doc["result"], doc["summary"]
    assert res["source"]["task"] is None and "the inputs themselves" in res["source"]["calibrated_on"]
    fp32 = next(r for r in s["rows"] if r["family"] == "fp32")
    assert fp32["error_fp64"] < 1e-5 and fp32["error_vs_fp32"] == 0.0
    # the engine builds no LSTM projection: every one of its rows says so, none is timed
    engine = [r for r in res["records"] if r["engine"] == "cuBLASLt"]
    assert len(engine) == 1 + 2 * 3 * 2
    assert all(r["outcome"] == "NOT_SUPPORTED" and "projection" in r["reason"] for r in engine)


def test_a_users_gru_runs_in_the_8_bit_engine_where_its_shapes_allow(cuda, tmp_path):
    doc, path, _ = _run(tmp_path, "--weights", str(FIX / "gru.npz"), "--inputs",
                        str(FIX / "gru-inputs.npy"), "--methods", "max,p99.9")
    assert path.name == "precision-user-gru.json"
    res = doc["result"]
    by = {r["id"]: r for r in res["records"]}
    # INT8 takes K = 12 (the module's input width); cuBLASLt's FP8 GEMMs need K % 16 == 0,
    # so an FP8 input GEMM is refused by the heuristic, with its call and status
    for part in ("input", "recurrent", "both"):
        rec = by[f"lowbit/int8/{part}/max"]
        assert rec["outcome"] == "OK", rec.get("reason")
        assert all(rec["errors_twin"][n] < rec["errors"][n] for n in rec["errors_twin"])
        assert rec["metrics"]["error_vs_fp32"] < 0.1
    for part in ("input", "both"):
        rec = by[f"lowbit/e4m3/{part}/max"]
        assert rec["outcome"] == "NOT_SUPPORTED" and rec["failed_call"].startswith("cublasLt")
    assert any(r["family"] == "int8" for r in doc["summary"]["rows"])


def test_a_rehearsal_runs_its_family_without_persist_dynamic_rows(cuda):
    from cudnn_rnn import precision
    from cudnn_rnn.bindings.enums import RNNAlgo
    from cudnn_rnn.charlm.table import precision_table
    from cudnn_rnn.matrix.families import search_space
    job = {"spec": {"model": str(network.shipped("lstm"))}, "reps": 20, "budget_s": 0.1,
           "methods": ("max",)}
    _name, params = next(t for t in precision.rehearsals(job) if t[1]["families"] == ("fp16",))
    res = precision_table(**params)
    cudnn = [r for r in res["records"] if r["engine"] == "cuDNN"]
    wanted = [c for c in search_space("fp16") if c[3] != RNNAlgo.PERSIST_DYNAMIC]
    assert len(cudnn) == len(wanted) and all(r["family"] == "fp16" for r in cudnn)
    assert not any(r["id"].endswith("PERSIST_DYNAMIC") for r in res["records"])
    assert not params["rest"] and not any(r["family"] == "fp16" for r in res["records"]
                                          if r["engine"] != "cuDNN")  # FP16 rows: the first's
    assert any(r["outcome"] == "OK" for r in cudnn)
    fmt = params["formats"][0]
    assert any(r["format"] == fmt and r["outcome"] == "OK" for r in res["records"]
               if r["engine"] == "persistent"), [r.get("reason") for r in res["records"]]
