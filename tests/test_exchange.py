"""The cluster floor (matrix/floor.py's cluster_floor) from a run's cluster exchange
(lowbit/exchange.py), without a GPU: its arithmetic, where it applies, how the frontier
reads it, and the microbenchmark's source compiled for sm_90."""
import re

import pytest

from cudnn_rnn.lowbit import exchange
from cudnn_rnn.matrix import floor
from cudnn_rnn.matrix.bench import PROVENANCE_KEYS, RUN
from cudnn_rnn.matrix.jsontypes import problem
from cudnn_rnn.reporting import frontier

from .test_persistent import _nvrtc_or_skip

DENSE = "8192x8192x8192"
RATES = {f"fp16 {DENSE}": {"tflops": 800.0}, f"int8 {DENSE}": {"tflops": 1600.0},
         f"fp8 {DENSE}": {"tflops": 1500.0}}
SMALL = {"cell": "LSTM", "seq_length": 50, "layers": 1, "hidden": 512, "batch": 16,
         "input": 512}
ON_CHIP = 228 * 1024 + 4 * 65536  # an H100 multiprocessor's shared memory and registers


def _exchange(per_round, cluster=16, sms=132, on_chip=ON_CHIP, spread=None):
    out = {"per_round_us": per_round, "cluster": cluster, "sms": sms,
           "on_chip_bytes_per_sm": on_chip}
    return out | ({"per_round_spread_us": spread} if spread else {})


def test_a_layer_in_a_cluster_is_floored_by_its_exchange_or_its_share_of_the_products():
    """One layer, 8-bit, batch 16: the grid's barrier (1.9 us a round) is not the least a
    step costs; a cluster of 16 of 132 multiprocessors exchanging the state in 0.5 us
    is, its products at 16/132 of the dense rate taking less than that."""
    size = str(floor.state_bytes(SMALL, 1))
    grid = {size: 1.9}
    f = floor.floor(SMALL, 4, "int8", RATES, grid, None, _exchange({size: 0.5}))
    input_ms = 2 * 4 * 512 * 512 * 50 * 16 / 1600e12 * 1e3
    products_us = 2 * 4 * 512 * 16 * 512 / (1600e12 * 16 / 132) * 1e6
    assert products_us < 0.5
    assert f["bound"] == "cluster exchange" and f["round_us"] == 0.5
    assert f["ms"] == pytest.approx(input_ms + 50 * 0.5e-3)
    assert f["ms"] < floor.floor(SMALL, 4, "int8", RATES, grid)["ms"]  # the grid's, alone
    # a slower exchange than the grid's barrier leaves the grid's floor
    slow = floor.floor(SMALL, 4, "int8", RATES, grid, None, _exchange({size: 2.5}))
    assert slow["bound"] == "state read" and slow["round_us"] == 1.9
    # a cheap exchange: the cluster's share of the products sets the round
    fast = floor.floor(SMALL, 4, "int8", RATES, grid, None, _exchange({size: 0.01}))
    assert fast["bound"] == "cluster products"
    assert fast["round_us"] == pytest.approx(products_us)


def test_both_directions_take_a_cluster_each_and_their_products_share_the_chip_twice():
    bi = dict(SMALL, bidirectional=True)
    size = str(floor.state_bytes(bi, 1))
    assert size == str(16 * 512)  # a direction's own h: the cluster exchanges no other
    one = floor.cluster_floor(SMALL, 4, "int8", RATES, _exchange({size: 0.01}))
    two = floor.cluster_floor(bi, 4, "int8", RATES, _exchange({size: 0.01}))
    assert two["round_us"] == pytest.approx(one["round_us"])  # twice the work, twice the SMs
    assert two["input_ms"] == pytest.approx(2 * one["input_ms"])


