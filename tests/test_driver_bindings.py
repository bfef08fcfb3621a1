"""The CUDA driver bindings (bindings/driver/) against the cuda.h of the CUDA runtime wheel
(or the toolkit), and the loader's answers where no driver is installed (CI, this machine).
The calls themselves run in tests/test_gpu_clusters.py and below, on a GPU."""
import ctypes
import pickle
import re
import sys
from pathlib import Path

import pytest

from cudnn_rnn.bindings import driver
from cudnn_rnn.bindings.driver import enums as E, errors, library, types as T
from cudnn_rnn.bindings.driver.prototypes import PROTOTYPES
from cudnn_rnn.engine import gpu

from cudnn_rnn.bindings.enums import CEnum, _c

from .cheader import c_type, compatible, ctypes_type, enum_problems, parse_files, prototype_mismatches


def _cuda_h() -> Path | None:
    roots = [Path(p) / "nvidia" / "cuda_runtime" / "include" for p in sys.path if p] + [
        Path("/usr/local/cuda/include")]
    return next((r / "cuda.h" for r in roots if (r / "cuda.h").is_file()), None)


@pytest.fixture(scope="module")
def header():
    path = _cuda_h()
    if path is None:
        pytest.fail("no cuda.h (the CUDA runtime wheel, nvidia-cuda-runtime-cu12, ships it)")
    h = parse_files([path], "cu")
    h.version = int(re.search(r"#define CUDA_VERSION\s+(\d+)", path.read_text()).group(1))
    return h


def test_every_prototype_matches_cuda_h(header):
    assert not prototype_mismatches(PROTOTYPES, header)  # none renamed by a _v2 macro


