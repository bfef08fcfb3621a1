"""The ReLU kink recheck on the cells that called for it (marker ``gpu``): on the H200 with
cuDNN 9.19, FLOAT/FLOAT/FMA bidirectional RELU at the default matrix's shape gave dx 4.0e-4
and dw 4.1e-4 under all three algorithms (outputs within 5.4e-7; the other cells within
3e-6). If a derivative on the other side of zero explains it, the recheck finds it."""
import pytest

from cudnn_rnn.bindings.enums import DataType, DirectionMode, MathType, RNNAlgo, RNNMode
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.matrix.execute import run_cell
from cudnn_rnn.matrix.cells import Cell

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("algo", [RNNAlgo.STANDARD, RNNAlgo.PERSIST_STATIC,
                                  RNNAlgo.PERSIST_DYNAMIC], ids=lambda a: a.name)
def test_fp32_bidirectional_relu_gradients_are_explained_by_switched_derivatives(lib, cuda,
                                                                                algo):
    cfg = RNNConfig(seq_length=20, num_layers=2, hidden_size=512, mini_batch=64,
                    input_size=512, mode=RNNMode.RNN_RELU,
                    direction=DirectionMode.BIDIRECTIONAL, data_type=DataType.FLOAT,
                    math_prec=DataType.FLOAT, math_type=MathType.FMA_MATH, algo=algo)
    rec = run_cell(Cell(cfg, "gpu test"), lib, device=True, time_it=False).as_json()
    kinks = rec["verification"].get("relu_kinks")
    print(f"\n{algo.name}: {rec['outcome']} errors {rec['errors']} kinks {kinks}")
    assert rec["outcome"] == "OK", rec["reason"]
    if kinks:  # the recheck ran: it names what it switched, and the errors before
        assert kinks["passed"] and kinks["switched"]
        assert max(kinks["errors_before"].values()) > rec["verification"]["gradient_tolerance"]


def test_one_worker_handle_serves_cells_in_turn_and_leaves_nothing_behind(cuda):
    """The worker's shared cuDNN handle: cells of different data types, a refused one
    between them, each verified on its own stream; no cell leaves a cuDNN object alive
    (the worker's handle is not counted) and device memory in use returns to the same."""
    from cudnn_rnn.matrix.worker import start_worker
    from .test_gpu_flow import SMALL
    worker, info = start_worker(None, {"reps": 3, "variant_reps": 3})
    try:
        assert info["device_stages"]
        cells = [Cell(SMALL.replace(mode=RNNMode.LSTM), "a"),
                 Cell(SMALL.replace(data_type=DataType.INT8), "refused"),
                 Cell(SMALL.replace(mode=RNNMode.GRU, data_type=DataType.HALF,
                                    math_type=MathType.TENSOR_OP_MATH), "b"),
                 Cell(SMALL.replace(mode=RNNMode.LSTM), "again")]
        recs = [worker.run(c, timeout=120).as_json() for c in cells]
    finally:
        worker.close()
    assert [r["outcome"] for r in recs] == ["OK", "NOT_SUPPORTED", "OK", "OK"], recs
    assert all(r["live_descriptors"] == 0 for r in recs)
    assert len({r["worker_pid"] for r in recs}) == 1  # one process, so one handle
    assert recs[0]["device_memory_bytes"] == recs[3]["device_memory_bytes"]
    assert recs[0]["errors"] == recs[3]["errors"]  # the same cell computes the same again
