"""The ReLU kink recheck on the cells that called for it (marker ``gpu``): on the H200 with
cuDNN 9.19, FLOAT/FLOAT/FMA bidirectional RELU at the default matrix's shape gave dx 4.0e-4
and dw 4.1e-4 under all three algorithms (outputs within 5.4e-7; the other cells within
3e-6). If a derivative on the other side of zero explains it, the recheck finds it."""
import pytest

from cudnn_rnn.bindings.enums import DataType, DirectionMode, MathType, RNNAlgo, RNNMode
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.matrix.cell import run_cell
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
