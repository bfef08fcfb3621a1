import json
from pathlib import Path

import pytest

from cudnn_rnn.matrix.record import MalformedResults, ResultsFile, read_records

RECORDED = json.loads((Path(__file__).parent / "fixtures" / "h200-919" / "default.jsonl")
                      .read_text().splitlines()[0])


def rec(i):
    return dict(RECORDED, id=f"c{i}")


def test_torn_last_line_is_dropped_and_truncated_on_resume(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps(rec(1)) + "\n" + json.dumps(rec(2)) + "\n" + '{"id": "c3", "outc')
    records, good = read_records(p)
    assert [r["id"] for r in records] == ["c1", "c2"]
    with ResultsFile(p, resume=True) as out:
        assert [r["id"] for r in out.existing] == ["c1", "c2"]
        out.write(rec(3))
    assert [r["id"] for r in read_records(p)[0]] == ["c1", "c2", "c3"]


def test_a_whole_last_record_without_its_newline_is_kept_and_the_run_goes_on_after_it(
        tmp_path, capsys):
    """A write that stopped just before the newline left a whole record (an object cut
    before its closing brace is not JSON): nothing already recorded is lost."""
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps(rec(1)) + "\n" + json.dumps(rec(2)))
    assert [r["id"] for r in read_records(p)[0]] == ["c1", "c2"]
    assert "torn" not in capsys.readouterr().err
    with ResultsFile(p, resume=True) as out:
        assert [r["id"] for r in out.existing] == ["c1", "c2"]
        out.write(rec(3))
    assert [r["id"] for r in read_records(p)[0]] == ["c1", "c2", "c3"]
    assert p.read_text().count("\n") == 3


def test_a_last_line_that_is_json_but_not_a_record_is_torn(tmp_path, capsys):
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps(rec(1)) + "\n" + "12")  # a number cut from a longer line
    assert [r["id"] for r in read_records(p)[0]] == ["c1"]
    assert "line 2 is torn" in capsys.readouterr().err


def test_a_bad_line_in_the_middle_is_an_error(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps(rec(1)) + "\nnot json\n" + json.dumps(rec(2)) + "\n")
    with pytest.raises(MalformedResults, match="line 2"):
        read_records(p)
    p.write_text(json.dumps([1, 2]) + "\n")
    with pytest.raises(MalformedResults, match="not a probe record"):
        read_records(p)


@pytest.mark.parametrize("change,says", [
    ({"shape": 5}, "line 1 is not a probe record (shape: expected an object, got 5)"),
    ({"shape": {"seq_length": 20, "layers": 2, "hidden": "512", "batch": 64}}, "shape.hidden"),
    ({"outcome": None}, "outcome: expected a name"),
    ({"timings": dict(RECORDED["timings"], forward_training=dict(
        RECORDED["timings"]["forward_training"], median_ms=float("nan")))},
     "timings.forward_training.median_ms: expected a positive, finite number, got nan"),
    ({"timings": {"forward_training": {"median_ms": 1.0, "tflops": 1}}}, "lacks 'max_ms'"),
    ({"errors": None, "outcome": "OK"}, "an OK cell without every verification error"),
    ({"id": ["x"]}, "id: expected a string"),
    # timings on a cell cuDNN refused: what could they have timed
    ({"outcome": "NOT_SUPPORTED"}, "timings on a cell that is not OK"),
    # a cell (not a variant) timed in fewer than all four calls
    ({"varies": None, "timings": {k: v for k, v in RECORDED["timings"].items()
                                  if k != "backward_data"}}, "timings: lacks 'backward_data'"),
])
def test_a_record_of_the_wrong_structure_is_named(tmp_path, change, says):
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps(dict(RECORDED, **change)) + "\n")
    with pytest.raises(MalformedResults) as info:
        read_records(p)
    assert says in str(info.value)


def test_every_committed_and_recorded_run_reads():
    """The checks accept every record a real run wrote (committed results and fixtures)."""
    root = Path(__file__).resolve().parent.parent
    files = [f for f in [*root.glob("results/*/*/*.jsonl"), *root.glob("tests/fixtures/*/*.jsonl")]
             if f.name != "bench.jsonl"]
    assert len(files) >= 8
    for f in files:
        assert read_records(f)[0], f
