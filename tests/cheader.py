"""A small parser for the cuDNN headers, enough to check the bindings against them.

It strips comments and preprocessor lines, then reads ``typedef struct X *Y;``,
``typedef enum {...} Y;`` (evaluating each value, including references to earlier
enumerators) and function prototypes. C types are reduced to a comparable form:
``CType(base, pointers)`` with base one of ``int32``/``uint32``/``uint64``/
``float32``/``float64``/``char``/``void``/``struct:TAG``/``funcptr:NAME``.
"""
from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass
from pathlib import Path

INTEGERS = {
    "int": "int32", "int32_t": "int32", "signed": "int32", "signed int": "int32",
    "unsigned": "uint32", "unsigned int": "uint32", "uint32_t": "uint32",
    "size_t": "uint64", "unsigned long long": "uint64", "uint64_t": "uint64",
    "long long": "int64", "int64_t": "int64",
    "float": "float32", "double": "float64", "char": "char", "void": "void",
}
CUDA_OPAQUE = {"cudaStream_t": "CUstream_st", "cudaGraph_t": "CUgraph_st"}
CUDA_ENUMS = {"libraryPropertyType"}


@dataclass(frozen=True)
class CType:
    base: str
    pointers: int = 0

    def __str__(self):
        return self.base + "*" * self.pointers


@dataclass
class Header:
    structs: dict  # typedef name -> struct tag
    enums: dict  # typedef name -> {C member name: value}
    functions: dict  # name -> (return type text, [param texts])
    funcptrs: set
    version: tuple | None
    value_structs: dict = None  # typedef name -> its field declarations, by value


def _clean(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"^\s*#.*?(?<!\\)$", " ", text, flags=re.M)
    for macro in ("CUDNNWINAPI", "CUDNN_DEPRECATED_ENUM", "CUDNN_DEPRECATED", "CUBLASWINAPI",
                  "CUDAAPI", "__CUDA_DEPRECATED"):
        text = text.replace(macro, " ")
    return text


def _eval(expr: str, known: dict) -> int:
    expr = re.sub(r"(?<=\d)[uUlL]+\b", "", " ".join(expr.split()))
    return int(eval(expr, {"__builtins__": {}}, dict(known)))  # noqa: S307 - header text only


def parse(include_dir: Path) -> Header:
    """The cuDNN headers of ``include_dir`` (and cudnn_version.h's version)."""
    files = ["cudnn_graph.h", "cudnn_ops.h", "cudnn_adv.h"]
    header = parse_files([include_dir / f for f in files if (include_dir / f).exists()], "cudnn")
    vh = include_dir / "cudnn_version.h"
    if vh.exists():
        raw = vh.read_text()
        parts = [re.search(rf"#define CUDNN_{k}\s+(\d+)", raw) for k in ("MAJOR", "MINOR", "PATCHLEVEL")]
        if all(parts):
            header.version = tuple(int(p.group(1)) for p in parts)
    return header


