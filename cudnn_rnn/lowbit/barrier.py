"""What the chip allows one persistent RNN step, measured now: a barrier across every
multiprocessor, and that barrier with every CTA reading a state of a given size from L2
(``barrier.cu``). :mod:`cudnn_rnn.matrix.floor` turns these and the dense GEMM rates into
each benchmark shape's floor.
"""
from __future__ import annotations

import numbers
from pathlib import Path

from cudnn_rnn.matrix.jobs import job

SOURCE = Path(__file__).with_name("barrier.cu")
HELPERS = Path(__file__).with_name("device.cuh")
THREADS = 512
RING = 64 << 10  # shared memory the reads land in (overwritten: only the traffic counts)
ROUNDS = 200


WRITES = (0, 1, 16, 8)  # barrier_read's ``written``: see barrier.cu's WRITTEN
SIGNALS = ("counter", "flags", "padded", "ll")  # barrier_read's ``signal``: barrier.cu's SIGNAL


MAX_DEPTH = 32  # stages in flight barrier_read's ``depth`` may name


def source(written: int = 0, signal: str = "counter", depth: int = 0) -> str:
    if written not in WRITES:
        raise ValueError(f"written must be one of {WRITES}, got {written!r}")
    if signal not in SIGNALS:
        raise ValueError(f"signal must be one of {SIGNALS}, got {signal!r}")
    if isinstance(depth, bool) or not isinstance(depth, numbers.Integral) \
            or not 0 <= depth <= MAX_DEPTH:
        raise ValueError(f"depth is 0 (every read in flight) or 1-{MAX_DEPTH} stages of "
                         f"{THREADS * 16} bytes, got {depth!r}")
    return (f"#define THREADS {THREADS}\n#define RING {RING}\n#define WRITTEN {written}\n"
            f"#define SIGNAL {SIGNALS.index(signal)}\n"
            + (f"#define DEPTH {depth}\n" if depth else "")
            + HELPERS.read_text() + SOURCE.read_text())


@job
def barrier_read(sizes: list, rounds: int = ROUNDS, repeats: int = 5, written: int = 0,
                 signal: str = "counter", group: int = 0, depth: int = 0,
                 buffers: int = 1) -> dict:
    """``{"per_round_us": {bytes: median µs of one round}, "per_round_spread_us": {bytes:
    [first, third quartile]}, "ctas": n, "threads": ...}``: a cooperative launch of one CTA
    per multiprocessor, ``rounds`` rounds each (barrier after every CTA read ``bytes``),
    median and interquartile range over ``repeats`` launches after a warm-up.
    ``written`` 1 or 16: each round's state is a fresh slot the CTAs wrote in the round
    before, in stores of that many bytes (the persistent kernel's hand-off; 0, the floor's
    measurement: the same state every round); 8: 1-byte stores, every 32-byte sector from
    four multiprocessors (8-byte pieces dealt out in turn), as the kernel's 8-bit h.
    ``group``: the barrier meets that many consecutive CTAs (0: every CTA; the launch then
    takes whole groups, as many as fit), by one counter a group (``signal`` "counter", the
    persistent kernel's) or a flag a CTA ("flags": consecutive words; "padded": a line
    each); "ll" (``written`` 16, the whole grid, ``depth`` 0): no barrier, each 8-byte word
    of the state 4 bytes of data and a flag, polled until it shows the round (barrier.cu's
    SIGNAL 3; the state twice ``bytes`` a slot, cleared before each launch). ``depth``
    d > 0: a CTA's reads go through a ring of d stages of THREADS x 16 bytes, at most d in
    flight (the persistent kernel's bulk ring keeps its stages in flight; 0, the floor's:
    all at once). ``"met"``: every launch's polls saw their signals (none gave up) and each
    left the counters or flags as its rounds should; ``"not_met"``: the first four launches
    that did not, which and why.
    ``buffers`` n > 1 (with ``written`` 0): the state read from n allocations of their own,
    their launches taken in turn, ``"per_buffer_us"`` {bytes: each one's median}, the
    first's in ``per_round_us`` (the state read of two H100 runs, the barrier alike, differed
    twice over: 64 KB 0.26 against 0.74 us past it; whether where the state lies in L2 is
    why, this tells)."""
    import statistics

    code = source(written, signal, depth)  # an unknown mode: said before the GPU
    if written and any(int(b) % 16 for b in sizes):
        raise ValueError(f"with written {written} every size is a multiple of 16 bytes "
                         f"(slots of 16-byte stores), got {sizes}")
    if isinstance(group, bool) or not isinstance(group, numbers.Integral) or group < 0:
        raise ValueError(f"group is a count of CTAs >= 0 (0: all), got {group!r}")
    if isinstance(buffers, bool) or not isinstance(buffers, numbers.Integral) \
            or buffers < 1 or (buffers > 1 and written):
        raise ValueError(f"buffers is a count >= 1 of states read alike (more than one "
                         f"with written 0 only), got {buffers!r} with written {written}")
    if signal == "ll" and not all(int(b) > 0 for b in sizes):
        raise ValueError(f"signal ll hands a state on: every size > 0 bytes, got {sizes}")
    if signal == "ll" and (written != 16 or group or depth):
        raise ValueError(f"signal ll (the state its own signal) hands a fresh slot on to the "
                         f"whole grid, all read at once: written 16, group 0, depth 0, got "
                         f"written {written}, group {group}, depth {depth}")
    if group and written:  # every CTA writes a share of each slot, which only a barrier of
        # every CTA orders before the next round's reads
        raise ValueError("a fresh slot is written by every CTA, so groups read the same "
                         f"state every round: written 0 with group {group}")

    from cudnn_rnn.engine.gpu import cupy_or_raise
    cp = cupy_or_raise()
    dev = cp.cuda.Device()
    sms = dev.attributes["MultiProcessorCount"]
    group = min(int(group), sms)
    ctas = sms // group * group if group else sms  # whole groups, one CTA a multiprocessor
    module = cp.RawModule(code=code, options=("--std=c++17",),
                          enable_cooperative_groups=True)
    kernel = module.get_function("barrier_read")
    kernel.max_dynamic_shared_size_bytes = RING
    biggest = max([int(b) for b in sizes] + [16])
    ll = signal == "ll"  # a slot of 8-byte words, 4 bytes of data each
    states = [cp.zeros(biggest * (rounds + 1) * (2 if ll else 1) if written else biggest,
                       cp.uint8) for _ in range(buffers)]
    counter = cp.zeros(ctas * 32, cp.uint32)  # a counter a group, or a flag a CTA
    status = cp.zeros(1, cp.int32)
    stream = cp.cuda.Stream(non_blocking=True)
    out, spread, handed, missed, each = {}, {}, {}, [], {}
    with stream:
        for size in sorted({int(b) for b in sizes}):
            times = [[] for _ in states]
            for i in range(repeats + 1):
                for n, (state, kept) in enumerate(zip(states, times)):
                    counter.fill(0)
                    status.fill(0)  # each launch's own: one that gave up leaves the next alone
                    if ll:  # its flags: a word left by the launch before would be read
                        state[:(rounds + 1) * 2 * size].fill(0)  # (untimed, as the counter)
                    start, end = cp.cuda.Event(), cp.cuda.Event()
                    start.record(stream)
                    kernel((ctas,), (THREADS,), (state, cp.int64(size), counter,
                                                cp.int32(rounds), cp.int32(group), status),
                           shared_mem=RING)
                    end.record(stream)
                    end.synchronize()
                    why = _unmet(cp, counter, status, signal, group or ctas, ctas, rounds)
                    if why:
                        missed.append(f"size {size}, buffer {n}, launch {i}: {why}")
                    if i:  # the first launch warms up
                        kept.append(cp.cuda.get_elapsed_time(start, end) * 1e3 / rounds)
            out[str(size)] = round(statistics.median(times[0]), 4)
            spread[str(size)] = quartiles(times[0])
            each[str(size)] = [round(statistics.median(t), 4) for t in times]
            if written and size:  # what the last launch handed on: slot k holds k - 1
                handed[str(size)] = (_handed_ll if ll else _handed)(cp, states[0], size,
                                                                    rounds, written)
    result = {"per_round_us": out, "per_round_spread_us": spread, "ctas": ctas,
              "threads": THREADS, "rounds": rounds, "repeats": repeats, "written": written,
              "signal": signal, "group": group or ctas, "depth": depth, "met": not missed,
              "not_met": missed[:4]}
    return result | ({"handed_on": handed} if written else {}) | (
        {"buffers": buffers, "per_buffer_us": each} if buffers > 1 else {})