def test_the_cluster_floor_holds_only_where_a_cluster_can_hold_the_layer():
    size = str(floor.state_bytes(SMALL, 1))
    measured = _exchange({size: 0.5})
    two_layers = dict(SMALL, layers=2)
    assert floor.cluster_floor(two_layers, 4, "int8", RATES, measured) is None
    # LSTM H 4096 in 8 bits: 64 MiB of recurrent weights against 16 x 484 KiB
    wide = dict(SMALL, hidden=4096, input=4096)
    big = str(floor.state_bytes(wide, 1))
    assert floor.cluster_floor(wide, 4, "int8", RATES, _exchange({big: 0.5})) is None
    # a direction's weights exactly what the cluster holds: it applies; a byte more: not
    held = 4 * 512 * 512
    assert floor.cluster_floor(SMALL, 4, "int8", RATES, _exchange(
        {size: 0.5}, on_chip=held // 16)) is not None
    assert floor.cluster_floor(SMALL, 4, "int8", RATES, _exchange(
        {size: 0.5}, on_chip=held // 16 - 1)) is None
    # not measured (a skipped job, no size this large) or no rate: none
    assert floor.cluster_floor(SMALL, 4, "int8", RATES, {"skipped": "no clusters"}) is None
    assert floor.cluster_floor(SMALL, 4, "int8", RATES, _exchange({"0": 0.2})) is None
    assert floor.cluster_floor(SMALL, 4, "int8", {}, measured) is None
    # a larger state measured stands for a smaller one (a superset is exchanged too)
    larger = floor.cluster_floor(SMALL, 4, "int8", RATES, _exchange({str(4 * int(size)): 0.7}))
    assert larger["round_us"] == 0.7


def test_a_hand_off_that_did_not_check_gives_no_floor_and_a_small_chip_no_more_than_all():
    size = str(floor.state_bytes(SMALL, 1))
    broken = dict(_exchange({size: 0.5}), met=False)
    assert floor.cluster_floor(SMALL, 4, "int8", RATES, broken) is None
    assert floor.floor(SMALL, 4, "int8", RATES, {size: 1.9}, None, broken)["bound"] == \
        "state read"
    # a cluster of 16 on a GPU of 8 multiprocessors: the products on all of it, no more
    tiny = floor.cluster_floor(SMALL, 4, "int8", RATES, _exchange({size: 0.01}, sms=8))
    assert tiny["round_us"] == pytest.approx(floor.round_flop(SMALL, 4) / 1600e12 * 1e6)


def test_without_the_grids_measurement_the_cluster_floor_stands_alone():
    size = str(floor.state_bytes(SMALL, 1))
    f = floor.floor(SMALL, 4, "int8", RATES, {}, None, _exchange({size: 0.5}))
    assert f["bound"] == "cluster exchange"
    assert floor.floor(SMALL, 4, "int8", RATES, {}, None, None) is None


def test_what_fits_is_a_directions_weights_in_the_operands_width():
    """LSTM H 1024: 4 MB of 8-bit recurrent weights a direction fit 16 x 484 KB, 8 MB of
    16-bit ones do not; both directions' 8 MB in 8 bits still fit, a cluster each."""
    wide = dict(SMALL, hidden=1024, input=1024)
    measured = _exchange({str(floor.state_bytes(wide, 2)): 0.5})
    assert floor.cluster_floor(wide, 4, "int8", RATES, measured) is not None
    assert floor.cluster_floor(wide, 4, "16-bit", RATES, measured) is None
    assert floor.cluster_floor(dict(wide, bidirectional=True), 4, "int8", RATES,
                               measured) is not None


def test_the_cluster_floors_range_comes_from_its_exchanges_quartiles():
    size = str(floor.state_bytes(SMALL, 1))
    rates = {f"int8 {DENSE}": {"tflops": 1600.0, "tflops_q1": 1500.0, "tflops_q3": 1700.0}}
    f = floor.cluster_floor(SMALL, 4, "int8", rates,
                            _exchange({size: 0.5}, spread={size: [0.45, 0.6]}))
    lo, hi = f["ms_range"]
    assert lo == pytest.approx(2 * 4 * 512 * 512 * 50 * 16 / 1700e12 * 1e3 + 50 * 0.45e-3)
    assert hi == pytest.approx(2 * 4 * 512 * 512 * 50 * 16 / 1500e12 * 1e3 + 50 * 0.6e-3)


def test_the_exchange_measures_the_one_layer_states_and_the_barrier_alone():
    seed = dict(SMALL, seq_length=20, layers=2, batch=64)
    assert floor.cluster_sizes([seed]) == [0]
    assert floor.cluster_sizes([SMALL, seed]) == [0, 16 * 512, 16 * 512 * 2]
    assert exchange.padded(0) == 0 and exchange.padded(16 * 512) == 16 * 512
    assert exchange.padded(1) == 256 and exchange.padded(257, cluster=2) == 288
    assert exchange.on_chip({"smem_per_sm": 233472}, 65536) == 233472 + 262144


def test_a_runs_cluster_exchange_is_part_of_its_record_and_lowers_the_frontiers_floor():
    size = str(floor.state_bytes(SMALL, 1))
    measured = _exchange({"0": 0.2, size: 0.5})
    run = {"session": "s", "provenance": {k: "x" for k in PROVENANCE_KEYS},
           "engine_gemm": {"rates": {k: dict(v, tflops_q1=v["tflops"], tflops_q3=v["tflops"])
                                     for k, v in RATES.items()}},
           "engine_floor": {"per_round_us": {size: 1.9}},
           "cluster_floor": measured}
    checked = lambda r: problem(r, RUN, "run")  # noqa: E731
    assert checked(run) is None
    assert checked(dict(run, cluster_floor={"skipped": "no clusters"})) is None
    assert "cluster_floor" in checked(dict(run, cluster_floor=dict(measured, cluster=0)))
    lacking = {k: v for k, v in measured.items() if k != "on_chip_bytes_per_sm"}
    assert "on_chip_bytes_per_sm" in checked(dict(run, cluster_floor=lacking))
    rec = {"id": "LSTM/T50L1H512B16", "session": "s", "shape": SMALL, "candidates": [],
           "engine": [{"config": "persistent:int8/both", "outcome": "OK", "engine": "persistent",
                       "format": "int8", "label": "persistent kernel int8/both",
                       "timed_as": "graph",
                       "timing": {"median_ms": 0.0727, "q1_ms": 0.0727, "q3_ms": 0.0727,
                                  "reps": 5}}]}
    row = frontier.summarise([rec], [run])["shapes"][0]
    assert row["floors"]["int8"]["bound"] == "cluster exchange"
    assert row["best_vs_floor"] == pytest.approx(
        0.0727 / floor.cluster_floor(SMALL, 4, "int8", RATES, measured)["ms"])
    assert "(cluster exchange)" in frontier.markdown(frontier.summarise([rec], [run]))
    before = {k: v for k, v in run.items() if k != "cluster_floor"}  # a run before it
    assert frontier.summarise([rec], [before])["shapes"][0]["floors"]["int8"][
        "bound"] == "state read"


def test_the_microbenchmark_refuses_a_cluster_sm_90_cannot_run_before_the_gpu():
    for bad in (0, 17, True, 2.0):
        with pytest.raises(ValueError, match="cluster is 1-16"):
            exchange.source(bad)
    with pytest.raises(ValueError, match="form is one of stores, bulk"):
        exchange.cluster_exchange([0], form="multicast")
    with pytest.raises(ValueError, match="rounds"):
        exchange.cluster_exchange([0], rounds=0)
    with pytest.raises(ValueError, match="sizes"):
        exchange.cluster_exchange([-16])


def test_the_bulk_form_takes_two_stages_of_a_share_beside_the_slots():
    assert exchange.shared_bytes(4096, 16, "stores") == 8192
    assert exchange.shared_bytes(4096, 16, "bulk") == 8192 + 512
    assert "#define BULK 1" in exchange.source(16, "bulk")
    assert "#define BULK 0" in exchange.source(16)


@pytest.mark.parametrize("form", exchange.FORMS)
@pytest.mark.parametrize("cluster", [2, 16])
def test_the_microbenchmark_compiles_for_sm_90_without_spills(cluster, form):
    _nvrtc_or_skip()
    from cudnn_rnn.lowbit.cubin import compile_source
    log: list = []
    compile_source(exchange.source(cluster, form), "exchange.cu", "sm_90", log)
    text = "\n".join(log)
    assert re.search(r"Compiling entry function 'cluster_exchange'", text)
    assert all(int(n) == 0 for n in re.findall(r"(\d+) bytes spill", text))
