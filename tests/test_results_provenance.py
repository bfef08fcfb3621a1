"""The commits the committed results name: each run's provenance says which tree ran, as a
full commit of this repository's history, never ``-dirty`` (a device's copy of the tree
carries the repository metadata of a session's start: a run there without
``$CUDNN_RNN_COMMIT`` writes that older commit with ``-dirty``, which names no tree)."""
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUN_FILES = sorted(p for pattern in ("results/**/*.run.json", "results/*/*/precision*.json",
                                     "results/*/*/overhead.json")
                   for p in ROOT.glob(pattern))
SHA = re.compile(r"[0-9a-f]{40}")


def commits(data) -> list[str]:
    """Every value of a key ``commit`` in ``data``, however deep."""
    if isinstance(data, dict):
        return [v for k, v in data.items() if k == "commit" and isinstance(v, str)] + [
            c for k, v in data.items() if k != "commit" for c in commits(v)]
    if isinstance(data, list):
        return [c for v in data for c in commits(v)]
    return []


def test_the_walk_finds_every_commit_however_deep():
    data = {"runs": [{"provenance": {"commit": "a"}}, {"x": [{"commit": "b"}]}], "commit": "c"}
    assert sorted(commits(data)) == ["a", "b", "c"]
    assert commits({"commit": 1, "y": "commit"}) == []


def test_there_are_committed_runs_to_check():
    assert any(p.name == "bench.run.json" for p in RUN_FILES)
    assert any(p.name.startswith("precision") for p in RUN_FILES)


@pytest.mark.parametrize("path", RUN_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_committed_run_names_a_whole_clean_commit(path):
    found = commits(json.loads(path.read_text()))
    assert found, f"{path}: no commit recorded"
    wrong = [c for c in found if not SHA.fullmatch(c)]
    assert not wrong, f"{path}: {wrong} (set CUDNN_RNN_COMMIT where the tree is a copy)"


def _history_available() -> bool:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        return False
    shallow = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT,
                             capture_output=True, text=True)
    return shallow.returncode == 0 and shallow.stdout.strip() == "false"


@pytest.mark.parametrize("path", RUN_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_committed_runs_commit_is_in_this_history(path):
    if not _history_available():
        pytest.skip("needs git and this repository's whole history (not a shallow clone)")
    for c in set(commits(json.loads(path.read_text()))):
        found = subprocess.run(["git", "merge-base", "--is-ancestor", c, "HEAD"], cwd=ROOT,
                               capture_output=True)
        assert found.returncode == 0, f"{path}: {c} is not a commit before HEAD"
