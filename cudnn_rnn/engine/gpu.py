"""The GPU side: is there a usable device, what is it, and raw device buffers.

CuPy provides device memory, streams and events (CuPy 14 no longer binds
cuDNN; cuDNN is reached only through :mod:`cudnn_rnn.bindings`). CuPy and libcudnn share
the driver's primary context, so CuPy pointers are valid cuDNN arguments.

Set ``CUDNN_RNN_NO_GPU=1`` to behave as on a machine without a GPU.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from functools import lru_cache

from cudnn_rnn.bindings import driver
from cudnn_rnn.bindings.finder import mapped_paths


class NoGPU(RuntimeError):
    """Device stages need a CUDA GPU; the message says why there is none."""


def driver_missing() -> str | None:
    """Why no NVIDIA driver is there (its CUDA library does not load), or None if it is.
    Without one, CUDA's own words ("driver version is insufficient") would send a user to
    upgrade a driver they do not have."""
    try:
        driver.load()
    except driver.errors.LibraryNotFound as exc:
        if not os.environ.get(driver.library.ENV) and not mapped_paths("libcuda.so"):
            return f"no NVIDIA driver found ({driver.library.SONAME} cannot be loaded)"
        # the user's path, or a libcuda that loaded and is no driver (the toolkit's stub):
        # the loader's words say which
        text = str(exc)
        return text if text.startswith("no NVIDIA driver found") else \
            f"no NVIDIA driver found ({text})"
    return None


@lru_cache(maxsize=1)
def _probe() -> tuple[object | None, str | None]:
    if os.environ.get("CUDNN_RNN_NO_GPU"):
        return None, "CUDNN_RNN_NO_GPU is set"
    missing = driver_missing()
    if missing:
        return None, missing
    try:
        import cupy  # here, once: whether it imports is what this function finds out
    except Exception as exc:  # ImportError, or a broken CUDA install
        return None, f"cupy is not importable ({type(exc).__name__}: {exc})"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # a driver is there: CUDA's own words say what is wrong
        return None, f"no usable CUDA device ({exc})"
    if count < 1:
        return None, "no CUDA device"
    return cupy, None


def cupy_or_raise(what: str | None = None):
    """The cupy module, or :class:`NoGPU` saying why ``what`` (a command's job: "training";
    by default the device stages) cannot run."""
    cupy, reason = _probe()
    if cupy is None:
        needs = f"{what} needs" if what else "device stages need"
        raise NoGPU(f"{needs} a CUDA GPU: {reason}")
    return cupy


@contextmanager
def plain_reductions(cupy):
    """CuPy's reductions inside run on its plain reduction kernels, not on the CUB block
    reductions it tries first by default (``ACCELERATOR_CUB`` among the *reduction*
    accelerators; the *routine* accelerators, CUB's precompiled device-wide sums, are kept).

    Each CUB block reduction is compiled by NVRTC through jitify with CUB's headers, per
    reduction and data type: 1.6-3.1 s a kernel on the H100/H200 hosts, against about 0.1 s
    for a plain one. Measured in one cold process (``.device/compile_log.py``, H100): 8 of
    them (``all``, ``sum``, ``mean``, ``any`` in two passes) were 17 s of the precision
    table's 47 s of compiling, 6 were 16 s of the matrix rehearsal's 23 s; every rehearsing
    process compiled them again beside the others. The checks this project runs (finite?,
    counts, means, norms) are small next to the work they check, so the plain kernels cost
    nothing measurable; a float64 sum may differ in its last bits (another order).
    Process-wide while inside (CuPy keeps one setting): the previous setting is restored."""
    core = _settings(cupy)
    before = None if core is None else _without_cub(core)
    try:
        yield
    finally:
        if core is not None:
            core.set_reduction_accelerators(before)


def plain_reductions_here() -> None:
    """:func:`plain_reductions` for the life of this process: one of this project's own (a
    matrix worker, a rehearsal), never a user's. Nothing where CuPy has no GPU."""
    cupy, _why = _probe()
    core = None if cupy is None else _settings(cupy)
    if core is not None:
        _without_cub(core)


def _settings(cupy):
    """Where CuPy keeps its accelerator settings; None where it keeps none (a CuPy without
    them, or a stand-in for it): nothing to change there."""
    core = getattr(cupy, "_core", None)
    return core if hasattr(core, "set_reduction_accelerators") else None


