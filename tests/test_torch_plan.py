"""The plan file of an accelerated module: what the tuning found (configurations in the
order a shape tries them, the 8-bit thresholds, the module it was made for, the ranking)
saved and read back unchanged; anything else refused in one line naming the field. The
plan is made from the records of a real precision-table run (results/nvidia-h200/9.19.0).
No PyTorch, no GPU, except where a test says."""
import contextlib
import copy
import json
import re
import types

import pytest

from cudnn_rnn.cli import run_main
from cudnn_rnn.torch.errors import BadPlan, NotAccelerated
from cudnn_rnn.torch.plan import Plan

from .torch_plans import real_plan


@pytest.mark.parametrize("name,limit", [("fp8", 6e-2), ("int8", 2e-2), ("auto", 1e-2)])
def test_a_plan_reads_back_as_it_was_saved(tmp_path, name, limit):
    plan = real_plan(name, limit)
    path = plan.save(tmp_path / "plan.json")
    again = Plan.load(path)
    assert again.as_dict() == plan.as_dict()
    assert again.candidates == plan.candidates and again.module == plan.module
    assert list(tmp_path.iterdir()) == [path]  # nothing else written


def test_an_8bit_choice_keeps_its_thresholds_for_every_pseudo_layer(tmp_path):
    plan = Plan.load(real_plan("int8", 2e-2).save(tmp_path / "p.json"))
    c = plan.choice
    assert c.fmt == "int8" and c.calibration
    assert set(c.thresholds) == {"input", "recurrent", "projection"}
    assert all(len(v) == plan.module.layers for v in c.thresholds.values())


def _broken(change):
    d = copy.deepcopy(real_plan("fp8", 6e-2).as_dict())
    change(d)
    return d


def _eight_bit(d):
    return next(c for c in d["candidates"] if c["fmt"])


def _cudnn(d):
    return next(c for c in d["candidates"] if c["engine"] == "cuDNN")


