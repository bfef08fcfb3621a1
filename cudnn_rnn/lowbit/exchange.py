"""What the chip allows one step of a layer held in one thread-block cluster, measured now:
the cluster's barrier, and that barrier with every CTA's share of the state stored into
every cluster-mate's shared memory first (``exchange.cu``; the resident kernel's hand-off,
in its plainest form). :mod:`cudnn_rnn.matrix.floor` turns it, with the dense GEMM rates
scaled to the cluster's multiprocessors, into the cluster floor of each shape one cluster
a direction can hold: a grid barrier is not the least a step costs there (on an H100 the
resident kernel's LSTM 50/1/512/16 took 0.77x the grid floor).
"""
from __future__ import annotations

import itertools
import numbers
import os
from pathlib import Path

from cudnn_rnn.lowbit.barrier import quartiles
from cudnn_rnn.matrix.jobs import job

SOURCE = Path(__file__).with_name("exchange.cu")
HELPERS = Path(__file__).with_name("device.cuh")
THREADS = 256  # the resident kernel's
CLUSTER = 16  # the largest cluster sm_90 runs (non-portable above 8): the resident kernel's
CAPABILITY = (9, 0)
ROUNDS = 200
# each launch's own tag, never one an earlier launch stored (from a random start: not one of
# another process's either, but by a chance of 2^-32)
_TAGS = itertools.count(int.from_bytes(os.urandom(4), "little"))


def tag() -> int:
    """A launch's own tag (exchange.cu's ``tag``)."""
    return next(_TAGS) % (1 << 32)


FORMS = ("stores", "bulk")  # exchange.cu's BULK 0 and 1


def source(cluster: int = CLUSTER, form: str = "stores") -> str:
    if isinstance(cluster, bool) or not isinstance(cluster, numbers.Integral) \
            or not 1 <= cluster <= CLUSTER:
        raise ValueError(f"cluster is 1-{CLUSTER} CTAs, got {cluster!r}")
    if form not in FORMS:
        raise ValueError(f"form is one of {', '.join(FORMS)}, got {form!r}")
    return (f"#define CL {cluster}\n#define THREADS {THREADS}\n#define BULK {FORMS.index(form)}\n"
            + HELPERS.read_text() + SOURCE.read_text())


