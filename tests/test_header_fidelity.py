"""Every prototype and enum in bindings/ against the C headers of the loaded library."""
import pytest

from cudnn_rnn.bindings import enums
from cudnn_rnn.bindings.ctypes_types import OPAQUE_STRUCTS
from cudnn_rnn.bindings.prototypes import PROTOTYPES

from .cheader import (c_type, compatible, ctypes_type, include_dir_for, parse,
                      prototype_mismatches)


@pytest.fixture(scope="module")
def header(lib):
    include = include_dir_for(lib.path)
    if include is None:
        pytest.fail(f"no cuDNN headers beside {lib.path}: the wheels ship them in include/")
    return parse(include)


def test_headers_are_those_of_the_loaded_version(lib, header):
    assert header.version == lib.version


def test_every_declared_function_matches_its_c_prototype(lib, header):
    present = [proto for proto in PROTOTYPES if proto.name in header.functions]
    mismatches = [f"{proto.name}: exported but not in the headers" for proto in PROTOTYPES
                  if proto not in present and lib.has_symbol(proto.name)
                  and (proto.required or lib.version_number >= max(proto.min_version, 1))]
    mismatches += prototype_mismatches(present, header)
    assert not mismatches, "\n".join(mismatches)
    assert len(present) >= 30


def test_opaque_handle_types_point_to_the_headers_structs(header):
    for typedef, tag in OPAQUE_STRUCTS.items():
        assert header.structs.get(typedef) == tag, typedef


def test_enums_have_the_headers_exact_values(lib, header):
    problems = []
    for cls in enums.HEADER_CHECKED:
        c_members = header.enums.get(cls.C_NAME)
        if c_members is None:
            problems.append(f"{cls.C_NAME} not found in the headers")
            continue
        ours = {cls.C_PREFIX + name: member.value for name, member in cls.__members__.items()}
        for c_name, value in c_members.items():
            if c_name not in ours:
                problems.append(f"{cls.C_NAME}: header has {c_name}={value}, bindings lack it")
            elif ours[c_name] != value:
                problems.append(f"{c_name}: header {value}, bindings {ours[c_name]}")
        for c_name, value in ours.items():
            member = cls(value)
            newer = enums.MEMBER_SINCE.get(member, 0) > lib.version_number
            if c_name not in c_members and not newer:
                problems.append(f"{cls.C_NAME}: bindings have {c_name}, header does not")
    assert not problems, "\n".join(problems)


def test_defines_match(header, lib):
    from pathlib import Path
    text = (Path(include_dir_for(lib.path)) / "cudnn_adv.h").read_text()
    assert "#define CUDNN_RNN_PADDED_IO_ENABLED (1U << 0)" in text
    assert enums.RNN_PADDED_IO_ENABLED == 1 and enums.RNN_PADDED_IO_DISABLED == 0


def test_the_type_check_itself_can_fail(header):
    import ctypes
    assert not compatible(c_type("int32_t x", header), ctypes_type(ctypes.c_uint32))  # signedness
    assert not compatible(c_type("float dropout", header), ctypes_type(ctypes.c_double))
    assert not compatible(c_type("size_t n", header), ctypes_type(ctypes.c_uint32))  # width
    assert not compatible(c_type("int *v", header), ctypes_type(ctypes.c_int))  # pointer vs value
    from cudnn_rnn.bindings import ctypes_types as T
    assert not compatible(c_type("cudnnRNNDescriptor_t d", header),
                          ctypes_type(T.cudnnTensorDescriptor_t))
    assert compatible(c_type("const int dimA[]", header),
                      ctypes_type(ctypes.POINTER(ctypes.c_int)))
