"""A benchmark shape's floor: the least time this chip allows its forward (inference), from
what the same run measured, so every speed figure can be read against it.

    floor = the input GEMM at the measured dense rate
          + rounds x max(one round's recurrent products at the measured dense rate,
                         the measured barrier with every CTA reading the round's state)

A *round* is one step of every layer that can run at once: a unidirectional stack runs as a
wavefront (T + L - 1 rounds: layer l at step t beside layer l-1 at step t+1), a
bidirectional one layer after layer (L x T rounds, both directions together). The state a
CTA must read per round is the widest layer's: h (B x H) for the first layer, the layer
below's output and h (B x (D+1)H) above it, in the operand format (2 bytes for 16-bit, 1 for
8-bit). Only layer 0's input projection is a GEMM over all steps; above it the input
product is part of the round (its input comes from the round before).

The rates are cuBLASLt's dense (8192^3) rates per precision and the barrier-and-read times
come from :func:`cudnn_rnn.lowbit.barrier.barrier_read`, both measured in the run.

A grid barrier is not the least a step can cost where one layer fits one thread-block
cluster a direction (the resident kernel's way: a cluster's barrier and its mates' shared
memory instead of every multiprocessor meeting and reading L2). There the floor is the
lower of that one and the *cluster floor*:

    cluster floor = the input GEMM at the measured dense rate
                  + T x max(one round's products at the dense rate's share of the
                            cluster's multiprocessors (D clusters of C CTAs of the SMs),
                            the measured cluster exchange of the round's state)

for a single layer (uni- or bidirectional, a cluster a direction) whose recurrent weights
of a direction fit the cluster's multiprocessors (shared memory and registers), the exchange
from :func:`cudnn_rnn.lowbit.exchange.cluster_exchange`, measured in the run.
"""
from __future__ import annotations

DENSE = (8192, 8192, 8192)
OPERANDS = {"16-bit": ("fp16", 2), "int8": ("int8", 1), "fp8": ("fp8", 1)}


def rounds(shape: dict) -> int:
    T, L = shape["seq_length"], shape["layers"]
    return L * T if shape.get("bidirectional") else T + L - 1


def _dirs(shape: dict) -> int:
    return 2 if shape.get("bidirectional") else 1


def state_bytes(shape: dict, bytes_per_value: int) -> int:
    """Bytes of state the widest layer's CTA reads in a round."""
    H, B, D = shape["hidden"], shape["batch"], _dirs(shape)
    k = H if shape["layers"] == 1 else (D + 1) * H
    return B * k * bytes_per_value


def round_flop(shape: dict, gates: int) -> int:
    """Operations of one round's products (the recurrent ones, and the input ones above
    the first layer): a unidirectional round has every layer, a bidirectional one layer's
    two directions."""
    H, B, L, D = shape["hidden"], shape["batch"], shape["layers"], _dirs(shape)
    per_layer = [2 * gates * H * B * (H + (0 if layer == 0 else D * H)) * D for layer in range(L)]
    return max(per_layer) if D == 2 else sum(per_layer)


def input_flop(shape: dict, gates: int) -> int:
    H, B, T, D = shape["hidden"], shape["batch"], shape["seq_length"], _dirs(shape)
    return 2 * gates * H * shape.get("input", H) * T * B * D


def dense_rate(rates: dict, precision: str) -> float | None:
    """The dense TFLOPS of ``precision`` among a run's cuBLASLt rates (None: not measured)."""
    r = rates.get(f"{precision} {DENSE[0]}x{DENSE[1]}x{DENSE[2]}") or {}
    return r.get("tflops")


def _ms(shape: dict, gates: int, rate: float, read: float, share: float = 1.0) -> tuple:
    """(floor ms, input ms, µs a round, products' µs a round) at ``rate`` TFLOPS and a
    barrier-and-read of ``read`` µs, the round's products on ``share`` of the chip."""
    products_us = round_flop(shape, gates) / (rate * share * 1e12) * 1e6
    input_ms = input_flop(shape, gates) / (rate * 1e12) * 1e3
    round_us = max(products_us, read)
    return input_ms + rounds(shape) * round_us / 1e3, input_ms, round_us, products_us


