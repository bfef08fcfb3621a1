"""The cuBLASLt bindings against the real library (the wheel loads without a GPU) and
against the cublasLt.h, cublas_api.h and library_types.h of the loaded version."""
import ctypes
import pickle
import re
import sys
from pathlib import Path

import pytest

from cudnn_rnn.bindings import cublaslt
from cudnn_rnn.bindings.cublaslt import enums as E, errors, library, types as T
from cudnn_rnn.bindings.cublaslt.prototypes import PROTOTYPES
from cudnn_rnn.bindings.finder import Candidate

from .cheader import enum_problems, parse_files, prototype_mismatches


@pytest.fixture(scope="module")
def lt():
    return cublaslt.load()


def _runtime_headers(lt_path: str) -> Path | None:
    """library_types.h (cudaDataType_t): beside the CUDA runtime wheel, the CUDA 13 wheels'
    shared include/, or the toolkit."""
    here = Path(lt_path).resolve().parent.parent / "include"
    roots = [here] + [Path(p) / "nvidia" / "cuda_runtime" / "include" for p in sys.path if p] + [
        Path("/usr/local/cuda/include"), Path("/usr/include")]
    return next((r for r in roots if (r / "library_types.h").is_file()), None)


@pytest.fixture(scope="module")
def header(lt):
    include = Path(lt.resolved_path).parent.parent / "include"
    if not (include / "cublasLt.h").is_file():
        pytest.fail(f"no cublasLt.h beside {lt.resolved_path}: the cuBLAS wheels ship include/")
    runtime = _runtime_headers(lt.path)
    if runtime is None:
        pytest.fail("no library_types.h (the CUDA runtime headers: nvidia-cuda-runtime-cu12)")
    h = parse_files([runtime / "library_types.h", include / "cublas_api.h", include / "cublasLt.h"],
                    "cublasLt")
    raw = (include / "cublas_api.h").read_text()
    parts = [re.search(rf"#define CUBLAS_VER_{k}\s+(\d+)", raw) for k in ("MAJOR", "MINOR", "PATCH")]
    h.version = tuple(int(p.group(1)) for p in parts) if all(parts) else None
    return h


def test_the_library_loads_from_where_it_says_and_is_the_headers_version(lt, header):
    assert Path(lt.resolved_path).is_file() and lt.source and lt.version_raw > 0
    assert lt.version == header.version
    assert cublaslt.loaded() is lt and cublaslt.load() is lt  # once per process


def test_every_prototype_matches_the_header(lt, header):
    mismatches = prototype_mismatches(PROTOTYPES, header)
    assert not mismatches, "\n".join(mismatches)
    assert all(lt.has_symbol(proto.name) for proto in PROTOTYPES)


def test_handles_point_to_the_headers_structs_and_value_structs_have_its_fields(header):
    for typedef, struct in T.OPAQUE_STRUCTS.items():
        assert header.structs.get(typedef) == struct, typedef
    widths = {"uint64_t": 8, "size_t": 8, "cublasStatus_t": 4, "float": 4, "int": 4}
    for cls in T.VALUE_STRUCTS:
        fields = header.value_structs[cls.C_NAME]
        assert [f.split()[-1].split("[")[0] for f in fields] == [n for n, _ in cls._fields_]
        size = 0
        for f in fields:
            kind, name = f.split()[0], f.split()[-1]
            count = int(name[name.index("[") + 1:-1]) if "[" in name else 1
            size += count * (ctypes.sizeof(T.cublasLtMatmulAlgo_t) if kind == "cublasLtMatmulAlgo_t"
                             else widths[kind])
        assert ctypes.sizeof(cls) == size, cls.C_NAME


def test_enums_have_the_headers_exact_values(header):
    # members a later cuBLAS adds are transcribed later
    problems = enum_problems(E.HEADER_CHECKED, header, header.version <= (12, 9, 3))
    assert not problems, "\n".join(problems)


