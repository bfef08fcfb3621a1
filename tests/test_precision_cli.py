"""Bad input to the precision and training commands: one line, exit 2, no traceback, nothing
written; checked before any GPU work, so these run without a GPU."""
import importlib.util
import zipfile
from pathlib import Path

import numpy as np
import pytest

from .test_cli import assert_one_line_exit_2, run

FIX = Path(__file__).parent / "fixtures" / "torch-rnn"
HAS_TORCH = importlib.util.find_spec("torch") is not None


def _precision(tmp_path, *args):
    out = tmp_path / "out"
    proc = run("cudnn_rnn.precision", *args, "--out", str(out))
    assert not out.exists(), "nothing is written for bad input"
    return proc


@pytest.fixture
def files(tmp_path):
    bad = {}
    bad["text"] = tmp_path / "model.txt"
    bad["text"].write_text("hello")
    bad["junk_npz"] = tmp_path / "junk.npz"
    with zipfile.ZipFile(bad["junk_npz"], "w") as z:  # a zip, but its member is no array
        z.writestr("w.npy", b"\x93NUMPY garbage")
    bad["other_npz"] = tmp_path / "other.npz"
    np.savez(bad["other_npz"], conv1_weight=np.zeros((3, 3), np.float32))
    bad["short_st"] = tmp_path / "short.safetensors"
    bad["short_st"].write_bytes(b"\x01\x02")
    bad["junk_pt"] = tmp_path / "junk.pt"
    bad["junk_pt"].write_bytes(b"not a pickle")
    bad["text_npz"] = tmp_path / "text.npz"
    bad["text_npz"].write_text("weights")
    bad["text_npy"] = tmp_path / "text.npy"
    bad["text_npy"].write_text("inputs")
    bad["deep_st"] = tmp_path / "deep.safetensors"  # a header nested past Python's recursion
    header = b"[" * 100000 + b"]" * 100000
    bad["deep_st"].write_bytes(len(header).to_bytes(8, "little") + header)
    bad["x2d"] = tmp_path / "x2d.npy"
    np.save(bad["x2d"], np.zeros((5, 12), np.float32))
    bad["x_wide"] = tmp_path / "xwide.npy"
    np.save(bad["x_wide"], np.zeros((5, 3, 13), np.float32))
    bad["x_nan"] = tmp_path / "xnan.npy"
    np.save(bad["x_nan"], np.full((5, 3, 12), np.nan, np.float32))
    bad["x_int"] = tmp_path / "xint.npy"
    np.save(bad["x_int"], np.zeros((5, 3, 12), np.int32))
    return bad


GOOD_W, GOOD_X = FIX / "gru.npz", FIX / "gru-inputs.npy"


@pytest.mark.parametrize("weights,inputs,needle", [
    ("missing", GOOD_X, "no such file"),
    ("text", GOOD_X, "give a state_dict as .pt, .pth, .safetensors, .npz"),
    ("junk_npz", GOOD_X, "not a readable .npz file"),
    ("text_npz", GOOD_X, "not a .npz archive (not a zip file)"),
    ("other_npz", GOOD_X, "'conv1_weight' is not a tensor of torch.nn.LSTM, GRU or RNN"),
    ("short_st", GOOD_X, "too short for a safetensors file"),
    ("deep_st", GOOD_X, "not a readable .safetensors file"),
    (GOOD_W, "x2d", "has shape (5, 12); give a (seq, batch, input) array"),
    (GOOD_W, "x_wide", "the inputs batch has 13 features per step; the module takes 12"),
    (GOOD_W, "text_npy", "not a .npy file (no numpy header)"),
    (GOOD_W, "x_nan", "NaN or infinite"),
    (GOOD_W, "x_int", "holds int32 values; give floating-point inputs"),
    (GOOD_W, "text", "give the input batch as a .npy"),
])
def test_bad_model_and_input_files(tmp_path, files, weights, inputs, needle):
    pick = lambda v: str(v) if isinstance(v, Path) else str(files.get(v, tmp_path / v))  # noqa: E731
    assert_one_line_exit_2(_precision(tmp_path, "--weights", pick(weights), "--inputs",
                                      pick(inputs)), needle)


def test_a_pt_file_without_pytorch_or_not_weights(tmp_path, files):
    proc = _precision(tmp_path, "--weights", str(files["junk_pt"]), "--inputs", str(GOOD_X))
    assert_one_line_exit_2(proc, "torch.load could not read it" if HAS_TORCH else
                           "reading .pt needs PyTorch, which is not importable here")


@pytest.mark.skipif(not HAS_TORCH, reason="saving a whole module needs PyTorch")
def test_a_pt_file_of_a_whole_module_says_what_to_save_in_one_line(tmp_path):
    """No line of torch's own (its warnings, its advice with terminal escapes)."""
    import torch
    path = tmp_path / "module.pt"
    torch.save(torch.nn.LSTM(12, 8), path)
    proc = _precision(tmp_path, "--weights", str(path), "--inputs", str(GOOD_X))
    assert_one_line_exit_2(proc, "save module.state_dict() with torch.save")
    assert "\x1b" not in proc.stderr


@pytest.mark.parametrize("args,needle", [
    (("--weights", str(GOOD_W)), "needs both --weights and --inputs"),
    (("--calibration", str(GOOD_X)), "needs both --weights and --inputs"),
    (("--methods", "max,median"), "unknown calibration method median"),
    (("--model", "transformer"), "invalid choice"),
    (("--budget", "0"), "positive"),
    (("--name", "../up"), "--name '../up'"),
])
def test_bad_arguments(tmp_path, args, needle):
    assert_one_line_exit_2(_precision(tmp_path, *args), needle)