def parse_files(paths: list, prefix: str) -> Header:
    """Structs, enums, function-pointer typedefs and the prototypes of functions named
    ``prefix...`` in the given header files. Besides ``typedef struct X *Y``, a pointer
    typedef of a struct typedef (``typedef cublasLtMatmulDescOpaque_t* cublasLtMatmulDesc_t``)
    names its struct; ``typedef struct {...} Name`` structs are kept by value in
    :attr:`Header.value_structs` with their fields."""
    raw = [Path(p).read_text(errors="replace") for p in paths]
    text = " ".join(_clean(r) for r in raw)
    structs = dict((m.group(2), m.group(1)) for m in
                   re.finditer(r"typedef\s+struct\s+(\w+)\s*\*\s*(\w+)\s*;", text))
    value_structs = {m.group(2): [f.strip() for f in m.group(1).split(";") if f.strip()]
                     for m in re.finditer(r"typedef\s+struct\s*(?:\w+\s*)?\{([^{}]*)\}\s*(\w+)\s*;",
                                          text)}
    for m in re.finditer(r"typedef\s+(\w+)\s*\*\s*(\w+)\s*;", text):
        if m.group(1) in value_structs:
            structs[m.group(2)] = m.group(1)
    enums, tags = {}, {}
    known = {m.group(1): int(m.group(2), 0) for r in raw  # integer macros enumerators use
             for m in re.finditer(r"^\s*#define\s+(\w+)\s+(0x[0-9a-fA-F]+|\d+)\s*$", r, flags=re.M)}
    for m in re.finditer(r"typedef\s+enum\s*(\w+)?\s*\{(.*?)\}\s*(\w+)\s*;", text, flags=re.S):
        members, value = {}, -1
        for item in m.group(2).split(","):
            item = item.strip()
            if not item:
                continue
            name, _, expr = item.partition("=")
            name = name.split()[0]
            value = _eval(expr, known) if expr.strip() else value + 1
            members[name] = value
            known[name] = value
        enums[m.group(3)] = members
        if m.group(1):
            tags[m.group(1)] = members
    for m in re.finditer(r"typedef\s+enum\s+(\w+)\s+(\w+)\s*;", text):  # C's name of a tag
        if m.group(1) in tags:
            enums.setdefault(m.group(2), tags[m.group(1)])
    funcptrs = set(re.findall(r"typedef\s+\w+\s*\(\s*\*\s*(\w+)\s*\)", text))
    functions = {}
    for m in re.finditer(rf"([A-Za-z_][\w\s\*]*?)\b({prefix}\w+)\s*\(([^;{{}}]*?)\)\s*;", text):
        ret, name, params = m.group(1), m.group(2), m.group(3)
        if "typedef" in ret:
            continue
        ret = ret.split(";")[-1].split("}")[-1]
        params = [p.strip() for p in params.split(",")] if params.strip() not in ("", "void") else []
        functions[name] = (" ".join(ret.split()), params)
    return Header(structs, enums, functions, funcptrs, None, value_structs)


def c_type(text: str, header: Header, is_param: bool = True) -> CType:
    """Reduce a C declaration (``const int dimA[]``, ``void **mAddr``) to a :class:`CType`."""
    text = text.replace("const", " ")
    arrays = text.count("[]")
    text = text.replace("[]", " ")
    stars = text.count("*")
    words = text.replace("*", " ").split()
    if is_param and len(words) > 1:
        words = words[:-1]  # drop the parameter name
    base = " ".join(words)
    pointers = stars + arrays
    if base in header.structs:
        return CType("struct:" + header.structs[base], pointers + 1)
    if base in (header.value_structs or {}):
        return CType("struct:" + base, pointers)
    if base in CUDA_OPAQUE:
        return CType("struct:" + CUDA_OPAQUE[base], pointers + 1)
    if base in header.enums or base in CUDA_ENUMS:
        return CType("int32", pointers)
    if base in header.funcptrs:
        return CType("funcptr:" + base, pointers)
    if base in INTEGERS:
        return CType(INTEGERS[base], pointers)
    raise ValueError(f"unknown C type {base!r} in {text!r}")


_SIMPLE = {}


def _simple():
    if not _SIMPLE:
        for ct, base in ((ctypes.c_int, "int32"), (ctypes.c_int32, "int32"), (ctypes.c_uint, "uint32"),
                         (ctypes.c_uint32, "uint32"), (ctypes.c_size_t, "uint64"),
                         (ctypes.c_ulonglong, "uint64"), (ctypes.c_uint64, "uint64"),
                         (ctypes.c_longlong, "int64"), (ctypes.c_int64, "int64"),
                         (ctypes.c_float, "float32"),
                         (ctypes.c_double, "float64"), (ctypes.c_char, "char")):
            _SIMPLE.setdefault(ct, (base, ctypes.sizeof(ct)))
    return _SIMPLE