def test_host_side_descriptors_answer_without_a_gpu(lt):
    desc = T.cublasLtMatmulDesc_t()
    lt.cublasLtMatmulDescCreate(ctypes.byref(desc), E.ComputeType.COMPUTE_32I, E.DataType.R_32I)
    try:
        trans = ctypes.c_int(E.Operation.T)
        lt.cublasLtMatmulDescSetAttribute(desc, E.MatmulDescAttribute.TRANSA, ctypes.byref(trans), 4)
        for attr, want in ((E.MatmulDescAttribute.COMPUTE_TYPE, E.ComputeType.COMPUTE_32I),
                           (E.MatmulDescAttribute.SCALE_TYPE, E.DataType.R_32I),
                           (E.MatmulDescAttribute.TRANSA, E.Operation.T),
                           (E.MatmulDescAttribute.TRANSB, E.Operation.N)):
            got, written = ctypes.c_int(-1), ctypes.c_size_t()
            lt.cublasLtMatmulDescGetAttribute(desc, attr, ctypes.byref(got), 4, ctypes.byref(written))
            assert (got.value, written.value) == (want, 4), attr
    finally:
        lt.cublasLtMatmulDescDestroy(desc)
    layout = T.cublasLtMatrixLayout_t()
    lt.cublasLtMatrixLayoutCreate(ctypes.byref(layout), E.DataType.R_8F_E4M3, 256, 4096, 256)
    try:
        # each attribute has its C type (cublasLt.h); a buffer of another size is refused
        for attr, ctype, want in ((E.MatrixLayoutAttribute.TYPE, ctypes.c_int32, E.DataType.R_8F_E4M3),
                                  (E.MatrixLayoutAttribute.ROWS, ctypes.c_uint64, 256),
                                  (E.MatrixLayoutAttribute.COLS, ctypes.c_uint64, 4096),
                                  (E.MatrixLayoutAttribute.LD, ctypes.c_int64, 256)):
            got, written = ctype(0), ctypes.c_size_t()
            lt.cublasLtMatrixLayoutGetAttribute(layout, attr, ctypes.byref(got), ctypes.sizeof(got),
                                                ctypes.byref(written))
            assert (got.value, written.value) == (want, ctypes.sizeof(got)), attr
    finally:
        lt.cublasLtMatrixLayoutDestroy(layout)
    pref = T.cublasLtMatmulPreference_t()
    lt.cublasLtMatmulPreferenceCreate(ctypes.byref(pref))
    size = ctypes.c_uint64(1 << 25)
    lt.cublasLtMatmulPreferenceSetAttribute(pref, E.MatmulPreferenceAttribute.MAX_WORKSPACE_BYTES,
                                            ctypes.byref(size), 8)
    lt.cublasLtMatmulPreferenceDestroy(pref)


def test_a_refused_call_raises_its_status_class_naming_the_call(lt):
    """No GPU: cublasLtCreate answers CUBLAS_STATUS_NOT_INITIALIZED; a size too small for the
    attribute is INVALID_VALUE either way."""
    from cudnn_rnn.engine import gpu
    handle = T.cublasLtHandle_t()
    if not gpu.available():
        with pytest.raises(errors.NotInitialized) as info:
            lt.cublasLtCreate(ctypes.byref(handle))
        assert info.value.call == "cublasLtCreate" and info.value.code == 1
        assert info.value.reason == lt.status_string(1) and lt.status_name(1).endswith("INITIALIZED")
    desc = T.cublasLtMatmulDesc_t()
    lt.cublasLtMatmulDescCreate(ctypes.byref(desc), E.ComputeType.COMPUTE_32F, E.DataType.R_32F)
    try:
        with pytest.raises(errors.InvalidValue) as info:
            lt.cublasLtMatmulDescSetAttribute(desc, E.MatmulDescAttribute.TRANSA,
                                              ctypes.byref(ctypes.c_int(1)), 1)
        assert "cublasLtMatmulDescSetAttribute" in str(info.value) and "INVALID_VALUE (7)" in str(info.value)
        again = pickle.loads(pickle.dumps(info.value))
        assert type(again) is errors.InvalidValue and again.call == info.value.call
    finally:
        lt.cublasLtMatmulDescDestroy(desc)
    with pytest.raises(ctypes.ArgumentError):  # a layout where a matmul descriptor belongs
        lt.cublasLtMatmulDescDestroy(T.cublasLtMatrixLayout_t())


def test_every_status_has_its_class_and_an_unknown_one_keeps_its_number():
    for member in E.Status:
        if member.value:
            err = errors.error_for("cublasLtMatmul", member.value)
            assert isinstance(err, errors.CublasLtError) and err.status_name == member.name
            assert type(err).__name__ == "".join(p.capitalize() for p in member.name.split("_"))
    assert errors.error_for("cublasLtMatmul", 999).status_name == "UNKNOWN_999"


@pytest.mark.parametrize("where,needle", [("/nonexistent/libcublasLt.so.12", "does not exist"),
                                          ("/tmp", "is a directory"),
                                          ("libnot-a-library.so.1", "cannot load")])
def test_a_bad_library_path_says_why(where, needle):
    with pytest.raises(errors.LibraryNotFound, match=needle):
        library._open(Candidate(where, "explicit"))


def test_a_library_that_is_not_cublaslt_is_refused(lt):
    from cudnn_rnn.bindings import load as load_cudnn
    with pytest.raises(errors.LibraryNotFound, match="is not libcublasLt"):
        library._open(Candidate(load_cudnn().path, "explicit"))


def test_two_arguments_of_one_type_bound_the_wrong_way_round_are_seen(header):
    """cublasLtMatmul's A and B are both `const void *`: bound in swapped order, the types
    still match, and only the parameters' names tell (the check names both)."""
    import dataclasses
    proto = next(p for p in PROTOTYPES if p.name == "cublasLtMatmul")
    names = [n for n, _ in proto.params]
    i, j = names.index("A"), names.index("B")
    params = list(proto.params)
    params[i], params[j] = (params[j][0], params[i][1]), (params[i][0], params[j][1])
    swapped = dataclasses.replace(proto, params=tuple(params))
    found = prototype_mismatches([swapped], header)
    assert any("'A'" in m and "bound as 'B'" in m for m in found), found
    assert not prototype_mismatches([proto], header)
