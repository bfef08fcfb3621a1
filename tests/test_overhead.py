"""The overhead check's command line and shape parsing (no GPU needed)."""
import pytest

from cudnn_rnn import overhead
from cudnn_rnn.cli import BadInput

from .test_cli import assert_one_line_exit_2, run


def test_shapes_parse():
    s = overhead.parse_shape("lstm:20,2,512,64")
    assert s == {"cell": "LSTM", "seq": 20, "layers": 2, "hidden": 512, "batch": 64,
                 "input_size": 512, "bidirectional": False, "dtype": "float32"}
    assert overhead.parse_shape("GRU:5,1,8,2:float16")["dtype"] == "float16"
    assert all(overhead.parse_shape(s) for s in overhead.DEFAULT_SHAPES)


@pytest.mark.parametrize("text", ["LSTM", "LSTM:1,2,3", "LSTMX:1,1,1,1", "LSTM:0,1,1,1",
                                  "LSTM:1,1,1,1:int8", "LSTM:1,1,1,1:float16:x"])
def test_bad_shapes(text):
    with pytest.raises(BadInput, match="CELL:T,L,H,B"):
        overhead.parse_shape(text)


def test_cli_errors_are_one_line():
    assert_one_line_exit_2(run("cudnn_rnn.overhead", "--shape", "LSTM:1,2"), "bad --shape")
    assert_one_line_exit_2(run("cudnn_rnn.overhead", "--mode", "x"), "invalid choice")
    assert_one_line_exit_2(run("cudnn_rnn.overhead", "--shape", "LSTM:2,1,8,2", CUDNN_RNN_NO_GPU="1"),
                           "needs a CUDA GPU")