def floor(shape: dict, gates: int, operands: str, rates: dict, per_round_us: dict,
          per_round_spread_us: dict | None = None, exchange: dict | None = None) -> dict | None:
    """The floor of ``shape`` with ``operands`` (:data:`OPERANDS`: the GEMMs' precision and
    the state's bytes per value): ``{ms, input_ms, round_us, rounds, bound, ms_range}``
    (bound: what sets each round, "state read" or "products", or with a cluster "cluster
    exchange" or "cluster products"; ms_range: the floor at the quartiles of the run's rate
    and read, the read's lower with the rate's upper and the other way round, or None where
    the run recorded no quartiles of the read); None where the run lacks the rate or the
    barrier measurement of this state size and no cluster floor applies. The read is the
    cheapest the run measured of this size or a larger one (:func:`cheapest`).
    ``exchange``: the run's :func:`cudnn_rnn.lowbit.exchange.cluster_exchange`, whose
    :func:`cluster_floor` is the floor where it is the lower (or the only one)."""
    precision, width = OPERANDS[operands]
    rate = dense_rate(rates, precision)
    size = str(state_bytes(shape, width))
    grid = None if not rate or per_round_us.get(size) is None else _floor(
        shape, gates, rates, precision, per_round_us, per_round_spread_us,
        cheapest(per_round_us, size), 1.0, ("state read", "products"))
    cluster = cluster_floor(shape, gates, operands, rates, exchange)
    return min((f for f in (grid, cluster) if f), key=lambda f: f["ms"], default=None)


def cluster_floor(shape: dict, gates: int, operands: str, rates: dict,
                  exchange: dict | None) -> dict | None:
    """:func:`floor`'s dict for ``shape`` held in a cluster a direction (the module's
    *cluster floor*), from the run's ``exchange``; None where the run did not measure it
    (or measured no state of this size or larger, or a launch's hand-off did not check),
    the shape has more than one layer, or a direction's recurrent weights do not fit the
    cluster's multiprocessors (all their shared memory and registers: an upper bound of
    what fits). The products' share of the chip is at most all of it."""
    per_round = (exchange or {}).get("per_round_us")
    precision, width = OPERANDS[operands]
    size = str(state_bytes(shape, width))
    if not per_round or exchange.get("met") is False or shape["layers"] != 1 \
            or not dense_rate(rates, precision) \
            or not any(int(s) >= int(size) for s in per_round):
        return None
    held = exchange["cluster"] * exchange["on_chip_bytes_per_sm"]
    if gates * shape["hidden"] ** 2 * width > held:
        return None
    share = min(1.0, _dirs(shape) * exchange["cluster"] / exchange["sms"])
    return _floor(shape, gates, rates, precision, per_round, exchange.get("per_round_spread_us"),
                  cheapest(per_round, size), share, ("cluster exchange", "cluster products"))


def _floor(shape, gates, rates, precision, per_round_us, spreads, size, share, bounds):
    """:func:`floor`'s dict with the round's cost of ``size`` and its products on ``share``
    of the chip; ``bounds``: what to call a round set by the cost or by the products."""
    rate, read = dense_rate(rates, precision), per_round_us[size]
    ms, input_ms, round_us, products_us = _ms(shape, gates, rate, read, share)
    spread = (spreads or {}).get(size)
    measured = rates[f"{precision} {DENSE[0]}x{DENSE[1]}x{DENSE[2]}"]
    lo_rate, hi_rate = measured.get("tflops_q1", rate), measured.get("tflops_q3", rate)
    ms_range = None if not spread else (_ms(shape, gates, hi_rate, spread[0], share)[0],
                                        _ms(shape, gates, lo_rate, spread[1], share)[0])
    return {"ms": ms, "input_ms": input_ms, "round_us": round_us, "rounds": rounds(shape),
            "bound": bounds[0] if read >= products_us else bounds[1], "ms_range": ms_range}


def cheapest(per_round_us: dict, size: str) -> str:
    """Of the measured sizes of at least ``size`` bytes, the one whose barrier and read took
    least (the larger size on a tie): reading more bytes, a superset of the state, reads the
    state too, so no state costs more than a larger read was measured to. (Every CTA reading
    the same 8 or 16 KB took longer than 32 KB in both runs of the H100's 44-shape benchmark,
    2.19 and 2.28 against 1.88 us a round, and the floors of its batch-16 shapes took them.)"""
    at = [s for s in per_round_us if int(s) >= int(size)]
    return min(at, key=lambda s: (per_round_us[s], -int(s)))


def cluster_sizes(shapes: list) -> list[int]:
    """The state sizes (bytes) a run's cluster exchange must measure for the cluster floors
    of ``shapes`` (those of one layer; 0: the cluster's barrier alone)."""
    return sorted({0} | {state_bytes(s, w) for s in shapes if s["layers"] == 1
                         for _, w in OPERANDS.values()})


def sizes(shapes: list) -> list[int]:
    """The state sizes (bytes) a run must measure for the floors of ``shapes`` (0: the
    barrier alone)."""
    return sorted({0} | {state_bytes(s, w) for s in shapes for _, w in OPERANDS.values()})
