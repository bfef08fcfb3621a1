"""The record's one owner: built by Record, written by ResultsFile, read by read_records."""
import json
from dataclasses import fields
from pathlib import Path

import pytest

from cudnn_rnn.bindings.enums import DataType, MathType, RNNMode
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.matrix import baseline, jobs
from cudnn_rnn.matrix.record import RECORD, SCHEMA, Record, ResultsFile, add_speedup, read_records
from cudnn_rnn.matrix.cells import Cell
from cudnn_rnn.matrix.errors import MalformedResults

FIX = Path(__file__).parent / "fixtures"
CELL = Cell(RNNConfig(mode=RNNMode.LSTM, hidden_size=64, data_type=DataType.HALF), "b")
WHERE = {"cudnn_version": "9.19.0", "library_path": "/x/libcudnn.so.9"}


def test_every_key_a_recorded_run_carries_is_a_field_of_the_record():
    """Schema-1 records (before 0.3.0) hold a subset of today's keys: nothing is lost."""
    keys = {f.name for f in fields(Record)}
    paths = sorted(FIX.glob("h200-*/default.jsonl"))
    assert len(paths) == 2
    for path in paths:
        recs, _ = read_records(path)
        assert recs and all(set(r) <= keys for r in recs), path
        assert all("schema" not in r for r in recs)  # written by 0.2


def test_a_lost_cell_round_trips_through_the_writer_and_the_reader(tmp_path):
    rec = Record.unfinished(CELL, WHERE, "TIMEOUT", "TIMEOUT", "no result within 1 s")
    with ResultsFile(tmp_path / "r.jsonl", resume=False) as out:
        out.write(rec.as_json())
    back, _ = read_records(tmp_path / "r.jsonl")
    assert back == [json.loads(json.dumps(rec.as_json()))]
    assert back[0]["schema"] == SCHEMA and back[0]["cell"] == "LSTM"
    assert back[0]["math_prec"] == "FLOAT"  # derived from HALF data, as cuDNN is given it


def test_the_writer_refuses_a_record_its_reader_would_refuse(tmp_path):
    path = tmp_path / "r.jsonl"
    good = Record.unfinished(CELL, WHERE, "CRASH", "SIGSEGV", "died").as_json()
    with ResultsFile(path, resume=False) as out:
        out.write(good)
        before = path.read_bytes()
        with pytest.raises(ValueError, match="not a probe record"):
            out.write(dict(good, outcome="OK"))  # OK without verification errors
        with pytest.raises(ValueError, match="not a probe record"):
            out.write(dict(good, surprise=1))
    assert path.read_bytes() == before


def test_a_sticky_cuda_error_turns_any_outcome_into_a_crash_and_keeps_the_first():
    rec = Record.of(CELL, "9.19.0", "/x")
    rec.outcome, rec.failed_call, rec.status, rec.reason = \
        "NOT_SUPPORTED", "cudnnRNNForward", "NOT_SUPPORTED", "why"
    rec.context_lost("the CUDA context is in error after this cell: X")
    assert (rec.outcome, rec.status) == ("CRASH", "CUDA_ERROR")
    assert rec.notes == ["before the context check: NOT_SUPPORTED (cudnnRNNForward: "
                         "NOT_SUPPORTED: why)"]
    crashed = Record.unfinished(CELL, WHERE, "CRASH", "CUDA_ERROR", "first")
    crashed.context_lost("found")
    assert (crashed.reason, crashed.notes) == ("first", ["found"])
    assert problem_free(crashed)


def problem_free(rec: Record) -> bool:
    from cudnn_rnn.matrix.jsontypes import problem
    return problem(rec.as_json(), RECORD, "rec") is None


def test_a_tool_error_names_the_exception_and_where_it_was_raised():
    try:
        {}["missing"]
    except KeyError as exc:
        rec = Record.tool_error(CELL, WHERE, exc)
    assert (rec.outcome, rec.status) == ("ERROR", "KeyError")
    assert rec.notes and rec.notes[-1].startswith("test_record.py:")


def test_speedup_is_over_the_baseline_of_the_same_run_and_none_without_it():
    recs = {r["id"]: r for r in read_records(FIX / "h200-919" / "default.jsonl")[0]}
    fast = next(r for r in recs.values() if r["outcome"] == "OK" and not baseline.is_baseline(r))
    mine = Record.from_json(dict(fast, speedup=None, baseline_id=None))
    add_speedup(mine, {k: Record.from_json(r) for k, r in recs.items()})
    base = recs[baseline.id_of(fast["id"])]
    assert mine.speedup["forward_training"] == round(
        base["timings"]["forward_training"]["median_ms"]
        / fast["timings"]["forward_training"]["median_ms"], 4)
    alone = Record.from_json(dict(fast, speedup={"stale": 1.0}, baseline_id=None))
    add_speedup(alone, {})
    assert alone.speedup is None and alone.baseline_id == base["id"]


def test_a_record_read_back_is_the_record_written(tmp_path):
    for line in read_records(FIX / "h200-919" / "default.jsonl")[0][:50]:  # an older schema
        out = Record.from_json(line).as_json()
        assert {k: out[k] for k in line} == line  # every key it has, as written
        assert out["schema"] == line.get("schema", 1)
    rec = Record.unfinished(CELL, WHERE, "TIMEOUT", "TIMEOUT", "no result within 1 s")
    with ResultsFile(tmp_path / "r.jsonl", resume=False) as out_file:
        out_file.write(rec.as_json())
    back = read_records(tmp_path / "r.jsonl")[0][0]
    assert Record.from_json(back) == rec


