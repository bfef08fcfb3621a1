"""How many thread-block clusters of a kernel this GPU holds at once: the CUDA driver's
``cuOccupancyMaxActiveClusters`` (through :mod:`cudnn_rnn.bindings.driver`: CuPy does not
bind it). A persistent launch in clusters
is a plain launch (the grid-wide guarantee of a cooperative launch is not what its waits
need), so whether every cluster is resident at once is this check's to say before the
launch: a cluster left waiting for another's multiprocessors would leave the layers above
it spinning until the kernel's waits give up."""
from __future__ import annotations

import ctypes

from cudnn_rnn.bindings import driver
from cudnn_rnn.lowbit.engine import Unsupported

PORTABLE = 8  # the cluster size every sm_90 GPU takes without allow_non_portable
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
    size = part.cluster_size
    if size > PORTABLE:  # allowed for the query and for the launch after it
        allow_non_portable(kernel)
    wanted = part.grid // size
    held = max_active(kernel, part.grid, part.threads, part.smem)
    if held < wanted:
        raise Unsupported(f"{wanted} clusters of {size} CTAs ({part.smem} bytes of "
                          f"shared memory each): this GPU runs {held} at once; fewer batch "
                          f"slices or smaller clusters")


def _function(kernel):
    """The driver's CUfunction of CuPy's RawKernel ``kernel`` (compiled and loaded here)."""
    return ctypes.cast(kernel.kernel.ptr, driver.types.CUfunction)


def allow_non_portable(kernel) -> None:
    """Let ``kernel`` run in clusters larger than :data:`PORTABLE` CTAs (up to 16 on sm_90)."""
    driver.load().cuFuncSetAttribute(
        _function(kernel), driver.enums.FunctionAttribute.NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)


def max_active(kernel, grid: int, threads: int, smem: int) -> int:
    """Clusters of CuPy's RawKernel ``kernel`` (of its ``__cluster_dims__``; above
    :data:`PORTABLE` CTAs, with :func:`allow_non_portable` first) this GPU runs at once, each
    CTA ``threads`` threads and ``smem`` bytes of dynamic shared memory; the driver's
    exception (:mod:`cudnn_rnn.bindings.driver.errors`) if it cannot say."""
    config = driver.types.CUlaunchConfig(grid, 1, 1, threads, 1, 1, smem, None, None, 0)
    n = ctypes.c_int(0)
    driver.load().cuOccupancyMaxActiveClusters(ctypes.byref(n), _function(kernel),
                                               ctypes.byref(config))
    return n.value
