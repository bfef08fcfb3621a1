"""examples/charlm.py's comparison with a precision table, on the CPU (no torch needed):
which table it reads, which calibration methods it lets the tuner try, and what it prints
of the table's row for the configuration chosen."""
import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("charlm_example_table",
                                              ROOT / "examples" / "charlm.py")
example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(example)


def _rec(id_, engine, fmt, method, outcome="OK", bpc=None):
    return {"id": id_, "engine": engine, "format": fmt, "calibration": method,
            "outcome": outcome, "metrics": {} if bpc is None else {"bpc": bpc}}


RECORDS = {r["id"]: r for r in [
    _rec("persistent/fp16", "persistent", None, None, bpc=1.54213),
    _rec("persistent/int8/both/p99.9", "persistent", "int8", "p99.9", bpc=1.5427),
    _rec("persistent/e4m3/both/mse", "persistent", "e4m3", "mse", bpc=1.54581),
    _rec("persistent/e4m3/input/max", "persistent", "e4m3", "max", "WRONG_RESULT"),
    _rec("lowbit/e4m3/both/entropy", "cuBLASLt", "e4m3", "entropy", bpc=1.5461)]}


def test_the_tuner_tries_the_methods_the_table_ran_the_persistent_kernel_with():
    assert example.table_methods(RECORDS, "e4m3") == ("mse",)  # a failed row's method: not
    assert example.table_methods(RECORDS) == ("p99.9", "mse")  # in the table's order
    assert example.table_methods({"persistent/fp16": RECORDS["persistent/fp16"]}) is None


def test_the_tables_row_of_the_choice_is_printed_or_its_absence_said():
    path = Path("t.json")
    line = example.table_line(RECORDS, path, "persistent/e4m3/both/mse")
    assert line.endswith("persistent/e4m3/both/mse (t.json): 1.5458 bits/char")
    assert "has no verified row persistent/e4m3/input/max" in example.table_line(
        RECORDS, path, "persistent/e4m3/input/max")
    assert "no precision table" in example.table_line(None, None, "persistent/fp16")


def test_the_committed_table_of_this_gpu_is_found_and_read(tmp_path):
    path = example.precision.shipped_table(ROOT / "results", "lstm", "NVIDIA H200", "9.19.0")
    assert path == ROOT / "results" / "nvidia-h200" / "9.19.0" / "precision.json"
    records = example.table_records(path)
    assert records["persistent/fp16"]["engine"] == "persistent"
    assert example.precision.shipped_table(ROOT / "results", "gru", "NVIDIA H200",
                                           "9.19.0").name == "precision-gru.json"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"rows": []}))
    with pytest.raises(ValueError, match="is not a precision table"):
        example.table_records(bad)
    with pytest.raises(ValueError, match="is not a precision table"):
        example.table_records(tmp_path / "missing.json")


def test_without_a_loadable_cudnn_there_is_no_committed_table_and_no_traceback(monkeypatch):
    def missing(*_a, **_k):
        raise example.bindings.errors.LibraryNotFound("no libcudnn here")
    monkeypatch.setattr(example.bindings, "load", missing)
    assert example.find_table(None, "lstm") == (None, None)  # accelerate says why, later
    given = ROOT / "results" / "nvidia-h200" / "9.19.0" / "precision-gru.json"
    path, records = example.find_table(str(given), "gru")  # a given table needs no cuDNN
    assert path == given and records and all(r["id"] == k for k, r in records.items())


def test_a_table_of_another_model_is_refused_in_one_line(tmp_path):
    gru = ROOT / "results" / "nvidia-h200" / "9.19.0" / "precision-gru.json"
    with pytest.raises(ValueError, match="of 'gru character model', not of the shipped lstm"
                       ) as exc:
        example.find_table(str(gru), "lstm")
    assert "(or --model gru)" in str(exc.value) and "\n" not in str(exc.value)
    assert example.find_table(str(gru), "gru")[1]  # its own model's: read
    doc = json.loads(gru.read_text())
    for change in ({"task": None, "name": "the module", "recorded": None},  # a user's module
                   {"recorded": {"bpc": 1.9}},  # another (retrained) GRU of the same shape
                   {"shape": {"cell": None}}):  # a malformed one of the same model: read
        bad = json.loads(json.dumps(doc))
        bad["result"]["source"].update(change)
        (tmp_path / "t.json").write_text(json.dumps(bad))
        if "shape" in change:
            assert example.find_table(str(tmp_path / "t.json"), "gru")[1]
            continue
        with pytest.raises(ValueError, match="not of the shipped gru model") as exc:
            example.find_table(str(tmp_path / "t.json"), "gru")
        assert "--model" not in str(exc.value)
    (tmp_path / "t.json").write_text(json.dumps({"result": {"records": [], "source": 3}}))
    with pytest.raises(ValueError, match="is not a precision table"):
        example.find_table(str(tmp_path / "t.json"), "gru")
