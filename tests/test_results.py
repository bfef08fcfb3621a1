import json

import pytest

from cudnn_rnn.results import MalformedResults, ResultsFile, read_records


def rec(i):
    return {"id": f"c{i}", "outcome": "OK"}


def test_torn_last_line_is_dropped_and_truncated_on_resume(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps(rec(1)) + "\n" + json.dumps(rec(2)) + "\n" + '{"id": "c3", "outc')
    records, good = read_records(p)
    assert [r["id"] for r in records] == ["c1", "c2"]
    with ResultsFile(p, resume=True) as out:
        assert [r["id"] for r in out.existing] == ["c1", "c2"]
        out.write(rec(3))
    assert [r["id"] for r in read_records(p)[0]] == ["c1", "c2", "c3"]


def test_complete_json_without_newline_counts_as_torn(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps(rec(1)) + "\n" + json.dumps(rec(2)))
    assert [r["id"] for r in read_records(p)[0]] == ["c1"]


def test_a_bad_line_in_the_middle_is_an_error(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps(rec(1)) + "\nnot json\n" + json.dumps(rec(2)) + "\n")
    with pytest.raises(MalformedResults, match="line 2"):
        read_records(p)
    p.write_text(json.dumps([1, 2]) + "\n")
    with pytest.raises(MalformedResults, match="not a probe record"):
        read_records(p)
