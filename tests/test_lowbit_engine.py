"""The GEMM engine's host side (no GPU): what it uploads per precision, what it refuses and
why, its candidates and their records, and how the tuner ranks them beside cuDNN's (from a
recorded H200 run)."""
import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pytest

from cudnn_rnn import tune
from cudnn_rnn.bindings import cublaslt
from cudnn_rnn.bindings.enums import DataType, DirectionMode, RNNInputMode, RNNMode
from cudnn_rnn.engine import dtypes
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.lowbit import candidates as C
from cudnn_rnn.lowbit import configs as K
from cudnn_rnn.lowbit import model, operands
from cudnn_rnn.lowbit.engine import Forward, Unsupported, check_supported

FIXTURE = Path(__file__).parent / "fixtures" / "lowbit-h200" / "seed_shape.json"


def _cfg(mode=RNNMode.LSTM, **kw):
    base = dict(seq_length=4, num_layers=2, hidden_size=16, mini_batch=3, input_size=8,
                mode=mode, direction=DirectionMode.BIDIRECTIONAL)
    return RNNConfig(**(base | kw))


@pytest.fixture(scope="module")
def drawn():
    cfg = _cfg()
    return cfg, C.draw(cfg, seed=1)


def test_draws_are_float32_exact_and_the_calibration_batch_is_another(drawn):
    cfg, v = drawn
    arrays = [a for s in v["stacked"] for a in (s.W, s.R, s.bW, s.bR)] + \
        [a for b in ("io", "calibration") for a in v[b].values()]
    assert all(np.array_equal(a, a.astype(np.float32).astype(np.float64)) for a in arrays)
    assert v["io"]["x"].shape == cfg.x_shape() and not np.array_equal(v["io"]["x"],
                                                                       v["calibration"]["x"])
    assert np.abs(v["stacked"][0].W).max() <= 1 / np.sqrt(cfg.hidden_size)


@pytest.mark.parametrize("fmt", model.FORMATS)
@pytest.mark.parametrize("parts", model.PARTS)
def test_eight_bit_operands_are_the_models_quantized_weights(drawn, fmt, parts):
    cfg, v = drawn
    st = v["stacked"]
    plan = model.plan(cfg, st, model.calibrate(cfg, st, **v["calibration"]), fmt, parts)
    ops = operands.prepare(st, "fp16", plan)
    want = model.weights_dequantized(st, plan)
    for k, (o, s, w) in enumerate(zip(ops, operands.seen_weights(st, ops), want)):
        for name, op, mat in (("input", o.input, s.W), ("recurrent", o.recurrent, s.R)):
            scales = getattr(plan, name)[k]
            if scales is None:  # the float rest: FP16 codes, factor 1
                assert op.precision == "fp16" and op.codes.dtype == np.float16
                assert np.array_equal(op.dq, np.ones(op.dq.shape, np.float32))
                continue
            assert op.precision == operands.FORMAT_PRECISION[fmt]
            assert np.array_equal(mat, w.W if name == "input" else w.R)
            # dq[col] turns the GEMM's sum of codes into the float product
            want_dq = scales.act * np.broadcast_to(scales.weight, op.dq.shape)
            assert np.allclose(op.dq, want_dq, rtol=1e-7)
            assert op.act_scale == scales.act


@pytest.mark.parametrize("fmt", (None,) + model.FORMATS)
@pytest.mark.parametrize("parts", model.PARTS)
def test_the_precisions_known_before_converting_are_those_prepare_converts_to(drawn, fmt,
                                                                              parts):
    """A launch's layout is judged on operands.precisions, before any weight is converted:
    they must be the precisions prepare then gives each GEMM."""
    cfg, v = drawn
    st = v["stacked"]
    plan = None if fmt is None else model.plan(
        cfg, st, model.calibrate(cfg, st, **v["calibration"]), fmt, parts)
    for rest in ("fp16", "bf16"):
        ops = operands.prepare(st, rest, plan)
        assert operands.precisions(st, rest, plan) == [
            (o.input.precision, o.recurrent.precision) for o in ops]
    with pytest.raises(ValueError, match="float precision"):
        operands.precisions(st, "int8", plan)
    projected = [dataclasses.replace(s, P=np.ones((cfg.hidden_size, cfg.hidden_size)))
                 for s in st]
    with pytest.raises(ValueError, match="no projection"):
        operands.precisions(projected, "fp16", plan)


