"""CuPy's kernels compiled ahead by rehearsals in parallel processes (matrix/warmup.py): what
is rehearsed, that the rehearsals really run in spawned processes, and that a marker skips
them the next time. Without a GPU a cell's rehearsal fails (no device), which is reported
and leaves no marker; the GPU machine measures what the rehearsal saves."""
import itertools
import os
import re

import numpy as np
import pytest

from cudnn_rnn import probe, precision
from cudnn_rnn.charlm import network
from cudnn_rnn.charlm.table import FLOAT_FAMILIES, load_source
from cudnn_rnn.lowbit import partition, persistent
from cudnn_rnn.matrix import warmup
from cudnn_rnn.matrix.jobs import name_of

DEVICE = {"gpu": "NVIDIA H200", "compute_capability": "9.0", "cupy": "14.2.0",
          "cuda_runtime_cupy": "13.2"}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path / "kernels"))
    return tmp_path / "kernels"


def plan(*args):
    return probe.plan(probe.build_parser().parse_args(list(args)))[1]


def test_the_probe_rehearses_one_cell_per_data_type_cell_and_axis_value():
    cells = plan("--dtype", "FLOAT,HALF", "--cell", "LSTM,GRU")
    tasks = warmup.cell_tasks(cells, None, True)
    chosen = [c for _name, params in tasks for c in params["cells"]]
    assert {name for name, _ in tasks} == {name_of(warmup.rehearse_cells)}
    assert 1 <= len(tasks) <= warmup.MAX_PROCESSES and len(chosen) <= 48
    assert all(c.config.algo.name == "STANDARD" for c in chosen)
    kinds = {(c.config.data_type.name, c.config.mode.name, c.axis) for c in chosen}
    assert {("FLOAT", "LSTM", None), ("HALF", "GRU", None), ("FLOAT", "GRU", "direction")} <= kinds
    assert len({c.id for c in chosen}) == len(chosen)


def test_rehearsals_run_in_processes_of_their_own():
    """Each rehearsal runs in a spawned process (its own CUDA context; CuPy's cache filled
    for the run that follows), never in this one: the pids they report, and a rehearsal
    that fails says why (an unknown job here)."""
    empty = (name_of(warmup.rehearse_cells), {"cells": [], "cudnn_path": None, "graphs": True})
    ran = warmup.rehearse([empty] * 3 + [("cudnn_rnn.matrix.warmup:nothing", {})], 2, 120)
    pids = {pid for pid, _why, _s in ran}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    assert [why for _pid, why, _s in ran] == [None] * 3 + [
        "LookupError: no job named 'cudnn_rnn.matrix.warmup:nothing'"]


def test_rehearsals_are_said_and_a_marker_skips_them_next_time(cache):
    empty = [(name_of(warmup.rehearse_cells), {"cells": [], "cudnn_path": None,
                                               "graphs": True})] * 2
    said = warmup.warm("test", DEVICE, empty)
    assert said.startswith("CuPy's kernels compiled ahead: 2 rehearsals")
    found = re.search(r", ([0-9.]+) s \(the slowest ([0-9.]+) s;", said)
    wall, slowest = map(float, found.groups())
    assert slowest <= wall  # one rehearsal's own time, inside the whole
    assert warmup.marker("test", DEVICE).is_file()
    assert warmup.warm("test", DEVICE, empty) is None  # done before: nothing runs
    assert warmup.warm("test", dict(DEVICE, cupy="15.0.0"), empty) is not None  # another CuPy


def test_a_failed_rehearsal_is_said_and_leaves_no_marker(cache, monkeypatch):
    monkeypatch.setenv("CUDNN_RNN_NO_GPU", "1")
    tasks = warmup.cell_tasks(plan("--dtype", "FLOAT", "--cell", "GRU", "--math-type", "FMA",
                                   "--algo", "STANDARD"), None, True)
    said = warmup.warm("cells", DEVICE, tasks[:1])
    assert "1 of 1 rehearsals failed" in said and "NoGPU" in said
    assert not warmup.marker("cells", DEVICE).exists()


def _consts(cfg, fx, fh, settings):
    """The kernel constants of ``settings`` for ``cfg`` on an H200, or why it does not fit."""
    try:
        part = partition.plan(cfg, fx, fh, sm_count=132,
                              smem_per_block=227 * 1024 - persistent.STATIC_SMEM,
                              **settings.partition_args())
    except partition.DoesNotFit as exc:
        return f"does not fit: {exc}"
    return persistent.defines(cfg, part, fx == "int8")


def test_the_precision_table_rehearses_each_8bit_format_and_part_on_short_sequences():
    job = {"spec": {"model": str(network.shipped("lstm"))}, "reps": 20, "budget_s": 0.1,
           "methods": ("max", "mse")}
    tasks = precision.rehearsals(job)
    assert len(tasks) == 6 and {(p["formats"], p["parts"]) for _n, p in tasks} == {
        ((f,), (p,)) for f in ("int8", "e4m3") for p in ("input", "recurrent", "both")}
    params = tasks[0][1]
    assert params["reps"] == 1 and params["methods"] == ("max",)  # the first method only
    # cuDNN's families each in one rehearsal, none with a PERSIST_DYNAMIC row (no build)
    assert sorted(f for _n, p in tasks for f in p["families"]) == sorted(FLOAT_FAMILIES)
    assert not any(p["dynamic"] for _n, p in tasks)
    rest = [i for i, (_n, p) in enumerate(tasks) if p["rest"]]  # FP16 rows: once, in a
    assert len(rest) == 1 and not tasks[rest[0]][1]["families"]  # process with no family
    src = load_source(params["spec"])
    full = load_source(job["spec"])
    assert full.x.shape[:2] == (network.EVAL_SEQ, network.EVAL_BATCH)
    assert src.x.shape[:2] == (precision.REHEARSAL_SEQ, network.EVAL_BATCH)
    assert src.x_calibration.shape[0] == precision.REHEARSAL_SEQ
    np.testing.assert_array_equal(src.x[:, 0], full.x[:precision.REHEARSAL_SEQ, 0])  # same text
    # the rehearsal compiles the persistent kernels the table launches: their constants
    # (the partition of the batch over the CTAs) agree for every launch shape and format
    small_cfg, full_cfg = (s.rnn.config(*s.x.shape[:2]) for s in (src, full))
    for fx, fh in itertools.product(("fp16", "int8", "e4m3"), repeat=2):  # every part
        for settings in persistent.SETTINGS:
            consts = [_consts(c, fx, fh, settings) for c in (small_cfg, full_cfg)]
            assert consts[0] == consts[1], (fx, fh, settings)