BAD = [
    (lambda d: d.update(format="something else"), "is not a plan file written by cudnn_rnn.torch"),
    (lambda d: d.update(version=99), "is a plan of version 99"),
    (lambda d: d.pop("digest"), "has no 'digest'"),
    (lambda d: d.update(shape=[256]), "'shape' must be [seq, batch]"),
    (lambda d: d.update(shape=[256, 0]), "'shape' must be [seq, batch]"),
    (lambda d: d.update(tolerance="0.01"), "'tolerance' must be int or float, got str"),
    (lambda d: d.update(tolerance=-1), "'tolerance' must be a positive number"),
    (lambda d: d.update(candidates=[]), "has no candidates"),
    (lambda d: d.update(module={**d["module"], "cell": "TRANSFORMER"}), "'module' is not a module"),
    (lambda d: d.update(module={**d["module"], "wings": 2}), "'module' does not describe"),
    (lambda d: d["candidates"][0].update(engine="TensorRT"), "names the engine 'TensorRT'"),
    (lambda d: d["candidates"][0].update(errors={}), "'errors' must map outputs to finite"),
    (lambda d: d["candidates"][0].update(errors={"y": True}), "'errors' must map outputs to"),
    (lambda d: d["candidates"][0].update(ms="fast"), "'ms' must be a positive number of"),
    (lambda d: d["candidates"][0].update(ms=0), "'ms' must be a positive number of"),
    (lambda d: d["candidates"][0].update(plain_ms="x"), "'plain_ms' must be a positive number"),
    (lambda d: _eight_bit(d).update(settings={}), "'settings' must be text or null, got dict"),
    (lambda d: _cudnn(d).update(cudnn=5), "'cudnn' must be a list of four names"),
    (lambda d: _cudnn(d).update(cudnn=[["HALF"], "FLOAT", "DEFAULT_MATH", "STANDARD"]),
     "'cudnn' must be a list of four names"),
    (lambda d: _cudnn(d).update(cudnn=["HALF", "FLOAT", "WARP_MATH", "STANDARD"]),
     "names no MathType 'WARP_MATH'"),
    (lambda d: _cudnn(d).update(cudnn=None), "is a cuDNN candidate without"),
    (lambda d: _eight_bit(d).update(calibration="guess"), "names the 8-bit plan"),
    (lambda d: _eight_bit(d).update(settings="b9t9"), "names no launch shape 'b9t9'"),
    (lambda d: _eight_bit(d)["thresholds"].pop("input"), "needs 'thresholds' for"),
    (lambda d: _eight_bit(d)["thresholds"]["input"].append(1.0),
     "has input thresholds for 3 pseudo-layers; the module has 2"),
    (lambda d: _eight_bit(d)["thresholds"]["recurrent"].__setitem__(0, float("nan")),
     "has a threshold of the recurrent GEMM that is not a finite number"),
    (lambda d: _eight_bit(d)["thresholds"]["input"].__setitem__(0, -1.0),
     "has a threshold of the input GEMM that is not a finite number >= 0"),
    (lambda d: _eight_bit(d)["thresholds"]["input"].__setitem__(0, None),
     "lacks a threshold of the input GEMM, which its 'both' plan runs in 8 bits"),
    (lambda d: d["report"]["rows"][0].update(timed_as=5), "rows[0] is not a row of the table"),
    (lambda d: d["report"]["rows"][0].update(reason=["x"]), "rows[0] is not a row of the table"),
    (lambda d: d.update(report=[]), "'report' must be dict, got list"),
    (lambda d: d["report"]["rows"][0].pop("label"), "'report' rows[0] is not a row of the table"),
    (lambda d: d["report"]["rows"][1].update(status="lucky"), "rows[1] is not a row of the table"),
    (lambda d: d["report"]["rows"][0].update(ms="fast"), "rows[0] is not a row of the table"),
    (lambda d: d["report"].update(rows={}), "'rows' is not a list"),
    (lambda d: d["report"]["times"]["module"].update(eager=3.0), "'times' is not {who: {how:"),
    (lambda d: d["report"]["times"]["module"].update(eager={"ms": None}), "'times' is not"),
    (lambda d: d["report"]["rows"][2].pop("timed_as"), "rows[2] is not a row of the table"),
    (lambda d: d["report"]["rows"][0].pop("ms"), "rows[0] is not a row of the table"),
    (lambda d: d["report"].update(run={"device": "H200"}), "'run' is not {'device'"),
]


@pytest.mark.parametrize("change,needle", BAD)
def test_a_plan_that_is_not_one_is_refused_naming_the_field(tmp_path, change, needle):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(_broken(change)))
    with pytest.raises(BadPlan, match=re.escape(needle)) as exc:
        Plan.load(path)
    assert "\n" not in str(exc.value) and str(path) in str(exc.value)


@pytest.mark.parametrize("content", [b"", b"{not json", b"\xff\xfe", b"[1, 2]", b"null",
                                     b"[" * 100000 + b"]" * 100000])
def test_a_file_that_is_not_json_of_a_plan_is_one_line(tmp_path, content):
    path = tmp_path / "plan.json"
    path.write_bytes(content)
    with pytest.raises(BadPlan, match="not a plan file"):
        Plan.load(path)


def test_no_file_or_a_folder_is_one_line(tmp_path):
    for path in (tmp_path / "absent.json", tmp_path):
        with pytest.raises(BadPlan, match="no such plan file"):
            Plan.load(path)


def test_a_command_that_loads_a_bad_plan_prints_one_line_and_exits_2(tmp_path, capsys):
    path = tmp_path / "plan.json"
    path.write_text("{}")
    assert run_main(lambda argv: Plan.load(path), [], prog="deploy") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("deploy: error: ") and "Traceback" not in err


def _lstm_and_its_plan(tmp_path):
    """(torch, an LSTM of the shipped model's structure, the real plan made its own, the
    plan's file)."""
    torch = pytest.importorskip("torch", reason="loading a plan for a module needs PyTorch")
    from cudnn_rnn.torch import modules
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(64, 256, 2)
    plan = real_plan("fp8", 6e-2)
    plan.digest = modules.digest(modules.state_arrays(lstm))
    return torch, lstm, plan, plan.save(tmp_path / "plan.json")