def test_handles_and_the_launch_config_are_the_headers(header):
    for typedef, struct in T.OPAQUE_STRUCTS.items():
        assert header.structs.get(typedef) == struct, typedef
    fields = header.value_structs["CUlaunchConfig"]
    assert [f.split()[-1].lstrip("*") for f in fields] == [n for n, _ in T.CUlaunchConfig._fields_]
    # the C layout of the header's fields (a pointer or handle 8 bytes, an unsigned int 4,
    # each aligned to its size) against ctypes' offsets
    offset = 0
    for f, (name, _) in zip(fields, T.CUlaunchConfig._fields_):
        kind = " ".join(f.split()[:-1])
        size = 8 if f.split()[-1].startswith("*") or kind in header.structs else 4
        assert kind in header.structs or kind == "unsigned int" or size == 8, f
        offset = -(-offset // size) * size
        assert getattr(T.CUlaunchConfig, name).offset == offset, name
        assert getattr(T.CUlaunchConfig, name).size == size, name
        offset += size
    assert ctypes.sizeof(T.CUlaunchConfig) == -(-offset // 8) * 8


def test_enums_have_the_headers_exact_values(header):
    # a later CUDA's members are transcribed later
    problems = enum_problems(E.HEADER_CHECKED, header, header.version <= E.TRANSCRIBED_FROM)
    assert not problems, "\n".join(problems)


def test_a_mismatched_binding_is_caught(header):
    """The checks above can fail: a wrong width, a wrong handle type, a wrong value."""
    assert not compatible(c_type("unsigned int Flags", header), ctypes_type(ctypes.c_int))
    assert not compatible(c_type("CUfunction func", header), ctypes_type(T.CUstream))
    from cudnn_rnn.bindings.prototypes import Proto
    wrong = Proto("cuFuncSetAttribute", ctypes.c_int, (("hfunc", T.CUstream), ("attrib", ctypes.c_int),
                                                       ("value", ctypes.c_int)), "cuda.h")
    assert prototype_mismatches([wrong], header) == [
        "cuFuncSetAttribute(hfunc): C 'CUfunction hfunc' is struct:CUfunc_st*, bound as "
        "struct:CUstream_st*"]

    @_c("CUfunction_attribute", "CU_FUNC_ATTRIBUTE_")
    class Off(CEnum):
        NUM_REGS = 5
    assert "CU_FUNC_ATTRIBUTE_NUM_REGS: header 4, bindings 5" in enum_problems([Off], header, True)


def test_every_result_has_its_own_exception_class_and_survives_pickling():
    assert issubclass(errors.InvalidClusterSize, errors.DriverError)
    e = errors.error_for("cuOccupancyMaxActiveClusters", E.Result.ERROR_INVALID_CLUSTER_SIZE,
                         "the driver's text")
    assert type(e) is errors.InvalidClusterSize
    assert str(e) == ("cuOccupancyMaxActiveClusters failed: CUDA_ERROR_INVALID_CLUSTER_SIZE "
                      "(912): the driver's text")
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is errors.InvalidClusterSize and (back.call, back.code) == (e.call, 912)
    unknown = errors.error_for("cuInit", 12345)
    assert type(unknown) is errors.DriverError and "CUDA_UNRECOGNIZED_RESULT_12345" in str(unknown)
    names = {cls.__name__ for cls in errors.ERROR_CLASSES.values()}
    assert len(names) == len(errors.ERROR_CLASSES) == len(E.Result) - 1  # all but SUCCESS


@pytest.mark.skipif(gpu.driver_missing() is None, reason="an NVIDIA driver is installed here")
def test_without_a_driver_the_loader_says_so_and_names_where_to_point():
    with pytest.raises(errors.LibraryNotFound, match=r"^no NVIDIA driver found \(tried: "
                       r"libcuda\.so\.1 \(system soname\) cannot be loaded: .*CUDA_DRIVER_LIBRARY"):
        driver.load()
    assert driver.loaded() is None
    assert gpu.driver_missing() == "no NVIDIA driver found (libcuda.so.1 cannot be loaded)"


@pytest.mark.skipif(gpu.driver_missing() is None, reason="an NVIDIA driver is installed here")
def test_an_explicit_path_is_the_one_tried_and_its_fault_named(tmp_path, monkeypatch):
    with pytest.raises(errors.LibraryNotFound, match="is a directory"):
        driver.load(str(tmp_path))
    with pytest.raises(errors.LibraryNotFound, match="does not exist"):
        driver.load(str(tmp_path / "libcuda.so.1"))
    from cudnn_rnn.bindings import cublaslt  # a real library that is not the driver
    with pytest.raises(errors.LibraryNotFound, match="is not libcuda"):
        driver.load(cublaslt.load().resolved_path)
    monkeypatch.setenv(library.ENV, str(tmp_path / "nowhere.so"))
    gpu_reason = gpu.driver_missing()
    assert gpu_reason.startswith("no NVIDIA driver found (") and "nowhere.so" in gpu_reason
    assert "env CUDA_DRIVER_LIBRARY" in gpu_reason


def test_the_version_number_decodes_as_the_driver_reports_it():
    assert library.decode_version(12090) == (12, 9, 0)
    assert library.decode_version(13000) == (13, 0, 0)


STUB = r"""
int cuDriverGetVersion(int *v) { return 34; }
int cuGetErrorName(int e, const char **s) { return 34; }
int cuGetErrorString(int e, const char **s) { return 34; }
"""


def test_a_stub_driver_is_no_driver_in_one_line(tmp_path):
    """The toolkit's stubs/libcuda.so answers CUDA_ERROR_STUB_LIBRARY to every call: a
    library of the same calls that does so (built here) is refused as no working driver,
    by the loader and by every command's GPU check, without a traceback (in a process of
    its own: a loaded library stays loaded)."""
    import shutil
    import subprocess
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler here to build a stub driver")
    (tmp_path / "stub.c").write_text(STUB)
    stub = tmp_path / "libcuda.so.1"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(stub), str(tmp_path / "stub.c")],
                   check=True)
    code = ("from cudnn_rnn.bindings import driver; from cudnn_rnn.engine import gpu\n"
            "try:\n    driver.load()\nexcept driver.errors.LibraryNotFound as e:\n"
            "    print('refused:', e)\nprint('reason:', gpu.driver_missing())")
    root = Path(__file__).resolve().parent.parent
    import os
    for env in ({"CUDA_DRIVER_LIBRARY": str(stub)}, {"LD_LIBRARY_PATH": str(tmp_path)}):
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              cwd=root, env=dict(os.environ, PYTHONPATH=str(root), **env),
                              timeout=120)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        refused, reason = proc.stdout.splitlines()
        assert "is not a working driver" in refused and "CUDA_ERROR_STUB_LIBRARY (34)" in refused
        assert reason.startswith("reason: no NVIDIA driver found (")
        assert "is not a working driver" in reason  # not "cannot be loaded": it was
