"""PyTorch is optional: ``import cudnn_rnn`` (and the commands) never import it, and
without it cudnn_rnn.torch and the example refuse in one line, exit 2 from a command.

"Without PyTorch" is a child process in which ``import torch`` fails (``sys.modules['torch']
= None``, as Python treats a module that failed to import), whether or not it is installed."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NO_TORCH = "import sys; sys.modules['torch'] = None\n"


def _python(code: str, *args, env=None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=120)


def test_importing_cudnn_rnn_and_its_commands_never_imports_torch():
    code = ("import sys, cudnn_rnn, cudnn_rnn.tune, cudnn_rnn.precision, cudnn_rnn.torch, "
            "cudnn_rnn.torch.tuning\nprint(sorted(m for m in sys.modules if m == 'torch' "
            "or m.startswith('torch.')))")
    out = _python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_cudnn_rnn_imports_and_describes_itself_without_torch():
    out = _python(NO_TORCH + "import cudnn_rnn, cudnn_rnn.torch, cudnn_rnn.tune\n"
                  "print(cudnn_rnn.__version__)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip()


@pytest.mark.parametrize("call", ["accelerate(object(), (20, 64))", "load('plan.json', object())"])
def test_without_torch_accelerate_and_load_refuse_in_one_line(call):
    code = NO_TORCH + ("from cudnn_rnn.torch import accelerate, load, NotAccelerated\n"
                       f"try:\n    {call}\nexcept NotAccelerated as exc:\n    print(exc)\n")
    out = _python(code)
    assert out.returncode == 0, out.stderr
    line = out.stdout.strip()
    assert "\n" not in line and "needs PyTorch, which is not importable here" in line
    assert "pip install 'cudnn-rnn[torch]'" in line


def test_a_command_that_accelerates_without_torch_exits_2_with_one_line():
    code = NO_TORCH + ("import sys\nfrom cudnn_rnn.cli import run_main\n"
                       "from cudnn_rnn.torch import accelerate\n"
                       "sys.exit(run_main(lambda argv: accelerate(object(), (2, 2)), [], "
                       "prog='mine'))")
    out = _python(code)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("mine: error: ")
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("without_torch,needle", [
    (True, "needs PyTorch"), (False, "needs a CUDA GPU: CUDNN_RNN_NO_GPU is set")])
def test_the_example_without_torch_or_a_gpu_says_so_in_one_line(without_torch, needle):
    if not without_torch:
        pytest.importorskip("torch", reason="the example's no-GPU line needs PyTorch first")
    code = (NO_TORCH if without_torch else "") + (
        "import runpy, sys\nsys.argv = ['examples/charlm.py']\n"
        "runpy.run_path('examples/charlm.py', run_name='__main__')")
    out = _python(code, env={"CUDNN_RNN_NO_GPU": "1"})
    assert out.returncode == 2, out.stderr
    assert out.stdout == "" and out.stderr.count("\n") == 1
    assert out.stderr.startswith("examples/charlm.py: error: ") and needle in out.stderr


def test_the_docs_snippet_calls_accelerate_with_the_arguments_it_takes():
    import ast
    import inspect
    import re as regex
    from cudnn_rnn.torch import accelerate
    docs = (ROOT / "docs" / "torch.md").read_text()
    assert "[docs/torch.md](docs/torch.md)" in (ROOT / "README.md").read_text()
    code = regex.search(r"```python\n(.*?)```", docs, regex.S).group(1)
    call = next(n for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Call)
                and getattr(n.func, "id", None) == "accelerate")
    taken = inspect.signature(accelerate).parameters
    assert {k.arg for k in call.keywords} <= set(taken)
    for name in ("module", "example", "precision", "calibration", "tolerance"):
        assert f"**{name}**" in docs and name in taken  # each argument is described