def shared_bytes(nbytes: int, cluster: int, form: str) -> int:
    """Dynamic shared memory a CTA takes to exchange ``nbytes`` (padded): two slots, and in
    the bulk form two stages of its share."""
    return 2 * nbytes + (2 * nbytes // cluster if form == "bulk" else 0)


def padded(size: int, cluster: int = CLUSTER) -> int:
    """The bytes exchanged for a state of ``size``: whole 16-byte pieces a CTA."""
    unit = 16 * cluster
    return -(-int(size) // unit) * unit


def on_chip(limits: dict, registers: int) -> int:
    """Bytes one multiprocessor holds: its shared memory (:func:`.limits.device_limits`) and
    its file of ``registers`` 32-bit registers."""
    return limits["smem_per_sm"] + 4 * registers


@job
def cluster_exchange(sizes: list, cluster: int = CLUSTER, rounds: int = ROUNDS,
                     repeats: int = 5, drop: int = -1, form: str = "stores") -> dict:
    """``{"per_round_us": {bytes: median µs of one round}, "per_round_spread_us": {bytes:
    [first, third quartile]}, "cluster": CTAs, "form", "sms", "on_chip_bytes_per_sm",
    "met", "not_met", "not_measured": {bytes: why}}``: one cluster of ``cluster`` CTAs,
    ``rounds`` rounds a launch (every CTA's share of a state of ``bytes``, padded to whole
    16-byte pieces a CTA, handed to every mate), timed inside the kernel (the slowest CTA's
    globaltimer span), median and interquartile range over ``repeats`` launches after a
    warm-up. ``form``: "stores" (16-byte stores into every mate, then the cluster barrier:
    what the benchmark measures) or "bulk" (a bulk copy a mate on mbarriers, the resident
    kernel's; 0 bytes is not measured in it). A state whose slots (and stages) do not fit
    one CTA's shared memory is not measured either (``not_measured`` says why). ``met``:
    every launch left every CTA holding the last round's state as handed on, each piece
    with its launch's own tag (what a launch before it left in shared memory does not
    pass), and no wait gave up (``not_met``: the first four launches that did not).
    ``drop``: a CTA rank whose share is wrong (-1: none; the check's own test: stores, left
    out; bulk, handed on with another tag, so that every wait completes). A GPU
    without clusters, or that runs none of ``cluster`` CTAs: ``{"skipped": why}``."""
    import statistics

    code = source(cluster, form)
    if isinstance(rounds, bool) or not isinstance(rounds, numbers.Integral) or rounds < 1:
        raise ValueError(f"rounds is a count >= 1, got {rounds!r}")
    if any(isinstance(b, bool) or not isinstance(b, numbers.Integral) or b < 0 for b in sizes):
        raise ValueError(f"sizes are byte counts >= 0, got {sizes}")
    from cudnn_rnn.engine.gpu import cupy_or_raise
    from cudnn_rnn.lowbit import clusters
    from cudnn_rnn.lowbit.limits import ATTR_REGS_PER_SM, device_limits
    cp = cupy_or_raise()
    limits = device_limits(cp)
    registers = cp.cuda.runtime.deviceGetAttribute(ATTR_REGS_PER_SM, cp.cuda.Device().id)
    have, room = limits["capability"], limits["smem_per_block"]
    if have < CAPABILITY:
        return {"skipped": f"thread-block clusters need compute capability 9.0, this GPU "
                           f"has {have[0]}.{have[1]}"}
    kernel = cp.RawModule(code=code, options=("--std=c++17",)).get_function("cluster_exchange")
    if cluster > clusters.PORTABLE:
        clusters.allow_non_portable(kernel)
    if clusters.max_active(kernel, cluster, THREADS, 0) < 1:
        return {"skipped": f"this GPU runs no cluster of {cluster} CTAs of this kernel"}
    elapsed = cp.zeros(cluster, cp.int64)
    wrong = cp.zeros(2, cp.uint32)  # pieces not as handed on, waits that gave up
    out, spread, skipped, missed = {}, {}, {}, []
    for size in sorted({int(b) for b in sizes}):
        nbytes = padded(size, cluster)
        smem = shared_bytes(nbytes, cluster, form)
        if smem > room:
            stages = " and two stages of a share" if form == "bulk" else ""
            skipped[str(size)] = (f"two slots of {nbytes} bytes{stages}: more than the "
                                  f"{room} bytes of shared memory a CTA may have")
            continue
        if form == "bulk" and not nbytes:
            skipped[str(size)] = "the bulk form hands a state on: 0 bytes is the stores form's"
            continue
        kernel.max_dynamic_shared_size_bytes = smem
        times = []
        for i in range(repeats + 1):
            wrong.fill(0)
            kernel((cluster,), (THREADS,), (cp.int64(nbytes), cp.int32(rounds), elapsed, wrong,
                                            cp.int32(drop), cp.uint32(tag())),
                   shared_mem=smem)
            cp.cuda.runtime.deviceSynchronize()
            bad, gave_up = (int(w) for w in wrong.get())
            if bad or gave_up:
                missed.append(f"size {size}, launch {i}: {bad} 16-byte pieces not as handed "
                              f"on in the last round" + (f"; {gave_up} waits gave up"
                                                         if gave_up else ""))
            if i:  # the first launch warms up
                times.append(int(elapsed.max()) / 1e3 / rounds)
        out[str(size)] = round(statistics.median(times), 4)
        spread[str(size)] = quartiles(times)
    return {"per_round_us": out, "per_round_spread_us": spread, "cluster": cluster, "form": form,
            "threads": THREADS, "rounds": rounds, "repeats": repeats,
            "sms": limits["sm_count"], "on_chip_bytes_per_sm": on_chip(limits, registers),
            "met": not missed, "not_met": missed[:4], "not_measured": skipped}
