"""Every command the README and its pages in docs/ show works as printed on a fresh clone
(CPU: descriptor stages, reports).

The commands are the lines of their indented code blocks that start with ``python -m`` or
``make``. Each runs in a fresh copy of the checkout (its tracked and
not-ignored files, committed anew, so ``git status`` there starts clean), on its own:
``runs/`` and ``reports/`` are emptied before each. Commands that need a GPU must say so in
one line and exit 2; the rest must exit 0. After each, ``git status --porcelain`` in the
copy must be empty: no committed run or report was rewritten, nothing was written outside
the ignored ``runs/`` and ``reports/``. ``make test`` is this suite itself and is not rerun;
``make`` commands get ``VENV= SYSTEM_PYTHON=<this python>`` (no network: the packages this
suite runs with).
"""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NEEDS_GPU = re.compile(r"^(python -m cudnn_rnn\.(example|tune|bench|overhead|precision|train)\b"
                       r"(?!.*(--list|--render))|make (bench|example|model|precision)\b)")
PAGES = ("README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")))
IGNORED = (".git", ".venv", "runs", "reports", "__pycache__", ".pytest_cache", ".hypothesis",
           "build", ".whl", ".device", "_scratch")


def commands(page: str) -> list[str]:
    out = []
    for line in (ROOT / page).read_text().splitlines():
        text = line.strip()
        if line.startswith("    ") and text.startswith(("python -m ", "make ")):
            out.append(text.split(" #")[0].strip())
    return out


def readme_commands() -> list[str]:
    """The commands of the README and of every page of docs/, each once."""
    return list(dict.fromkeys(c for page in PAGES for c in commands(page)))


def fresh_copy(dest: Path) -> Path:
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                            cwd=ROOT, capture_output=True)
    if listed.returncode == 0:
        for name in filter(None, listed.stdout.decode().split("\0")):
            src = ROOT / name
            if src.is_file():
                (dest / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest / name)
    else:  # a copy of the tree without .git (the device machine)
        shutil.copytree(ROOT, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns(
            *IGNORED, "*.egg-info"))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "fresh clone"]):
        subprocess.run(git + cmd, cwd=dest, check=True, capture_output=True)
    return dest


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    return fresh_copy(tmp_path_factory.mktemp("clone"))


def test_the_readme_shows_the_commands_this_test_runs():
    assert commands("README.md")[:2] == ["make matrix", "make test"]  # the two set-up commands
    found = readme_commands()
    assert "python -m cudnn_rnn.probe" in found
    assert any(c.startswith("python -m cudnn_rnn.report ") for c in found)
    assert any("--render" in c for c in found)  # a CPU command of a GPU-only module
    assert len(PAGES) >= 10