def test_a_record_of_a_newer_schema_is_refused_with_what_to_do(tmp_path):
    rec = dict(Record.unfinished(CELL, WHERE, "CRASH", "SIGSEGV", "died").as_json(), schema=SCHEMA + 1,
               new_key=1)
    (tmp_path / "r.jsonl").write_text(json.dumps(rec) + "\n")
    with pytest.raises(MalformedResults, match=f"newer cudnn-rnn \\(record schema {SCHEMA + 1}"):
        read_records(tmp_path / "r.jsonl")


def test_replace_derives_again_what_was_derived_and_keeps_what_was_given():
    derived = RNNConfig(hidden_size=64)
    assert derived.replace(hidden_size=128).proj_size == 128
    assert derived.replace(hidden_size=128).input_size == 128
    assert derived.replace(data_type=DataType.DOUBLE).math_prec == DataType.DOUBLE
    given = RNNConfig(hidden_size=64, proj_size=16, mode=RNNMode.LSTM, math_prec=DataType.HALF,
                      data_type=DataType.HALF)
    assert given.replace(hidden_size=128).proj_size == 16
    assert given.replace(math_type=MathType.FMA_MATH).math_prec == DataType.HALF
    assert RNNConfig(hidden_size=64) == RNNConfig(hidden_size=64, input_size=64, proj_size=64)


def test_jobs_run_only_what_a_module_registered(monkeypatch):
    with pytest.raises(LookupError, match="no job named"):
        jobs.run("cudnn_rnn.compare.gemm:not_a_job", {})
    imported = []
    monkeypatch.setattr(jobs.importlib, "import_module", imported.append)
    with pytest.raises(LookupError, match="no job named"):
        jobs.run("os:system", {"command": "true"})
    assert imported == []  # a module outside the project is never even imported
    from cudnn_rnn.compare.gemm import gemm_rates
    assert jobs.name_of(gemm_rates) == "cudnn_rnn.compare.gemm:gemm_rates"
    assert jobs._JOBS[jobs.name_of(gemm_rates)] is gemm_rates


def test_a_job_asked_wrongly_is_raised_not_recorded_as_skipped(monkeypatch):
    """An unknown job or parameters its function does not take are this tool's mistake:
    raised in the caller (JobFailed), never a "skipped" entry a report would show as a
    finding; the worker lives on. A job the machine refuses (here: no GPU, also on a
    machine that has one) is skipped with its reason."""
    from cudnn_rnn.matrix.worker import start_worker
    monkeypatch.setenv("CUDNN_RNN_NO_GPU", "1")
    worker, _info = start_worker(None, {"no_device": True})
    try:
        with pytest.raises(jobs.JobFailed, match="no job named"):
            worker.job("cudnn_rnn.compare.gemm:not_a_job", {}, timeout=60)
        with pytest.raises(jobs.JobFailed, match="barrier_read: TypeError: missing a required argument: 'sizes'"):
            worker.job("cudnn_rnn.lowbit.barrier:barrier_read", {"sizez": []}, timeout=60)
        got = worker.job("cudnn_rnn.lowbit.barrier:barrier_read", {"sizes": [0]}, timeout=60)
        assert "NoGPU" in got["skipped"]
        # a bug inside a job (cells that are not cells: AttributeError) is this tool's too
        with pytest.raises(jobs.JobFailed, match="rehearse_cells: AttributeError"):
            worker.job("cudnn_rnn.matrix.warmup:rehearse_cells",
                       {"cells": [object()], "cudnn_path": None, "graphs": False}, timeout=60)
        assert worker.lost == 0  # the worker lives on
    finally:
        worker.close()


def _with_graphs(rec: dict, factor: float, refused: str | None = None) -> dict:
    """A recorded record as if its calls had also been captured: replays ``factor`` times
    its plain medians (``refused``: the forward inference call was not captured)."""
    graph = {k: dict(t, median_ms=t["median_ms"] * factor) for k, t in rec["timings"].items()}
    why = None
    if refused:
        graph.pop("forward_inference")
        why = {"forward_inference": refused}
    return dict(rec, graph_timings=graph, graph_refused=why)


def test_a_graph_timing_needs_its_plain_timing_and_no_refusal_beside_it():
    from cudnn_rnn.matrix.jsontypes import problem
    rec = next(r for r in read_records(FIX / "h200-919" / "default.jsonl")[0]
               if r["outcome"] == "OK")
    both = _with_graphs(rec, 0.5)
    both["graph_refused"] = {"forward_training": "x"}
    assert "needs a plain timing" in problem(both, RECORD, "rec")
    assert "without plain" in problem(dict(_with_graphs(rec, 0.5), timings=None,
                                           outcome="WRONG_RESULT"), RECORD, "rec")


def test_a_variant_may_carry_the_calls_its_run_timed_a_cell_of_the_product_all_four():
    from cudnn_rnn.matrix.jsontypes import problem
    rec = next(r for r in read_records(FIX / "h200-919" / "default.jsonl")[0]
               if r["outcome"] == "OK")
    one = dict(rec, timings={"forward_training": rec["timings"]["forward_training"]})
    assert "lacks 'forward_inference'" in problem(one, RECORD, "rec")
    variant = dict(one, varies={"base": rec["id"], "axis": "direction"})
    assert problem(variant, RECORD, "rec") is None
    assert "without plain" in problem(dict(variant, timings={}, graph_timings={
        "forward_training": rec["timings"]["forward_training"]}), RECORD, "rec")
