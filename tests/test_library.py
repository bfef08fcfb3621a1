"""The loader against the real libcudnn: version, path, provenance, symbol probing."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cudnn_rnn import bindings
from cudnn_rnn.bindings import errors
from cudnn_rnn.bindings.library import decode_cuda_version, decode_version
from cudnn_rnn.bindings.prototypes import BY_NAME, LEGACY_SYMBOLS

from .cheader import include_dir_for, parse

ROOT = Path(__file__).resolve().parent.parent


def test_version_decoding_for_both_schemes():
    assert decode_version(92800) == (9, 28, 0)
    assert decode_version(91900) == (9, 19, 0)
    assert decode_version(8907) == (8, 9, 7)
    assert decode_version(8201) == (8, 2, 1)
    assert decode_cuda_version(12090) == (12, 9)
    assert decode_cuda_version(13000) == (13, 0)


def test_loads_and_reports_where_from(lib):
    assert Path(lib.path).exists(), lib.path
    assert Path(lib.path).name.startswith("libcudnn.so")
    assert lib.source
    major, minor, _ = lib.version
    assert major >= 8
    if major >= 9:
        assert lib.version_number == lib.version_raw
    info = lib.describe()
    assert info["cudnn_version"] == lib.version_string
    assert info["cudart_version"].count(".") == 1
    assert lib.cudart_version[0] >= 11


def test_version_matches_its_header(lib):
    include = include_dir_for(lib.path)
    if include is None:
        pytest.skip(f"no headers found beside {lib.path}")
    assert parse(include).version == lib.version


def test_sublibraries_come_from_the_same_directory(lib):
    info = lib.describe()
    adv = [p for n, p in info["sublibraries"].items() if n.startswith("libcudnn_adv")]
    assert adv, "libcudnn_adv was not mapped into the process"
    assert not info["sublibraries_mixed"], info["sublibraries"]
    assert Path(adv[0]).parent == Path(lib.path).resolve().parent


def test_load_is_cached_and_a_second_library_is_refused(lib, tmp_path):
    assert bindings.load() is lib
    other = tmp_path / "libcudnn.so.9"
    other.write_bytes(b"")
    with pytest.raises(errors.LibraryNotFound, match="already loaded"):
        bindings.load(str(other))


def test_symbol_report_probes_legacy_api_without_crashing(lib):
    report = lib.symbol_report()
    assert set(report["legacy"]) == set(LEGACY_SYMBOLS)
    required = [n for n, p in BY_NAME.items() if p.required]
    assert all(report["declared"][n] for n in required), report["declared"]
    if lib.version[0] >= 9:
        # cuDNN 9 removed the v6/v7 RNN API the old sample used.
        assert not any(report["legacy"].values()), report["legacy"]
        with pytest.raises(AttributeError):
            getattr(lib.cdll, "cudnnRNNForwardTraining")


def test_undeclared_function_is_an_attribute_error(lib):
    with pytest.raises(AttributeError, match="not declared"):
        lib.cudnnRNNForwardTraining


def _run(code: str, env_extra: dict) -> subprocess.CompletedProcess:
    import os
    env = dict(os.environ, PYTHONPATH=str(ROOT), **env_extra)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=120)


def test_missing_library_is_reported_with_a_fix(tmp_path):
    proc = _run("from cudnn_rnn import bindings; bindings.load()", {"CUDNN_LIBRARY": str(tmp_path / "nope.so.9")})
    assert proc.returncode != 0
    assert "LibraryNotFound" in proc.stderr and "does not exist" in proc.stderr


def test_not_a_cudnn_library_is_refused(tmp_path):
    proc = _run("from cudnn_rnn import bindings; bindings.load()", {"CUDNN_LIBRARY": "libc.so.6"})
    assert proc.returncode != 0
    assert "no cudnnGetVersion" in proc.stderr


def test_error_strings_come_from_the_library(lib):
    code = 3000 if lib.version[0] >= 9 else 9
    assert lib.error_string(code) == "CUDNN_STATUS_NOT_SUPPORTED"
    assert lib.error_string(0) == "CUDNN_STATUS_SUCCESS"


def test_the_loader_keeps_why_each_candidate_before_the_chosen_one_failed(tmp_path):
    """A broken libcudnn.so.9 found first on sys.path is skipped, and why is kept."""
    fake = tmp_path / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9"
    fake.parent.mkdir(parents=True)
    fake.write_text("not a shared object")
    code = ("import sys; sys.modules['cuda.pathfinder'] = None; sys.path.insert(0, sys.argv[1]); "
            "from cudnn_rnn import bindings; lib = bindings.load(); "
            "print(lib.source); print(len(lib.rejected)); print(lib.rejected[0]); "
            "from cudnn_rnn.matrix import provenance; "
            "from cudnn_rnn.matrix.jsontypes import SCALAR, Dict, problem; "
            "prov = provenance.collect(lib.describe(), {}, 'c'); "
            "print(prov['library_rejected'] == '; '.join(lib.rejected) "
            "and problem(prov, Dict(SCALAR), 'provenance') is None)")
    env = {k: v for k, v in os.environ.items() if k != "CUDNN_LIBRARY"}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                         text=True, env=env, timeout=120)
    if out.returncode != 0 and "no libcudnn found" in out.stderr:
        pytest.skip("no cuDNN wheel on sys.path here (the system library is used)")
    assert out.returncode == 0, out.stderr
    source, count, first, recorded = out.stdout.splitlines()[:4]
    assert source == "sys.path wheel" and int(count) >= 1
    assert str(fake) in first and "cannot load" in first
    assert recorded == "True"  # and a run's provenance carries them, as a scalar


def test_a_library_named_by_its_soname_is_the_same_library_when_asked_again(tmp_path):
    """CUDNN_LIBRARY=libcudnn.so.9 (a soname, the dynamic linker's to resolve): the loaded
    library records the file the linker chose, and asking again by the same soname (every
    command's next load) is that library, not 'a second copy' at $PWD/libcudnn.so.9; a path
    to another file is refused. (The loader's own rule, with an opener that records what
    it was asked: no library is loaded here.)"""
    import types
    from cudnn_rnn.bindings import finder

    class NotFound(OSError):
        pass
    opened = []

    def open_(candidate):
        opened.append(candidate.path)
        return types.SimpleNamespace(path="/opt/wheel/lib/libx.so.9")
    loader = finder.OnePerProcess("libx", "X_LIBRARY_FOR_A_TEST", None, (), ("libx.so.9",),
                                  open_, NotFound, "install x")
    first = loader.load("libx.so.9")
    assert loader.load("libx.so.9") is first and loader.load() is first
    assert loader.load("/opt/wheel/lib/libx.so.9") is first  # the file itself, by path
    with pytest.raises(NotFound, match="already loaded in this process"):
        loader.load(str(tmp_path / "libx.so.9"))
    with pytest.raises(NotFound, match="already loaded in this process"):
        loader.load("liby.so.9")
    assert opened == ["libx.so.9"]
