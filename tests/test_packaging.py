"""What `pip install` puts into site-packages: one top-level package, cudnn_rnn."""
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _config():
    setupcfg = pytest.importorskip("setuptools.config.setupcfg")
    return setupcfg.read_configuration(str(ROOT / "setup.cfg"))


def test_the_mirror_installs_under_the_projects_name_and_every_package_is_listed():
    options = _config()["options"]
    packages, where = set(options["packages"]), options["package_dir"]
    assert "bindings" not in packages and where == {"cudnn_rnn.bindings": "bindings"}
    assert {p.split(".")[0] for p in packages} == {"cudnn_rnn"}
    on_disk = {".".join(p.parent.relative_to(ROOT).parts)
               for p in (ROOT / "cudnn_rnn").rglob("__init__.py")} | {
        "cudnn_rnn." + ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "bindings").rglob("__init__.py")}  # bindings/ installs in cudnn_rnn
    assert packages == on_disk, packages ^ on_disk


def test_an_installed_cudnn_rnn_leaves_import_bindings_free(tmp_path):
    try:
        metadata.distribution("cudnn-rnn")
    except metadata.PackageNotFoundError:
        pytest.skip("cudnn-rnn is not installed here (make test installs it; VENV= does not)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = ("import importlib.util, cudnn_rnn.bindings as b; "
            "print(importlib.util.find_spec('bindings'), b.__name__, b.load.__module__)")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["None", "cudnn_rnn.bindings", "cudnn_rnn.bindings.library"]


def test_a_checkout_without_install_mounts_the_same_folder(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    code = ("import sys, cudnn_rnn.bindings.enums as e; "
            "print(e.__file__); print('bindings' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == [str(ROOT / "bindings" / "enums.py"), "False"], out.stderr
