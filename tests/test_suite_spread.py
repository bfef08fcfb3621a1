"""How ``make test-gpu`` hands the GPU suite to its processes (tests/conftest.py: ``scope``
and the xdist scheduler built on it): a file's tests in one process, except the files in
SPREAD, whose groups are a test each, or for test_gpu_torch.py the tests of one tuned
module. Read from the real collection of the real files, and from real xdist runs."""
import importlib.util
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from cudnn_rnn.engine import gpu
from tests.conftest import scope

ROOT = Path(__file__).resolve().parent.parent
FILES = ["tests/test_gpu_torch.py", "tests/test_gpu_capture.py", "tests/test_faults.py",
         "tests/test_gpu_flow.py"]


def _pytest(*args, env=None):
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def groups(tmp_path_factory):
    """The real files' node ids by group. Where PyTorch is not installed (CI), a stand-in
    of the three names test_gpu_torch.py reads at collection (its dtypes) lets it collect,
    so its grouping is checked here too; none of its tests runs."""
    env = None
    if importlib.util.find_spec("torch") is None:
        stand_in = tmp_path_factory.mktemp("collect") / "torch"
        stand_in.mkdir()
        (stand_in / "__init__.py").write_text('float16, bfloat16, float32 = "f16", "bf16", "f32"\n')
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(stand_in.parent), os.environ.get("PYTHONPATH", "")]))
    proc = _pytest("--collect-only", "-q", *FILES, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    ids = [x for x in proc.stdout.splitlines() if "::" in x]
    out = defaultdict(list)
    for nodeid in ids:
        out[scope(nodeid)].append(nodeid)
    return out


def test_a_file_not_spread_is_one_group(groups):
    flow = [g for g in groups if g.startswith("tests/test_gpu_flow.py")]
    assert flow == ["tests/test_gpu_flow.py"] and len(groups[flow[0]]) > 10


@pytest.mark.parametrize("file", ["tests/test_gpu_capture.py", "tests/test_faults.py"])
def test_long_tests_that_share_nothing_are_a_group_each(groups, file):
    mine = {g: ids for g, ids in groups.items() if g.startswith(file + "::")}
    assert len(mine) >= 2 and all(len(ids) == 1 for ids in mine.values())


def test_the_torch_tests_of_one_tuned_module_are_one_group(groups):
    """Every test that reads an accelerated module (_accelerated: cell, direction, layers,
    precision) is grouped by its cell and precision: the outputs, graph and streaming tests
    of each pair, and the fixed-shape tests with the pair they tune."""
    torch_groups = {g.split("::", 1)[1]: ids for g, ids in groups.items()
                    if g.startswith("tests/test_gpu_torch.py::")}
    cells, precisions = ("LSTM", "GRU", "RNN_TANH", "RNN_RELU"), ("fp16", "bf16", "int8", "fp8")
    assert set(torch_groups) == {f"{c}-{p}" for c in cells for p in precisions} | {""}
    for name, ids in torch_groups.items():
        if name:
            kinds = {i.split("::")[1].split("[")[0] for i in ids}
            assert {"test_outputs_match_the_module_in_float64_within_the_tolerance",
                    "test_a_cuda_graph_of_it_replays_what_the_eager_call_computes"} <= kinds
    assert any("new_shape" in i for i in torch_groups["LSTM-fp8"])
    assert any("packed_sequence" in i for i in torch_groups["GRU-int8"])
    assert any("saved_plan" in i for i in torch_groups["LSTM-int8"])


def _ran(*args) -> list:
    """(process, node id) of each test of a two-process ``--dist loadfile`` run, in the
    order they ended."""
    proc = _pytest("-n", "2", "--dist", "loadfile", "-v", *args)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    return [(x.split("]")[0], x.split()[-1]) for x in proc.stdout.splitlines()
            if x.startswith("[gw")]


def _workers(*args) -> list:
    return [w for w, _ in _ran(*args)]


def test_xdist_runs_the_groups_in_different_processes():
    """Five tests of test_faults.py, a group each, over two processes: both take some (with
    xdist's own --dist loadfile, one process would take the file); five of a file not
    spread, in one process."""
    ran = _workers("-m", "not gpu", "tests/test_faults.py", "-k",
                   "fault_hook_the_workers_cannot_read")
    assert len(ran) == 5 and set(ran) == {"[gw0", "[gw1"}, ran
    ran = _workers("tests/test_gpu_check.py", "-k", "does_not_know")
    assert len(ran) == 5 and len(set(ran)) == 1, ran


def test_the_capture_tests_are_handed_out_first():
    """The two capture tests (a group each) and a file of five: xdist would hand the file
    out first (the most tests); the scheduler hands out the capture tests first, so each of
    two processes begins with one of them. Without a GPU they skip, as they are scheduled."""
    if gpu.available():
        pytest.skip("a GPU is here: the capture tests would run for real")
    ran = _ran("tests/test_gpu_capture.py", "tests/test_gpu_check.py", "-k",
               "replays_bit_for_bit or ranks_by_replays or does_not_know")
    assert len(ran) == 7, ran
    began = {w: test for w, test in reversed(ran)}
    assert set(began) == {"[gw0", "[gw1"}, ran
    assert all(test.startswith("tests/test_gpu_capture.py::") for test in began.values()), ran