def ctypes_type(ct) -> CType:
    """The same reduction for a ctypes type used in an argtypes list."""
    if ct is None:
        return CType("void", 0)
    if ct is ctypes.c_void_p:
        return CType("void", 1)
    if ct is ctypes.c_char_p:
        return CType("char", 1)
    if hasattr(ct, "C_NAME") and hasattr(ct, "_flags_"):  # CFUNCTYPE
        return CType("funcptr:" + ct.C_NAME, 0)
    simple = _simple()
    if ct in simple:
        base, size = simple[ct]
        return CType(base, 0)
    if isinstance(ct, type) and issubclass(ct, ctypes.Structure) and getattr(ct, "_fields_", None):
        return CType("struct:" + getattr(ct, "C_NAME", ct.__name__), 0)  # a struct by value
    if hasattr(ct, "_type_") and isinstance(ct._type_, type):
        inner = ct._type_
        if issubclass(inner, ctypes.Structure) and not getattr(inner, "_fields_", None):
            return CType("struct:" + inner.__name__, 1)
        sub = ctypes_type(inner)
        return CType(sub.base, sub.pointers + 1)
    raise ValueError(f"cannot reduce ctypes type {ct!r}")


def compatible(c: CType, py: CType) -> bool:
    """Exact match: pointer depth, width, signedness, float vs double, struct tag."""
    return c == py


def include_dir_for(library_path: str) -> Path | None:
    """The headers that belong to a loaded library: the wheel's include/ or /usr/include."""
    lib = Path(library_path).resolve()
    candidates = [lib.parent.parent / "include"]
    if str(lib).startswith("/usr/lib"):
        candidates += [Path("/usr/include"), Path("/usr/include/x86_64-linux-gnu")]
    for c in candidates:
        if (c / "cudnn_version.h").exists() and (c / "cudnn_adv.h").exists():
            return c
    return None


def prototype_mismatches(prototypes, header: Header) -> list[str]:
    """Each way the ``prototypes`` (bindings' :class:`Proto` records) differ from the
    header's declarations: a function the header lacks, a parameter count, a type, a
    parameter's name (two arguments of one type bound the wrong way round are only seen
    by their names)."""
    mismatches = []
    for proto in prototypes:
        if proto.name not in header.functions:
            mismatches.append(f"{proto.name}: not declared in the header")
            continue
        ret_text, params = header.functions[proto.name]
        if len(params) != len(proto.params):
            mismatches.append(f"{proto.name}: {len(proto.params)} params, header has {len(params)}")
            continue
        if not compatible(c_type(ret_text, header, is_param=False), ctypes_type(proto.restype)):
            mismatches.append(f"{proto.name} returns {ret_text}, bound as {proto.restype}")
        for (name, ct), c_text in zip(proto.params, params):
            want, got = c_type(c_text, header), ctypes_type(ct)
            if not compatible(want, got):
                mismatches.append(f"{proto.name}({name}): C {c_text!r} is {want}, bound as {got}")
            c_name = re.findall(r"[A-Za-z_]\w*", c_text)[-1]
            if c_name != name:
                mismatches.append(f"{proto.name}: the header names {c_text!r} {c_name!r}, "
                                  f"bound as {name!r}")
    return mismatches


def enum_problems(classes, header: Header, complete: bool) -> list[str]:
    """Each way the enum ``classes`` (``C_NAME``, ``C_PREFIX``) differ from the header's:
    a value, a member the header lacks, and where ``complete`` (the header is not newer than
    the transcription) a member the bindings lack."""
    problems = []
    for cls in classes:
        c_members = header.enums.get(cls.C_NAME)
        if c_members is None:
            problems.append(f"{cls.C_NAME} not found in the header")
            continue
        ours = {cls.C_PREFIX + name: m.value for name, m in cls.__members__.items()}
        problems += [f"{k}: header {v}, bindings {ours[k]}" for k, v in c_members.items()
                     if k in ours and ours[k] != v]
        problems += [f"{cls.C_NAME}: bindings have {k}, header does not" for k in ours
                     if k not in c_members]
        if complete:
            problems += [f"{cls.C_NAME}: header has {k}, bindings lack it" for k in c_members
                         if k not in ours]
    return problems