@pytest.mark.parametrize("precision", operands.FLOAT_PRECISIONS)
def test_float_operands_round_to_their_type(drawn, precision):
    w = drawn[1]["stacked"][0].W
    op = operands.weight_operand(w, precision, None)
    want = {"fp32": w, "tf32": w, "fp16": w.astype(np.float16).astype(np.float64),
            "bf16": dtypes.decode(dtypes.encode(w, DataType.BFLOAT16), DataType.BFLOAT16)}
    assert np.array_equal(op.seen, want[precision]) and op.act_scale == 1.0
    if precision == "bf16":
        assert op.codes.dtype == np.uint16 and not np.array_equal(op.seen, w)


@pytest.mark.parametrize("fmt", ["int8", "e4m3"])
@pytest.mark.parametrize("rows_a_block", [1, 7, 1000])
def test_a_weight_converted_block_by_block_equals_the_whole(drawn, monkeypatch, fmt,
                                                            rows_a_block):
    """An 8-bit weight is converted a block of rows at a time (each block's per-row scales
    sliced with it, the last block short): the same codes and float64 weights as in one."""
    cfg, values = drawn
    plan = model.plan(cfg, values["stacked"], model.calibrate(cfg, values["stacked"],
                                                              **values["calibration"]),
                      fmt, "both", channel=True)
    w, scales = values["stacked"][0].R, plan.recurrent[0]
    assert np.ndim(scales.weight) == 1 and w.shape[0] % 7  # per row; 7 leaves a short block
    precision = operands.FORMAT_PRECISION[fmt]
    monkeypatch.setattr(operands, "BLOCK_VALUES", w.size)
    whole = operands.weight_operand(w, precision, scales)
    monkeypatch.setattr(operands, "BLOCK_VALUES", rows_a_block * w.shape[1])
    blocked = operands.weight_operand(w, precision, scales)
    assert blocked.codes.dtype == whole.codes.dtype
    assert np.array_equal(blocked.codes, whole.codes)
    assert np.array_equal(blocked.seen, whole.seen)
    assert len(np.unique(np.asarray(scales.weight))) > 1  # the rows' scales differ


def test_an_eight_bit_gemm_without_scales_or_an_unknown_precision_is_refused(drawn):
    w = drawn[1]["stacked"][0].W
    with pytest.raises(ValueError, match="needs scales"):
        operands.weight_operand(w, "int8", None)
    with pytest.raises(ValueError, match="float precision"):
        operands.prepare(drawn[1]["stacked"], "int8")


@pytest.mark.parametrize("cfg, precisions, cc, needle", [
    (_cfg(), {"fp16", "fp8"}, (8, 0), "fp8 tensor-core GEMMs need compute capability 8.9+"),
    (_cfg(), {"int8"}, (7, 0), "int8 tensor-core GEMMs need compute capability 7.5+"),
    (_cfg(input_mode=RNNInputMode.SKIP_INPUT, input_size=16), {"fp16"}, (9, 0), "SKIP_INPUT"),
    (_cfg(proj_size=8), {"fp16"}, (9, 0), "projection"),
    (_cfg(lengths="descending:2"), {"fp16"}, (9, 0), "equal length"),
])
def test_what_the_engine_does_not_build_or_this_gpu_cannot_run(cfg, precisions, cc, needle):
    with pytest.raises(Unsupported, match=needle):
        check_supported(cfg, precisions, cc)
    check_supported(_cfg(), {"fp16", "int8", "fp8"}, (9, 0))  # the H200 runs them all


def test_configs_names_labels_and_families():
    gemm = ["fp32", "tf32", "fp16", "bf16", "int8/input", "int8/recurrent", "int8/both",
            "e4m3/input", "e4m3/recurrent", "e4m3/both"]
    persistent = ["persistent:" + n for n in gemm[2:]]  # tensor cores only: no fp32, tf32
    assert [c.name for c in K.FAMILIES["any"]] == gemm + persistent
    assert [c.name for c in K.FAMILIES["int8"]] == gemm[4:7] + persistent[2:5]
    assert [c.name for c in K.FAMILIES["fp16"]] == ["fp16", "persistent:fp16"]
    assert set(K.FAMILIES) == set(tune.FAMILIES)
    assert K.parse("int8/input").label() == "cuBLASLt GEMMs int8/input (+fp16)"
    assert K.parse("e4m3/both").label() == "cuBLASLt GEMMs e4m3/both"
    assert K.parse("persistent:int8/recurrent").label() == "persistent kernel int8/recurrent (+fp16)"
    assert K.parse("persistent:bf16").engine == "persistent"
    assert K.parse("e4m3/both").bound == K.BOUNDS["e4m3"] > K.BOUNDS["int8"] > K.BOUNDS["fp16"]
    with pytest.raises(ValueError, match="no engine configuration named 'int4'"):
        K.parse("int4")