def test_a_shipped_model_file_that_is_not_one(tmp_path):
    from cudnn_rnn.charlm import network
    with pytest.raises(network.BadModel, match="not a model saved by cudnn_rnn.train"):
        network.load(FIX / "gru.npz")


def test_an_output_folder_that_is_a_file(tmp_path):
    target = tmp_path / "file"
    target.write_text("x")
    assert_one_line_exit_2(run("cudnn_rnn.precision", "--out", str(target)), "is a file")
    assert_one_line_exit_2(run("cudnn_rnn.train", "--out", str(target)), "is a file")
    assert target.read_text() == "x"


def test_train_bad_arguments(tmp_path):
    assert_one_line_exit_2(run("cudnn_rnn.train"), "--out")
    assert_one_line_exit_2(run("cudnn_rnn.train", "--out", str(tmp_path / "m"), "--steps", "0"),
                           "positive integer")
    assert_one_line_exit_2(run("cudnn_rnn.train", "--out", str(tmp_path / "m"), "--cell", "tcn"),
                           "invalid choice")
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("sizes,needle", [
    (("--hidden", "4294967296"), "hidden_size = 4294967296 does not fit the C int"),
    (("--seq", "3000000000"), "seq_length = 3000000000 does not fit the C int"),
    (("--hidden", "65536", "--batch", "65536"), "hidden-state stride (mini_batch x hidden_size)"),
])
def test_train_refuses_sizes_beyond_cudnns_c_ints_before_any_gpu_work(tmp_path, sizes, needle):
    """Said before the GPU is looked for (this machine has none: the same line either way)."""
    proc = run("cudnn_rnn.train", "--out", str(tmp_path / "m"), *sizes)
    assert_one_line_exit_2(proc, needle, "choose smaller")
    assert not (tmp_path / "m").exists()


def test_without_a_gpu_both_commands_say_so_and_write_nothing(tmp_path):
    out = tmp_path / "m"
    assert_one_line_exit_2(run("cudnn_rnn.train", "--out", str(out), CUDNN_RNN_NO_GPU="1"),
                           "CUDNN_RNN_NO_GPU is set")
    assert_one_line_exit_2(run("cudnn_rnn.precision", "--out", str(out), CUDNN_RNN_NO_GPU="1"),
                           "needs a CUDA GPU")
    assert not out.exists()


RECORDED = Path(__file__).resolve().parent.parent / "results" / "nvidia-h200" / "9.19.0" / \
    "precision.json"


def _table(tmp_path, change) -> Path:
    import json
    doc = json.loads(RECORDED.read_text())
    change(doc)
    path = tmp_path / "precision-x.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("change,needle", [
    (lambda d: d.update(provenance=[1]), "provenance is not a table"),
    (lambda d: d["summary"].pop("rows"), "not a precision table this version renders"),
    (lambda d: d.update(result=None), "not a precision table this version renders"),
    (lambda d: d["summary"].update(calibration="x"), "not a precision table this version renders"),
])
def test_render_of_a_malformed_table_says_so_and_writes_nothing(tmp_path, change, needle):
    proc = _precision(tmp_path, "--render", str(_table(tmp_path, change)))
    assert_one_line_exit_2(proc, needle)


def test_render_of_a_json_nested_too_deep_is_one_line(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100000 + "]" * 100000)
    assert_one_line_exit_2(_precision(tmp_path, "--render", str(deep)), "not a readable JSON")


def test_render_keeps_names_read_from_the_table_inside_the_output_folder(tmp_path):
    """A provenance whose GPU or cuDNN version reads as a path (``..``, separators) still
    names a folder under --out."""
    def climb(d):
        d["provenance"].update(gpu="../../x", cudnn_version="../../../../escaped")
    table = _table(tmp_path, climb)
    out = tmp_path / "out"
    proc = run("cudnn_rnn.precision", "--render", str(table), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    made = sorted(p for p in tmp_path.rglob("*") if p.is_file() and p != table)
    assert made and all(out in p.parents for p in made), made


def test_render_refuses_another_runs_table_and_a_gpu_cudnn_folder_as_out(tmp_path):
    """--render --out: the table goes to OUT/<gpu>/<cudnn>/ with its JSON beside it; a
    second table of another run there is refused in one line (the first kept), the same
    table again is rendered again; an --out that already ends in <gpu>/<cudnn> is refused
    (it would nest a second pair of folders) naming the --out it means."""
    out = tmp_path / "out"
    proc = run("cudnn_rnn.precision", "--render", str(RECORDED), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    folder = out / "nvidia-h200" / "9.19.0"
    assert (folder / "precision.json").read_bytes() == RECORDED.read_bytes()
    kept = (folder / "precision.md").read_bytes()
    gru = RECORDED.with_name("precision-gru.json")
    other = tmp_path / "precision.json"  # another run's table under the same name
    other.write_bytes(gru.read_bytes())
    proc = run("cudnn_rnn.precision", "--render", str(other), "--out", str(out))
    assert_one_line_exit_2(proc, "precision.json there is another run's table",
                           "give another --out")
    assert (folder / "precision.md").read_bytes() == kept
    assert run("cudnn_rnn.precision", "--render", str(RECORDED), "--out",
               str(out)).returncode == 0
    proc = run("cudnn_rnn.precision", "--render", str(RECORDED), "--out", str(folder))
    assert_one_line_exit_2(proc, "is already a <gpu>/<cudnn> folder", f"e.g. --out {out}")
    assert not (folder / "nvidia-h200").exists()
