"""The commit a run records (matrix/provenance.commit): from git, without writing to it."""
import os
import shutil
import subprocess
import time

import pytest

from cudnn_rnn.matrix import provenance


def _git(repo, *args):
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True,
                          env=dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
                                   GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t"))


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_commit_is_read_without_writing_the_repositorys_index(tmp_path, monkeypatch):
    """A tracked file touched since the index was written (the same bytes, a newer time):
    a plain ``git status`` rewrites .git/index (taking .git/index.lock, a write outside any
    output folder that can fail a user's own commit at that moment); the commit is read
    without it, and the file is not counted as changed. A change of bytes is ``-dirty``."""
    monkeypatch.delenv("CUDNN_RNN_COMMIT", raising=False)
    _git(tmp_path, "init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    _git(tmp_path, "add", "code.py")
    _git(tmp_path, "commit", "-q", "-m", "one")
    sha = _git(tmp_path, "rev-parse", "HEAD").stdout.strip()
    later = time.time() + 5
    os.utime(tmp_path / "code.py", (later, later))
    index = tmp_path / ".git" / "index"
    before = (index.read_bytes(), index.stat().st_mtime_ns)
    monkeypatch.setattr(provenance, "ROOT", tmp_path)
    assert provenance.commit() == sha
    assert (index.read_bytes(), index.stat().st_mtime_ns) == before
    (tmp_path / "code.py").write_text("x = 2\n")
    assert provenance.commit() == sha + "-dirty"
    assert (index.read_bytes(), index.stat().st_mtime_ns) == before