def test_a_failed_cublaslt_call_becomes_a_record_with_its_status():
    """Without a GPU, cublasLtCreate answers NOT_INITIALIZED: the real library's refusal."""
    from cudnn_rnn.lowbit.gemm import LtHandle
    if cublaslt.loaded() is None:
        cublaslt.load()
    try:
        LtHandle().close()
    except cublaslt.errors.CublasLtError as exc:
        rec = C.refused(_cfg(), K.parse("int8/both"), exc, "build")
        assert (rec["outcome"], rec["failed_call"], rec["status"]) == (
            "ERROR", "cublasLtCreate", "NOT_INITIALIZED")
        assert rec["status_code"] == 1 and rec["reason"] and rec["id"] == "lowbit/int8/both"
    else:
        pytest.skip("a GPU is present: cublasLtCreate succeeded")
    rec = C.refused(_cfg(), K.parse("e4m3/both"), Unsupported("fp8 needs 8.9+"), "build")
    assert (rec["outcome"], rec["status"], rec["reason"]) == ("NOT_SUPPORTED", "NOT_SUPPORTED",
                                                              "fp8 needs 8.9+")


@pytest.fixture(scope="module")
def recorded():
    return json.loads(FIXTURE.read_text())


def test_the_recorded_run_verified_every_configuration_within_its_bound(recorded):
    recs = recorded["records"]
    assert [r["config"] for r in recs] == [c.name for c in K.CONTROLS + K.GEMM_8BIT]
    for r in recs:
        assert r["outcome"] == "OK" and r["bound"] == K.parse(r["config"]).bound
        assert max(list(r["errors"].values()) + list(r["errors_seen"].values())) <= r["bound"]
        assert r["graph_timings"]["forward_inference"]["median_ms"] > 0
    # the 8-bit part shows in the error: E4M3 above INT8 above FP16, on the same weights
    worst = {r["config"]: max(r["errors"].values()) for r in recs}
    assert worst["e4m3/both"] > worst["int8/both"] > worst["fp16"]


def test_the_tuner_ranks_engine_candidates_with_cudnns(recorded):
    from .test_tune import FIX
    from cudnn_rnn.reporting import load
    cudnn = [r for r in load.load(FIX / "graphs-h200-919").records if r["cell"] == "LSTM"
             and load.is_sample_shape(r)]
    s = tune.summarise(cudnn + recorded["records"], training=False)
    ids = [r["id"] for r in s["ranked"]]
    assert {r["id"] for r in recorded["records"]} <= set(ids)
    assert [r["ms"] for r in s["ranked"]] == sorted(r["ms"] for r in s["ranked"])
    row = next(r for r in s["ranked"] if r["id"] == "lowbit/int8/both")
    rec = next(r for r in recorded["records"] if r["id"] == "lowbit/int8/both")
    assert row["config"] == "cuBLASLt GEMMs int8/both" and row["basis"] == "graph"
    assert row["ms"] == rec["graph_timings"]["forward_inference"]["median_ms"]
    base = next(r for r in s["ranked"] if r["config"] == "FLOAT/FLOAT/FMA/STANDARD")
    assert row["speedup_fp32"] == pytest.approx(base["ms"] / row["ms"])
    assert "cuBLASLt GEMMs int8/both" in tune.table(s)


def test_not_ranked_groups_refusals_by_call_status_and_reason():
    rec = C.refused(_cfg(), K.parse("e4m3/both"), Unsupported("fp8 needs 8.9+"), "build")
    other = C.refused(_cfg(), K.parse("e4m3/input"), Unsupported("fp8 needs 8.9+"), "build")
    s = tune.summarise([rec, other], training=False)
    text = tune.not_ranked(s)
    assert "not ranked (2)" in text
    assert ("NOT_SUPPORTED: cudnn_rnn.lowbit.engine -> NOT_SUPPORTED (fp8 needs 8.9+): "
            "cuBLASLt GEMMs e4m3/both, cuBLASLt GEMMs e4m3/input (+fp16)") in text