def test_the_readme_is_a_front_door_with_a_link_to_every_page():
    """At most 200 lines; every page of docs/ linked from it; every link of the README and
    of the pages to a file of the checkout resolves; its chart is a committed PNG."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    for page in PAGES[1:]:
        assert f"]({page})" in text, page
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", (ROOT / page).read_text()):
            if "://" not in target:
                assert (ROOT / page).parent.joinpath(target).resolve().exists(), (page, target)
    chart = re.search(r"!\[[^\]]*\]\(([^)]+\.png)\)", text).group(1)
    assert (ROOT / chart).is_file() and chart.startswith("results/")


@pytest.mark.parametrize("command", [c for c in readme_commands() if c != "make test"])
def test_readme_command_works_as_printed_on_a_fresh_clone(clone, command):
    for folder in ("runs", "reports"):
        shutil.rmtree(clone / folder, ignore_errors=True)
    line = command
    if command.startswith("make "):
        line += ("" if "VENV=" in command else " VENV=") + f" SYSTEM_PYTHON={sys.executable}"
    env = {k: v for k, v in os.environ.items() if k not in ("CUDNN_RNN_HOME", "PYTHONPATH",
                                                            "CUDNN_RNN_FAULT", "MAKEFLAGS")}
    env.update(CUDNN_RNN_NO_GPU="1", PATH=os.path.dirname(sys.executable) + os.pathsep + env["PATH"])
    proc = subprocess.run(["bash", "-c", line], cwd=clone, env=env, capture_output=True,
                          text=True, timeout=600)
    if NEEDS_GPU.match(command):
        assert proc.returncode == 2, (proc.returncode, proc.stdout[-1500:], proc.stderr[-1500:])
        ours = [x for x in proc.stderr.splitlines() if not x.startswith("make")]
        assert len(ours) == 1 and "CUDA GPU" in ours[0], proc.stderr
    else:
        assert proc.returncode == 0, (proc.stdout[-1500:], proc.stderr[-1500:])
        assert "Traceback" not in proc.stderr
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True,
                            text=True).stdout
    assert status == "", status
    if command.startswith(("make matrix", "python -m cudnn_rnn.probe")) and "--list" not in command:
        runs = list((clone / "runs").glob("*/*/*.jsonl"))
        assert len(runs) == 1, runs  # this machine's own run...
        assert " 0 already recorded" in proc.stdout  # ...with every cell run, nothing resumed
        if command.startswith("make matrix"):
            assert (runs[0].parent / "matrix.md").is_file()
            assert "report of this run: " + str(runs[0].parent / "matrix.md") in proc.stdout


def test_the_readme_says_how_to_reach_the_installed_commands():
    text = (ROOT / "README.md").read_text()
    setup = text.split("\n## Set-up\n")[1].split("\n## ")[0]
    assert ". .venv/bin/activate" in setup and ".venv/bin/python -m cudnn_rnn" in setup
    assert ".venv/bin/cudnn-rnn" in setup


def test_make_matrix_from_a_python_without_the_packages_says_what_to_install(clone):
    """``make matrix VENV=`` with a Python that lacks numpy and tabulate (``-S``: no
    site-packages): one line saying what to do, exit 2, nothing written."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MAKEFLAGS")}
    proc = subprocess.run(["make", "matrix", "VENV=", f"SYSTEM_PYTHON={sys.executable} -S"],
                          cwd=clone, env=env, capture_output=True, text=True, timeout=300)
    ours = [x for x in proc.stderr.splitlines() if not x.startswith("make")]
    assert proc.returncode != 0 and len(ours) == 1, proc.stderr
    assert "lacks numpy and tabulate" in ours[0] and ".venv" in ours[0] and "Traceback" not in ours[0]
    assert not (clone / "runs").exists() or not list((clone / "runs").rglob("*.jsonl"))


def test_make_test_from_a_python_without_the_packages_says_what_to_install(clone, tmp_path):
    """``make test VENV=`` with a Python that has pytest but not the project's packages
    (``-S`` and pytest's own packages only): one line, not a traceback per test file."""
    import pytest as _pytest
    site = Path(_pytest.__file__).resolve().parent.parent
    only = tmp_path / "pytest-only"
    only.mkdir()
    for name in ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "py.py", "pygments"):
        if (site / name).exists():
            (only / name).symlink_to(site / name)
    env = {k: v for k, v in os.environ.items() if k != "MAKEFLAGS"} | {"PYTHONPATH": str(only)}
    proc = subprocess.run(["make", "test", "VENV=", f"SYSTEM_PYTHON={sys.executable} -S"],
                          cwd=clone, env=env, capture_output=True, text=True, timeout=300)
    out = [x for x in (proc.stdout + proc.stderr).splitlines()
           if x.strip() and not x.startswith(("make", sys.executable.split("/")[-1]))
           and "-m pytest" not in x]
    assert proc.returncode != 0 and len(out) == 1, proc.stdout + proc.stderr
    assert "lacks numpy, tabulate" in out[0] and "make test creates .venv" in out[0]
    assert "Traceback" not in proc.stdout + proc.stderr