def test_a_plan_is_loaded_only_for_the_module_it_was_made_for(tmp_path):
    torch, lstm, plan, path = _lstm_and_its_plan(tmp_path)
    from cudnn_rnn.torch import load
    with pytest.raises(BadPlan, match="was made for a LSTM 2 layers, 64 -> 256"):
        load(path, torch.nn.GRU(64, 256, 2))
    other = copy.deepcopy(lstm)
    with torch.no_grad():
        other.weight_hh_l1[0, 0] += 1e-3
    with pytest.raises(BadPlan, match="other weights of the same shape"):
        load(path, other)
    with pytest.raises(Exception, match="accelerate needs a CUDA GPU|on the CPU"):
        load(path, lstm)  # the right module: refused only for want of a GPU here


def test_a_plan_says_where_it_was_tuned_and_a_loaded_one_reads_back_every_table_field(tmp_path):
    from cudnn_rnn.torch import report
    plan = Plan.load(real_plan("int8", 2e-2).save(tmp_path / "p.json"))
    assert plan.tuned_on() == {"gpu": "NVIDIA H200", "compute_capability": "9.0",
                               "cudnn": "9.19.0"}
    text = report.table(plan)
    assert "tuned on NVIDIA H200 (compute capability 9.0), cuDNN 9.19.0" in text.splitlines()[0]
    assert str(report.Choice.of(plan)).startswith(plan.choice.label)


def test_a_plan_tuned_on_another_machine_is_refused_unless_asked(tmp_path, monkeypatch):
    """The GPU and cuDNN here are stood in for (no GPU on CI): what load compares, and the
    line it refuses with."""
    torch, lstm, plan, path = _lstm_and_its_plan(tmp_path)
    from cudnn_rnn.torch import load, tuning
    made = []
    monkeypatch.setattr(tuning, "_device", lambda module, torch: torch.device("cuda", 0))
    monkeypatch.setattr(tuning.gpu, "cupy_or_raise", lambda: types.SimpleNamespace(
        cuda=types.SimpleNamespace(Device=lambda i: contextlib.nullcontext())))
    monkeypatch.setattr(tuning.gpu, "device_info",
                        lambda: {"gpu": "NVIDIA A100-SXM4-80GB", "compute_capability": "8.0"})
    monkeypatch.setattr(tuning, "_accelerated", lambda plan, rnn, device: made.append(plan) or plan)
    with pytest.raises(BadPlan, match=re.escape(
            "was tuned on NVIDIA H200 (compute capability 9.0), cuDNN 9.19.0; this is "
            "NVIDIA A100-SXM4-80GB (compute capability 8.0), cuDNN ")):
        load(path, lstm)
    assert made == []
    assert load(path, lstm, tuned_elsewhere=True).choice == plan.choice
    # the machine it was tuned on loads it as it is: the plan as if tuned with the cuDNN
    # this process loads (the real library's version, not a stand-in's)
    here = tuning.bindings.load().describe()["cudnn_version"]
    plan.report["run"]["library"] = dict(plan.report["run"].get("library") or {},
                                         cudnn_version=here)
    same = plan.save(tmp_path / "here.json")
    monkeypatch.setattr(tuning.gpu, "device_info",
                        lambda: {"gpu": "NVIDIA H200", "compute_capability": "9.0"})
    assert load(same, lstm).choice == plan.choice and len(made) == 2
    # no cuDNN here: one line, not the loader's OSError
    def missing():
        raise tuning.bindings.errors.LibraryNotFound("no libcudnn.so.9 found")
    monkeypatch.setattr(tuning.bindings, "load", missing)
    with pytest.raises(NotAccelerated, match="cuDNN is not loadable here"):
        load(path, lstm)
    with pytest.raises(NotAccelerated, match="cuDNN is not loadable here"):  # nor tuned
        tuning.accelerate(lstm, example=(4, 2))
