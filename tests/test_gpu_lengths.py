"""Batches of unequal sequence lengths on a GPU, checked against the float64 reference that
runs each sequence to its own length (marker ``gpu``): every cell, both directions, all three
layouts, equal and unequal lengths, in FLOAT/FMA and HALF/FLOAT; and what the persistent
algorithms do with unequal lengths (verified, or refused with cuDNN's reason)."""
import pytest

from cudnn_rnn.bindings.enums import DataType, DirectionMode, MathType, RNNAlgo, RNNDataLayout, RNNMode
from cudnn_rnn.matrix.execute import run_cell
from cudnn_rnn.matrix.cells import Cell

from .test_gpu_flow import PRECISIONS, SMALL, run_and_compare

pytestmark = pytest.mark.gpu
# the packed layout needs non-increasing lengths; the unpacked ones take any order
UNEQUAL = {RNNDataLayout.SEQ_MAJOR_PACKED: "descending:2",
           RNNDataLayout.SEQ_MAJOR_UNPACKED: "random:2:3",
           RNNDataLayout.BATCH_MAJOR_UNPACKED: "random:2:3"}


# every sequence shorter than seqLength (6): the last step holds no sequence at all
ALL_SHORTER = "list:5:5:4:4:3:3:2:1"


@pytest.mark.parametrize("precision", ["FLOAT/FMA", "HALF/FLOAT"])
@pytest.mark.parametrize("lengths", ["equal", "unequal", "all shorter"])
@pytest.mark.parametrize("layout", list(UNEQUAL), ids=lambda v: v.name)
@pytest.mark.parametrize("direction", list(DirectionMode), ids=lambda d: d.name[:3])
@pytest.mark.parametrize("mode", list(RNNMode), ids=lambda c: c.name)
def test_each_sequence_runs_to_its_own_length(lib, cuda, mode, direction, layout, lengths,
                                              precision):
    form = {"equal": "equal", "unequal": UNEQUAL[layout], "all shorter": ALL_SHORTER}[lengths]
    cfg = SMALL.replace(mode=mode, direction=direction, layout=layout, lengths=form,
                        **PRECISIONS[precision])
    assert cfg.equal_lengths == (lengths == "equal")
    if lengths == "all shorter" and layout == RNNDataLayout.SEQ_MAJOR_PACKED:
        # cuDNN (9.14 to 9.28) wants a packed batch's maxSeqLength to be its longest length
        rec = run_cell(Cell(cfg, "gpu test"), lib, device=True, time_it=False).as_json()
        assert (rec["failed_call"], rec["status"], rec["reason"]) == (
            "cudnnSetRNNDataDescriptor", "BAD_PARAM", "maxSeqLengthInArray != maxSeqLength"), rec
        return
    check = run_and_compare(lib, cfg, f"{precision} lengths")
    assert check.passed, check.as_record()


@pytest.mark.parametrize("algo", [RNNAlgo.PERSIST_STATIC, RNNAlgo.PERSIST_STATIC_SMALL_H,
                                  RNNAlgo.PERSIST_DYNAMIC], ids=lambda a: a.name)
def test_persistent_algorithms_with_unequal_lengths_verify_or_say_why(lib, cuda, algo):
    cfg = SMALL.replace(mode=RNNMode.LSTM, algo=algo, data_type=DataType.HALF,
                        math_prec=DataType.FLOAT, math_type=MathType.TENSOR_OP_MATH,
                        lengths="descending:2")
    rec = run_cell(Cell(cfg, "gpu test"), lib, device=True, time_it=False).as_json()
    print(f"\n{algo.name} with unequal lengths: {rec['outcome']} {rec.get('failed_call')} "
          f"{rec.get('status')} {rec.get('reason')}")
    if rec["outcome"] != "OK":  # refused: cuDNN's call and status are recorded
        assert rec["outcome"] in ("NOT_SUPPORTED", "BAD_PARAM"), rec
        assert rec["failed_call"] and rec["status"]
