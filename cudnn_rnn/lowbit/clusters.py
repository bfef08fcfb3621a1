"""How many thread-block clusters of a kernel this GPU holds at once: the CUDA driver's
``cuOccupancyMaxActiveClusters``, which CuPy does not bind. A persistent launch in clusters
is a plain launch (the grid-wide guarantee of a cooperative launch is not what its waits
need), so whether every cluster is resident at once is this check's to say before the
launch: a cluster left waiting for another's multiprocessors would leave the layers above
it spinning until the kernel's waits give up."""
from __future__ import annotations

import ctypes
import functools

from cudnn_rnn.engine.gpu import DRIVER_LIBRARY
from cudnn_rnn.lowbit.engine import Unsupported

NON_PORTABLE = 14  # CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED (cuda.h)
PORTABLE = 8  # the cluster size every sm_90 GPU takes without NON_PORTABLE
CAPABILITY = (9, 0)  # thread-block clusters


def check_settings(settings, capability: tuple) -> None:
    """:class:`Unsupported` for a launch shape in clusters this GPU or the shape itself
    cannot take (before anything is built)."""
    if capability < CAPABILITY:
        raise Unsupported(f"thread-block clusters need compute capability "
                          f"{'.'.join(map(str, CAPABILITY))}, this GPU has "
                          f"{'.'.join(map(str, capability))}")
    if settings.poll:
        raise Unsupported("a launch in clusters meets its group at the cluster barrier; "
                          "polling the state (p) is the other way: choose one")


def check_resident(kernel, part) -> None:
    """:class:`Unsupported` unless every cluster of ``part``'s launch of ``kernel`` is
    resident at once."""
    if part.cluster > PORTABLE:  # allowed for the query and for the launch after it
        from cupy_backends.cuda.api import driver
        driver.funcSetAttribute(kernel.kernel.ptr, NON_PORTABLE, 1)
    wanted = part.grid // part.cluster
    held = max_active(kernel, part.grid, part.threads, part.smem)
    if held < wanted:
        raise Unsupported(f"{wanted} clusters of {part.cluster} CTAs ({part.smem} bytes of "
                          f"shared memory each): this GPU runs {held} at once; fewer batch "
                          f"slices or smaller clusters")


class _LaunchConfig(ctypes.Structure):
    """CUlaunchConfig (cuda.h), without attributes: the cluster size is the kernel's own
    (``__cluster_dims__``)."""
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint),
                ("gridDimZ", ctypes.c_uint), ("blockDimX", ctypes.c_uint),
                ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.c_void_p), ("numAttrs", ctypes.c_uint)]


@functools.cache
def _query():
    """The driver's ``cuOccupancyMaxActiveClusters``, typed (loaded once)."""
    query = ctypes.CDLL(DRIVER_LIBRARY).cuOccupancyMaxActiveClusters
    query.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_void_p,
                      ctypes.POINTER(_LaunchConfig)]
    query.restype = ctypes.c_int
    return query


def max_active(kernel, grid: int, threads: int, smem: int) -> int:
    """Clusters of CuPy's RawKernel ``kernel`` (of its ``__cluster_dims__``; above
    :data:`PORTABLE` CTAs, with NON_PORTABLE allowed) this GPU runs at once, each CTA
    ``threads`` threads and ``smem`` bytes of dynamic shared memory; RuntimeError with the
    driver's code if it cannot say."""
    fn = kernel.kernel.ptr
    config = _LaunchConfig(grid, 1, 1, threads, 1, 1, smem, None, None, 0)
    n = ctypes.c_int(0)
    status = _query()(ctypes.byref(n), ctypes.c_void_p(fn), ctypes.byref(config))
    if status:
        raise RuntimeError(f"cuOccupancyMaxActiveClusters: CUresult {status}")
    return n.value
