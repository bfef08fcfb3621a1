"""Cubins compiled by NVRTC directly, for an architecture named (:func:`compile_source`: no
GPU needed), and kernels loaded from them (:func:`load`). The kernels that use Hopper's
arch-specific instructions (``wgmma``) need it: they compile for sm_90a, and CuPy's RawModule
compiles for the device's plain architecture (sm_90), which refuses them. A loaded cubin is
kept in CuPy's kernel cache folder (``CUPY_CACHE_DIR``, else ``~/.cupy/kernel_cache``) under
the hash of its source, so a second process loads it without compiling, as CuPy's own cache
does; within a process the loaded module is kept too. sm_90a machine code runs on compute
capability 9.0 only."""
from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from pathlib import Path

from cudnn_rnn.lowbit.engine import Unsupported

CAPABILITY = (9, 0)
OPTIONS = ("--std=c++17", "-lineinfo")  # as persistent.OPTIONS (ncu maps SASS to lines)
_LOCK = threading.Lock()
_LOADED: dict = {}


def compile_source(text: str, name: str, arch: str, log: list | None = None) -> bytes:
    """NVRTC's cubin of CUDA source ``text`` for ``arch`` (e.g. "sm_90", or "sm_90a" for
    wgmma, which CuPy's RawModule would compile for plain sm_90), or RuntimeError with
    NVRTC's log. With ``log`` (a list), ptxas reports what each kernel takes and its lines
    are appended there (:func:`cudnn_rnn.lowbit.ptxas.ptxas_info` reads them)."""
    from cupy_backends.cuda.libs import nvrtc
    prog = nvrtc.createProgram(text, name, [], [])
    options = [f"--gpu-architecture={arch}", *OPTIONS]
    try:
        nvrtc.compileProgram(prog, options + (["--ptxas-options=-v"] if log is not None else []))
        if log is not None:
            log.extend(nvrtc.getProgramLog(prog).splitlines())
        return nvrtc.getCUBIN(prog)
    except nvrtc.NVRTCError as exc:
        raise RuntimeError(f"NVRTC: {exc}\n{nvrtc.getProgramLog(prog)}") from None
    finally:
        nvrtc.destroyProgram(prog)


def require(capability: tuple[int, int], what: str) -> None:
    """:class:`Unsupported` unless this GPU runs sm_90a code."""
    if tuple(capability) != CAPABILITY:
        raise Unsupported(f"{what} runs sm_90a code (wgmma): compute capability 9.0 only, this "
                          f"GPU has {capability[0]}.{capability[1]}")


def cache_dir() -> Path:
    return Path(os.environ.get("CUPY_CACHE_DIR") or Path.home() / ".cupy" / "kernel_cache")


def load(cp, text: str, name: str, cooperative: bool):
    """(module, kernel ``name``) of CUDA source ``text`` for sm_90a, a CuPy RawModule and
    RawKernel (launched cooperatively with ``cooperative``): from this process's memo, from
    the cache folder, or compiled now (:func:`compile_source`; RuntimeError with NVRTC's
    log where it does not compile)."""
    from cupy_backends.cuda.libs import nvrtc
    made = f"{nvrtc.getVersion()} {OPTIONS}\n{text}"  # a new NVRTC or options: a new cubin
    key = (hashlib.sha256(made.encode()).hexdigest(), name, cooperative, cp.cuda.Device().id)
    with _LOCK:
        if key in _LOADED:
            return _LOADED[key]
    path = cache_dir() / f"sm90a_{key[0]}.cubin"
    if not path.is_file():
        cubin = compile_source(text, f"{name}.cu", "sm_90a")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.part")
            try:
                partial.write_bytes(cubin)
                partial.replace(path)  # whole or absent: another process may write it too
            finally:
                partial.unlink(missing_ok=True)
        except OSError:  # a cache folder this process cannot write: this process's own file
            fd, own = tempfile.mkstemp(suffix=".cubin")
            with os.fdopen(fd, "wb") as f:
                f.write(cubin)
            path = Path(own)
    module = cp.RawModule(path=str(path), enable_cooperative_groups=cooperative)
    kernel = module.get_function(name)
    with _LOCK:
        return _LOADED.setdefault(key, (module, kernel))
