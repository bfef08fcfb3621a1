import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from cudnn_rnn import REQUIRED  # noqa: E402

# what the suite needs beyond the project's own requirements: setup.cfg's test extra, by the
# names they import as (xdist: make test-gpu's processes); without them, one line, not a
# traceback per test file
TEST_REQUIRED = ("hypothesis", "ml_dtypes", "xdist")


from cudnn_rnn import bindings  # noqa: E402
from cudnn_rnn.engine import gpu  # noqa: E402


@pytest.fixture(scope="session")
def lib():
    """The real libcudnn (the wheel in CI). Tests never mock it: no library is an error."""
    try:
        return bindings.load()
    except bindings.errors.LibraryNotFound as exc:
        pytest.fail(f"libcudnn is required for the tests: {exc}")


NO_GPU = "no usable GPU: "


@pytest.fixture(scope="session")
def cuda(lib):
    """cupy, when a usable GPU is present; otherwise the test is skipped with the reason."""
    if not gpu.available():
        pytest.skip(NO_GPU + gpu.unavailable_reason())
    return gpu.cupy_or_raise()


@pytest.fixture(autouse=True)
def _device_memory_back(request):
    """After a test that had the GPU, what its arrays left cached goes back to the device:
    CuPy's pool and PyTorch's cache. `make test-gpu` runs several processes on one GPU, and
    a process's cache is memory the others cannot have: on an H100 (2026-12-05) the tuner's
    table at LSTM 50/1/4096/256 filled the card's 80 GB in one process, and in a run of ten
    processes two calls of cudnnCreate failed to create their streams (both passed alone)."""
    yield
    if "cuda" not in request.fixturenames or not gpu.available():
        return
    cp = sys.modules.get("cupy")
    if cp is not None:
        cp.get_default_memory_pool().free_all_blocks()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Every test skipped for want of a GPU is reported at the one place that skips it, so
    the summary says why in one line (with their count), not once per test."""
    outcome = yield
    report = outcome.get_result()
    where = report.longrepr
    if report.skipped and isinstance(where, tuple) and str(where[2]).startswith(
            ("Skipped: " + NO_GPU, NO_GPU)):
        report.longrepr = ("tests/conftest.py", cuda.__wrapped__.__code__.co_firstlineno
                           if hasattr(cuda, "__wrapped__") else 0, where[2])


def pytest_report_header(config):
    try:
        lib = bindings.load()
        text = f"cuDNN {lib.version_string} at {lib.path} ({lib.source})"
    except Exception as exc:  # pragma: no cover
        text = f"cuDNN not loadable: {exc}"
    info = gpu.device_info()
    gpu_text = (f"GPU {info['gpu']} cc {info['compute_capability']}" if info.get("gpu")
                else f"no GPU ({info.get('reason')})")
    if os.environ.get("CUDNN_RNN_NO_GPU"):
        gpu_text += f" (CUDNN_RNN_NO_GPU={os.environ['CUDNN_RNN_NO_GPU']})"
    return [text, gpu_text]


def _cell_and_precision(test: str) -> str:
    """test_gpu_torch.py's share: ``test_x[LSTM-True-2-int8]`` -> ``LSTM-int8``, the cell and
    precision of the tuned module its tests share (their ids begin with the one and end with
    the other); tests that tune a module of their own make one group ("")."""
    params = test.partition("[")[2].rstrip("]").split("-")
    return f"{params[0]}-{params[-1]}" if len(params) > 1 else ""


# The files make test-gpu spreads over its processes a group at a time rather than whole:
# file -> what names a test's group (str: each test is one). On an H100 (2026-12-06) the
# torch file, whole in one process, took 202 s and 440 s in two runs of the same tree while
# the other seven processes had finished by 125 s; the capture and fault tests ran one
# after another at the end.
SPREAD = {"tests/test_gpu_torch.py": _cell_and_precision, "tests/test_gpu_capture.py": str,
          "tests/test_faults.py": str}
# The files whose groups are handed out before all others: the two capture tests (54 s and
# 16 s there), which xdist's order, the groups with the most tests first, leaves to the end.
# Replayed with that run's own per-test times, xdist's scheduling gives 202 s by file,
# 155 s with the groups above, 130 s with these first (the tests' total over 8 processes,
# 107 s). Not the fault tests too (135 s): their six probes, each rehearsing CuPy's kernels
# in processes of its own, would all start at once.
FIRST = ("tests/test_gpu_capture.py",)


def scope(nodeid: str) -> str:
    """The group of tests one process runs together under ``make test-gpu``: the test's
    file (what ``--dist loadfile`` does: its tests share what they tune), or a part of it
    for a file in :data:`SPREAD`."""
    file, _, test = nodeid.partition("::")
    part = SPREAD.get(file)
    return file if part is None else f"{file}::{part(test)}"


def first(group: str) -> bool:
    """Whether ``group`` (a :func:`scope`) is handed out before the others (:data:`FIRST`)."""
    return group.partition("::")[0] in FIRST


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` with :func:`scope` as its grouping. Not xdist's ``loadgroup``: it
    renames each test's node id, which pytest 9 no longer lets it do (the marks are then
    ignored and every test is a group of its own)."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Spread(LoadFileScheduling):
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            return scope(nodeid)

        def _assign_work_unit(self, node) -> None:
            if not self.ordered:  # the queue is whole by the first hand-out
                self.ordered = True
                for group in reversed([g for g in self.workqueue if first(g)]):
                    self.workqueue.move_to_end(group, last=False)
            super()._assign_work_unit(node)

    return Spread(config, log)


TIMES_ENV = "CUDNN_RNN_TEST_TIMES"
_times: list = []  # the file every test phase's time goes to (the controlling process only)


def pytest_runtest_logreport(report):
    """With CUDNN_RNN_TEST_TIMES=FILE, each phase of each test (setup, call, teardown) is
    appended to FILE as it ends, a JSON line (node id, phase, outcome, seconds), so a run
    cut short by a time limit still says where its time went (``--durations`` prints only
    at the end). Under xdist the controlling process writes what every worker reports."""
    if _times:
        with open(_times[0], "a") as f:
            f.write(json.dumps({"test": report.nodeid, "phase": report.when,
                                "outcome": report.outcome,
                                "s": round(report.duration, 3)}) + "\n")


def pytest_configure(config):
    """The GPU suite asked for by name (``-m gpu``, or a part of it such as ``-m "gpu and not
    timing"`` as ``make test-gpu`` runs it) on a machine without a usable GPU fails in one
    line, rather than passing with every test skipped. A Python without the packages the
    tests import fails in one line too, before collection (not a traceback per file)."""
    missing = [n for n in REQUIRED + TEST_REQUIRED if importlib.util.find_spec(n) is None]
    if missing:
        raise pytest.UsageError(
            f"this Python ({sys.executable}) lacks {', '.join(missing)}: run the tests with "
            f"the project's environment (make test creates .venv and runs them), or install "
            f"the project with its test extra: pip install -e '.[cuda12,test]'")
    if os.environ.get(TIMES_ENV) and not hasattr(config, "workerinput"):
        _times[:] = [os.environ[TIMES_ENV]]
    marks = " ".join((config.getoption("markexpr", "") or "").split())
    if (marks == "gpu" or marks.startswith("gpu and ")) and not gpu.available():
        raise pytest.UsageError(f"the GPU suite needs a usable GPU: {gpu.unavailable_reason()}")
