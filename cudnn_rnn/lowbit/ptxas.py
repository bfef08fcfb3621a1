"""The persistent kernel compiled without a GPU, for tests and inspection: NVRTC's cubin for
an architecture, and what ptxas says the kernel takes (registers, spills, its own shared
memory). The engine itself compiles through CuPy (:func:`cudnn_rnn.lowbit.persistent.compiled`),
which caches the module; these compile the same source (:func:`persistent.source`, with
:func:`cudnn_rnn.lowbit.cubin.compile_source`) from the constants of a shape
(:func:`persistent.defines` of a :func:`partition.plan`).
"""
from __future__ import annotations

import re

from cudnn_rnn.lowbit.cubin import compile_source
from cudnn_rnn.lowbit.persistent import source


def nvrtc_compile(consts: dict, arch: str, log: list | None = None) -> bytes:
    """Compile the persistent kernel of ``consts`` with NVRTC for ``arch`` (e.g. "sm_90")
    without a GPU: :func:`compile_source` of :func:`persistent.source`."""
    return compile_source(source(consts), "persistent.cu", arch, log)


def ptxas_info(consts: dict, arch: str = "sm_90") -> dict:
    """What ptxas says the kernel of ``consts`` takes per thread and block: ``registers``,
    ``spill_stores`` and ``spill_loads`` (bytes), ``static_smem`` (bytes of its own
    ``__shared__`` variables, which :data:`persistent.STATIC_SMEM` must cover)."""
    log: list = []
    nvrtc_compile(consts, arch, log)
    text = "\n".join(log)
    entries = re.findall(r"Compiling entry function '(\w+)'", text)
    if entries != ["persistent_rnn"]:  # one kernel, so its numbers are the first found
        raise RuntimeError(f"ptxas compiled {entries}, not the kernel alone:\n{text}")
    found = {"registers": r"Used (\d+) registers", "static_smem": r"(\d+) bytes smem",
             "spill_stores": r"(\d+) bytes spill stores", "spill_loads": r"(\d+) bytes spill loads"}
    info = {}
    for name, pattern in found.items():
        m = re.search(pattern, text)
        if m is None and name == "registers":
            raise RuntimeError(f"ptxas reported no register count for the kernel:\n{text}")
        info[name] = int(m.group(1)) if m else 0
    return info