def test_the_committed_eight_bit_benchmark_regenerates_and_its_ratios_are_its_times():
    from cudnn_rnn.reporting import bench as bench_report
    from cudnn_rnn.reporting.eightbit import markdown
    d = Path(__file__).resolve().parent.parent / "results" / "nvidia-h200" / "9.19.0" / "lowbit"
    s = bench_report.read(d)
    assert s["runs"][-1]["provenance"]["commit"] and "dirty" not in s["runs"][-1]["provenance"]["commit"]
    rows = s["eight_bit"]["shapes"]
    assert len(rows) == len(s["shapes"]) and s["eight_bit"]["gemm_rates"]
    for r in rows:
        e, c = r["best_8bit"], r["best_16bit_cudnn"]
        assert e["format"] in ("int8", "e4m3") and e["max_error"] <= e["bound"]
        assert c["config"].split("/")[0] in ("HALF", "BFLOAT16")
        assert r["speedup_vs_cudnn16"] == pytest.approx(c["timing"]["median_ms"]
                                                        / e["timing"]["median_ms"])
    assert markdown(s["eight_bit"]) in (d / "bench.md").read_text()


class _HostForward(Forward):
    """Forward's buffers as numpy arrays (the layout the engines give them on the GPU)."""

    def __init__(self, cfg, bindable=None):
        self.cp, self.cfg = np, cfg
        if bindable is not None:
            self.BINDABLE = bindable
        self._io()


class _Stream:
    """What bind asks of a CuPy stream: its handle, whether it captures, events."""

    def __init__(self, ptr: int, capturing: bool = False):
        self.ptr, self.capturing, self.waited = ptr, capturing, []

    def is_capturing(self) -> bool:
        return self.capturing

    def record(self):
        return ("recorded on", self.ptr)

    def wait_event(self, event) -> None:
        self.waited.append(event)


def test_bind_puts_the_callers_arrays_in_place_of_the_engines_own_without_copies():
    f = _HostForward(_cfg())
    f.stream = _Stream(1)
    mine = {n: np.zeros_like(getattr(f, n)) for n in Forward.BINDABLE}
    callers = _Stream(2)
    f.bind(callers, **mine)
    assert all(getattr(f, n) is a for n, a in mine.items())
    assert all(f.buf[n] is mine[n] for n in ("y", "hy", "cy")) and f.stream is callers
    # the caller's stream waits for what the engine's own had (its set-up, its inputs)
    assert callers.waited == [("recorded on", 1)]


def test_bind_to_the_same_stream_or_a_capturing_one_adds_no_wait():
    f = _HostForward(_cfg())
    f.stream = first = _Stream(1)
    f.bind(_Stream(1))
    assert f.stream is first  # the same handle: nothing changes
    capture = _Stream(3, capturing=True)
    f.bind(capture)
    assert f.stream is capture and capture.waited == []


@pytest.mark.parametrize("name,array,needle", [
    ("x", lambda a: a[..., :-1], "x must be a C-contiguous float32 array of shape (4, 3, 8)"),
    ("hy", lambda a: a.astype(np.float64), "hy must be a C-contiguous float32"),
    ("y", lambda a: np.asfortranarray(a), "y must be a C-contiguous"),
    ("between", lambda a: a, "binds x, hx, cx, y, hy, cy only, not between"),
    ("hx", lambda a: a, "binds x only, not hx"),
])
def test_bind_refuses_what_does_not_fit_and_binds_nothing_then(name, array, needle):
    f = _HostForward(_cfg(), ("x",) if needle.startswith("binds x only") else None)
    own = {n: getattr(f, n) for n in Forward.BINDABLE}
    base = getattr(f, name, np.zeros((2, 2), np.float32))
    with pytest.raises(ValueError, match=re.escape(needle)):
        f.bind(None, **({"x": np.zeros_like(f.x)} | {name: array(base)}))
    assert all(getattr(f, n) is a for n, a in own.items())  # all or nothing
