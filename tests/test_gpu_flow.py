"""The whole flow on a GPU, checked against the float64 reference (marker ``gpu``).

Random inputs and weights (never constants) at a small shape whose sizes are
multiples of 8. Set ``CUDNN_RNN_ERRORS_JSON`` to a path to keep every measured
error (the closing notes quote the largest per precision).
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cudnn_rnn.bindings.enums import (DataType, DirectionMode, MathType, RNNAlgo, RNNBiasMode,
                            RNNDataLayout, RNNInputMode, RNNMode)
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.engine import readback
from cudnn_rnn.engine.flow import COMPUTE_STAGES, RNNFlow
from cudnn_rnn.check.goldens import GOLDEN_RTOL, SAMPLE_GOLDEN
from cudnn_rnn.check.verify import compare

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parent.parent
SMALL = RNNConfig(seq_length=6, num_layers=2, hidden_size=32, mini_batch=8, input_size=24)
PRECISIONS = {
    "FLOAT/FMA": dict(data_type=DataType.FLOAT, math_type=MathType.FMA_MATH),
    "DOUBLE": dict(data_type=DataType.DOUBLE),
    "HALF/FLOAT": dict(data_type=DataType.HALF, math_prec=DataType.FLOAT),
}
_ERRORS = []


@pytest.fixture(scope="module", autouse=True)
def _keep_errors():
    yield
    path = os.environ.get("CUDNN_RNN_ERRORS_JSON")
    if path:
        Path(path).write_text(json.dumps(_ERRORS, indent=1))


def run_and_compare(lib, cfg, label, seed=7):
    with RNNFlow(cfg, lib, device=True, init="random", seed=seed) as flow:
        result = flow.run()
        assert result.failure is None, result.failure
        assert result.completed and result.reached[-1] == "forward_inference"
        check = compare(cfg, flow.drawn, readback.outputs(flow))
    _ERRORS.append({"label": label, "config": cfg.as_record(), **check.as_record()})
    return check


@pytest.mark.parametrize("precision", list(PRECISIONS))
@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("direction", list(DirectionMode), ids=lambda d: d.name[:3])
@pytest.mark.parametrize("mode", list(RNNMode), ids=lambda c: c.name)
def test_outputs_and_gradients_match_the_reference(lib, cuda, mode, direction, layers, precision):
    cfg = SMALL.replace(mode=mode, direction=direction, num_layers=layers, **PRECISIONS[precision])
    check = run_and_compare(lib, cfg, precision)
    assert check.passed, (check.failures, check.errors)
    assert set(check.errors) >= {"y", "hy", "dx", "dhx", "dw", "y_inf"}
    assert all(v == 0 for v in check.nonfinite.values()), check.nonfinite


@pytest.mark.parametrize("variant", [
    dict(mode=RNNMode.LSTM, proj_size=16),
    dict(mode=RNNMode.LSTM, proj_size=16, direction=DirectionMode.BIDIRECTIONAL),
    dict(mode=RNNMode.GRU, input_mode=RNNInputMode.SKIP_INPUT, input_size=32),
    dict(mode=RNNMode.LSTM, input_mode=RNNInputMode.SKIP_INPUT, input_size=32),
    dict(mode=RNNMode.GRU, bias_mode=RNNBiasMode.NO_BIAS),
    dict(mode=RNNMode.GRU, bias_mode=RNNBiasMode.SINGLE_INP_BIAS),
    dict(mode=RNNMode.GRU, bias_mode=RNNBiasMode.SINGLE_REC_BIAS),
    dict(mode=RNNMode.LSTM, layout=RNNDataLayout.BATCH_MAJOR_UNPACKED),
    dict(mode=RNNMode.RNN_TANH, layout=RNNDataLayout.SEQ_MAJOR_UNPACKED),
], ids=lambda v: "-".join(f"{getattr(x, 'name', x)}" for x in v.values()))
def test_variants_match_the_reference(lib, cuda, variant):
    cfg = SMALL.replace(data_type=DataType.FLOAT, math_type=MathType.FMA_MATH, **variant)
    check = run_and_compare(lib, cfg, "FLOAT/FMA variant")
    assert check.passed, (check.failures, check.errors)


def test_half_tensor_op_cell_is_verified(lib, cuda):
    cfg = SMALL.replace(mode=RNNMode.LSTM, data_type=DataType.HALF, math_prec=DataType.FLOAT,
                        math_type=MathType.TENSOR_OP_MATH)
    check = run_and_compare(lib, cfg, "HALF/FLOAT tensor op")
    assert check.passed, check.errors


def test_unwritten_outputs_are_caught_by_the_poison(lib, cuda):
    cfg = SMALL.replace(mode=RNNMode.GRU, data_type=DataType.FLOAT, math_type=MathType.FMA_MATH)
    with RNNFlow(cfg, lib, device=True, init="random") as flow:
        assert flow.run().completed
        flow.poison_outputs()  # as if the calls had not run
        check = compare(cfg, flow.drawn, readback.outputs(flow))
    assert not check.passed
    assert check.nonfinite["y"] == int(np.prod(cfg.y_shape()))


def test_int8_stops_at_the_rnn_descriptor_after_a_real_handle(lib, cuda):
    cfg = RNNConfig(data_type=DataType.INT8, math_prec=DataType.INT8)
    with RNNFlow(cfg, lib, device=True) as flow:
        result = flow.run()
    assert result.reached == ["handle", "dropout"]
    assert result.failure.call == "cudnnSetRNNDescriptor_v8"
    assert result.failure.status == "NOT_SUPPORTED"
    assert not set(COMPUTE_STAGES) & set(result.reached)
    assert "weight_space" not in result.sizes  # no size was ever read from a failed call


CHECKSUM = re.compile(r"(\w+) checksum (\S+)")


@pytest.mark.parametrize("code", range(4))
def test_example_reproduces_the_samples_golden_checksums(cuda, code):
    """The sample's command line; FMA math is true FP32, as on the M40 the goldens came from."""
    proc = subprocess.run([sys.executable, "-m", "cudnn_rnn.example", "20", "2", "512", "64",
                           str(code), "--math-type", "FMA", "--reps", "3"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^Forward: +\d+ GFLOPS$", proc.stdout, re.M), proc.stdout
    assert re.search(r"^Backward: +\d+ GFLOPS, \( *\d+ GFLOPS\), \( *\d+ GFLOPS\)$", proc.stdout,
                     re.M), proc.stdout
    assert re.search(r"^float64 reference: PASS", proc.stdout, re.M), proc.stdout  # before
    sums = {k: float(v) for k, v in CHECKSUM.findall(proc.stdout)}
    mode = list(RNNMode)[code]
    assert set(sums) == set(SAMPLE_GOLDEN[mode])
    for name, want in SAMPLE_GOLDEN[mode].items():
        assert np.isfinite(sums[name])
        assert abs(sums[name] - want) / max(abs(want), abs(sums[name])) < GOLDEN_RTOL, \
            (name, sums[name], want)


def test_the_example_times_only_verified_outputs(cuda):
    """--no-verify: the checksums alone, no GFLOPS and no time; dropout between layers
    (which the float64 reference does not model): untimed, with the reason."""
    def example(*extra):
        return subprocess.run([sys.executable, "-m", "cudnn_rnn.example", "20", "2", "64", "8",
                               "2", "--reps", "2", *extra], capture_output=True, text=True,
                              timeout=300, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    for extra, reason in [(["--no-verify"], "--no-verify"), (["--dropout", "0.5"], "no dropout")]:
        proc = example(*extra)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "GFLOPS" not in proc.stdout and "median" not in proc.stdout, proc.stdout
        assert re.search(rf"^not timed: .*{reason}", proc.stdout, re.M), proc.stdout
        assert len(CHECKSUM.findall(proc.stdout)) == 7  # the LSTM's y, cy, hy, dx, dcx, dhx, dw
    proc = example()
    assert proc.returncode == 0 and "not timed" not in proc.stdout, proc.stdout + proc.stderr
    assert re.search(r"^forward inference: .*GFLOPS", proc.stdout, re.M), proc.stdout


def committed_persistent_cells(lib):
    """The committed H200 matrix of this cuDNN version: its persistent-algorithm cells at
    the sample's shape with HALF data, FLOAT precision and TENSOR_OP math."""
    from cudnn_rnn.engine import gpu
    name = gpu.device_info().get("gpu")
    from cudnn_rnn.matrix.record import read_records
    path = ROOT / "results" / "nvidia-h200" / lib.version_string / "default.jsonl.gz"
    if name != "NVIDIA H200" or not path.exists():
        pytest.skip(f"no committed H200 matrix for {name} with cuDNN {lib.version_string}")
    recs, _ = read_records(path)
    # the default axes only: the run's variant cells (another direction, bias, layout, ...,
    # marked ``varies``) are other configurations than the one built below
    return [r for r in recs if not r.get("varies") and r["algo"] != "STANDARD"
            and r["data_type"] == "HALF"
            and r["math_prec"] == "FLOAT" and r["math_type"] == "TENSOR_OP"
            and r["shape"]["hidden"] == 512 and r["shape"]["batch"] == 64
            and r["shape"]["seq_length"] == 20 and r["shape"]["layers"] == 2]


def test_persistent_algorithms_verify_where_the_committed_h200_run_says_they_do(lib, cuda):
    """Each persistent cell the committed run verified must verify again (a refusal of any
    call, a BAD_PARAM from a wrong argument included, fails the test), and each one it saw
    refused must be refused by the same call with the same status."""
    cells = committed_persistent_cells(lib)
    assert {r["outcome"] for r in cells} >= {"OK"} and len(cells) >= 12, len(cells)
    seen = {}
    for rec in cells:
        cfg = RNNConfig(mode=RNNMode[rec["cell"]], algo=RNNAlgo[rec["algo"]],
                        data_type=DataType.HALF, math_prec=DataType.FLOAT,
                        math_type=MathType.TENSOR_OP_MATH)
        with RNNFlow(cfg, lib, device=True, init="random") as flow:
            result = flow.run()
            if rec["outcome"] == "OK":
                assert result.failure is None, (rec["id"], result.failure)
                check = compare(cfg, flow.drawn, readback.outputs(flow))
                _ERRORS.append({"label": f"HALF/FLOAT/TENSOR_OP {cfg.algo.name}",
                                "config": cfg.as_record(), **check.as_record()})
                assert check.passed, (rec["id"], check.errors)
                if cfg.algo == RNNAlgo.PERSIST_DYNAMIC:
                    assert "build_dynamic" in result.reached
            else:
                f = result.failure
                assert f is not None and (f.call, f.status) == (rec["failed_call"], rec["status"]), \
                    (rec["id"], f, rec["failed_call"], rec["status"])
        seen[f"{rec['algo']} {rec['cell']}"] = rec["outcome"]
    print(seen)