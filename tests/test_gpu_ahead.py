"""PERSIST_DYNAMIC cells built ahead by the worker's builder threads (marker ``gpu``): each
cell runs on the descriptor a builder set and built, verifies against float64, is timed,
leaves nothing behind, and computes what the same cell built by its own flow computes."""
import pytest

from cudnn_rnn.bindings.enums import DataType, DirectionMode, MathType, RNNAlgo, RNNMode
from cudnn_rnn.matrix.ahead import Schedule
from cudnn_rnn.matrix.cells import Cell
from cudnn_rnn.matrix.worker import start_worker

from .test_gpu_flow import SMALL

pytestmark = pytest.mark.gpu

DYNAMIC = SMALL.replace(algo=RNNAlgo.PERSIST_DYNAMIC)
CELLS = [Cell(SMALL.replace(mode=RNNMode.RNN_TANH), "standard"),  # the builders begin meanwhile
         Cell(DYNAMIC.replace(mode=RNNMode.LSTM), "lstm"),
         Cell(DYNAMIC.replace(mode=RNNMode.GRU, data_type=DataType.HALF,
                              math_type=MathType.TENSOR_OP_MATH), "gru-half"),
         Cell(DYNAMIC.replace(data_type=DataType.INT8), "refused"),
         Cell(DYNAMIC.replace(mode=RNNMode.RNN_RELU, direction=DirectionMode.BIDIRECTIONAL),
              "relu-bi")]


def _run(with_builder: bool) -> list:
    worker, info = start_worker(None, {"reps": 3, "variant_reps": 3})
    schedule = Schedule(CELLS)
    try:
        assert info["device_stages"]
        recs = []
        for i, cell in enumerate(CELLS):
            if with_builder:
                worker.ahead(schedule.starting(i))
            recs.append(worker.run(cell, timeout=120).as_json())
        return recs
    finally:
        worker.close()


def test_cells_built_ahead_verify_time_and_compute_what_their_own_build_computes(cuda):
    ahead, own = _run(True), _run(False)
    said = [(r["outcome"], r["reason"], r["notes"]) for r in ahead]
    assert [r["outcome"] for r in ahead] == ["OK", "OK", "OK", "NOT_SUPPORTED", "OK"], said
    assert [r["outcome"] for r in own] == [r["outcome"] for r in ahead]
    built = 0
    for a, o, cell in zip(ahead, own, CELLS):
        notes = [n for n in a["notes"] if "called ahead" in n]
        built += bool(notes)
        if notes:  # a dynamic cell that ran on the builder's descriptor
            assert cell.config.algo == RNNAlgo.PERSIST_DYNAMIC and a["outcome"] == "OK"
            assert "build_dynamic" in a["stages"] and a["timings"] and a["graph_timings"]
        assert not any("called ahead" in n for n in o["notes"])
        if a["outcome"] == "OK":  # how long it waited for builds under way: said, with one
            assert a["phase_s"]["builds_wait"] >= 0 and "builds_wait" not in o["phase_s"]
        assert a["errors"] == o["errors"], cell.id  # the same values, the same sums
        # no cuDNN object left, and the builders' memory is not the cell's
        assert a["live_descriptors"] == 0 and o["live_descriptors"] == 0, cell.id
        assert a["device_memory_bytes"] == o["device_memory_bytes"], cell.id
    # the three dynamic cells that run are named while the standard cell runs: a builder
    # has begun each before its cell reaches its build (at worst the first builds itself)
    assert built >= 2, said