def _without_cub(core) -> list[str]:
    """CUB left out of CuPy's reduction accelerators; the setting before, as names."""
    before = _accelerator_names(core, core.get_reduction_accelerators())
    core.set_reduction_accelerators([a for a in before if a != "cub"])
    return before


def _accelerator_names(core, ids) -> list[str]:
    """CuPy's accelerator ids (what its getters return) as the names its setters take."""
    names = {core._accelerator.ACCELERATOR_CUB: "cub",
             core._accelerator.ACCELERATOR_CUTENSOR: "cutensor",
             core._accelerator.ACCELERATOR_CUTENSORNET: "cutensornet"}
    return [names[i] for i in ids if i in names]


def cuda_errors(cupy) -> tuple:
    """The exception types CuPy raises for a CUDA error (runtime, driver, out of memory);
    empty without cupy, so ``except cuda_errors(None)`` catches nothing."""
    if cupy is None:
        return ()
    return (cupy.cuda.runtime.CUDARuntimeError, cupy.cuda.driver.CUDADriverError,
            cupy.cuda.memory.OutOfMemoryError)


def failed_call(exc: BaseException) -> str:
    """The call to name in a record for CuPy's CUDA error ``exc``: an out-of-memory error
    comes from an allocation (cudaMalloc); any other from a CUDA call CuPy does not name."""
    return "cudaMalloc" if type(exc).__name__ == "OutOfMemoryError" else "cuda"


def held_bytes(arrays) -> int:
    """GPU memory that ``arrays`` hold as CuPy's pool counts it (each allocation once, at its
    rounded size; views share their base's); numpy arrays hold none."""
    found = {}
    for a in arrays:
        mem = getattr(getattr(a, "data", None), "mem", None)
        if mem is not None and type(a).__module__.startswith("cupy"):
            found[id(mem)] = int(mem.size)
    return sum(found.values())


def available() -> bool:
    return _probe()[0] is not None


def unavailable_reason() -> str | None:
    return _probe()[1]


def device_info() -> dict:
    """GPU name, compute capability, driver and runtime versions (for provenance)."""
    cupy, reason = _probe()
    if cupy is None:
        return {"gpu": None, "reason": reason}
    rt = cupy.cuda.runtime
    dev = cupy.cuda.Device()
    props = rt.getDeviceProperties(dev.id)
    name = props["name"]
    name = name.decode() if isinstance(name, bytes) else str(name)
    drv = rt.driverGetVersion()
    run = rt.runtimeGetVersion()
    return {
        "gpu": name,
        "device_id": dev.id,
        "compute_capability": f"{props['major']}.{props['minor']}",
        "multiprocessors": props["multiProcessorCount"],
        "memory_bytes": props["totalGlobalMem"],
        "cuda_driver": f"{drv // 1000}.{drv % 1000 // 10}",
        "cuda_runtime_cupy": f"{run // 1000}.{run % 1000 // 10}",
        "driver_version": _nvidia_driver_version(),
        "cupy": cupy.__version__,
    }


def _nvidia_driver_version() -> str | None:
    try:
        with open("/proc/driver/nvidia/version") as fh:
            first = fh.readline()
        for token in first.split():
            if token[:1].isdigit() and token.count(".") >= 1:
                return token
    except OSError:
        pass
    return None


class _StreamPointer:
    """A raw ``cudaStream_t`` as the CUDA stream protocol's object (``__cuda_stream__``)."""

    def __init__(self, ptr: int):
        self.ptr = int(ptr)

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.ptr)


def follow(stream, previous) -> None:
    """Order ``stream``'s next work after what ``previous`` enqueued (a forward moving to
    another stream: both use its buffers); not into or out of a CUDA graph capture, where an
    event across the capture's edge would break it (the capture's first call came before)."""
    if not stream.is_capturing() and not previous.is_capturing():
        stream.wait_event(previous.record())


def external_stream(cp, ptr: int, device_id: int = -1):
    """CuPy's view of a stream it does not own (PyTorch's): ``Stream.from_external`` where
    CuPy has it (14 deprecates ``ExternalStream``), else ``ExternalStream``."""
    from_external = getattr(getattr(cp.cuda, "Stream", None), "from_external", None)
    if from_external is not None:
        return from_external(_StreamPointer(ptr))
    return cp.cuda.ExternalStream(ptr, device_id)