def _unmet(cp, counter, status, signal: str, group: int, ctas: int, rounds: int) -> str:
    """Why the last launch did not meet its signals ('' where it did): a poll that gave up
    (the status set), or counters (one a group, each then holding rounds x its CTAs) or flags
    (each holding rounds; "padded": every 32nd word; every other word still 0) not as its
    rounds leave them, with the first that differs."""
    want = cp.zeros(ctas * 32, cp.uint32)
    if signal == "counter":
        want[:ctas // group] = rounds * group
    elif signal != "ll":  # a flag a CTA, at word cta x stride ("ll": none, left at 0)
        stride = 32 if signal == "padded" else 1
        want[:ctas * stride:stride] = rounds
    why = ["a poll gave up (status 1)"] if int(status[0]) else []
    wrong = counter != want
    n = int(wrong.sum())
    if n:
        k = int(wrong.argmax())  # the first
        noun = "flag" if signal in ("flags", "padded") else "counter"
        why.append(f"{n} {noun} word(s) not as the rounds leave them (word {k} holds "
                   f"{int(counter[k])}, wants {int(want[k])})")
    return "; ".join(why)


def quartiles(times: list) -> list:
    """[first, third quartile] of ``times`` (:func:`cudnn_rnn.engine.timing.quartiles`),
    4 decimals."""
    from cudnn_rnn.engine.timing import quartiles as spread
    q1, _median, q3 = spread(times)
    return [round(q1, 4), round(q3, 4)]


def _handed(cp, state, size: int, rounds: int, written: int) -> bool:
    """Whether every slot 1..rounds of the state holds what the round before wrote (its
    number, in bytes or in 32-bit words): each CTA's share written, nothing lost."""
    slots = state[size:(rounds + 1) * size].reshape(rounds, size)
    if written == 16:
        words = slots.view(cp.uint32)
        want = cp.arange(rounds, dtype=cp.uint32)[:, None]
    else:
        words = slots
        want = (cp.arange(rounds) % 256).astype(cp.uint8)[:, None]
    return bool((words == want).all())


def _handed_ll(cp, state, size: int, rounds: int, written: int) -> bool:
    """"ll"'s :func:`_handed`: every word of slots 1..rounds (2 x ``size`` bytes each)
    holds the round before's number and its flag, that number + 1."""
    words = state[2 * size:(rounds + 1) * 2 * size].view(cp.uint32).reshape(rounds, -1, 2)
    k = cp.arange(rounds, dtype=cp.uint32)[:, None]
    return bool((words[..., 0] == k).all() and (words[..., 1] == k + 1).all())
