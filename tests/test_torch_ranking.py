"""Which row an accelerated module runs, on the records of a real precision-table run (the
shipped LSTM on an NVIDIA H200, results/nvidia-h200/9.19.0/precision.json): the fastest
eligible row within the tolerance, the most accurate calibration of each 8-bit
configuration, cuDNN's other rows as the fallback, and a refusal naming the nearest miss.
No PyTorch, no GPU."""
import pytest

from cudnn_rnn.charlm.table import method_score
from cudnn_rnn.lowbit import calibration
from cudnn_rnn.matrix.record import max_error
from cudnn_rnn.torch import ranking, report
from cudnn_rnn.torch.errors import NotAccelerated
from cudnn_rnn.tune import cost_ms

from .torch_plans import RECORDS, real_plan

TOLERANCES = (1e-3, 1e-2, 2e-2, 6e-2)


def _group(rec):
    return rec["engine"], rec.get("format"), rec.get("parts")


def _largest(rec):
    """A row's largest error against the module, read off its record here (not through the
    code under test's own rule)."""
    return max(v for v in rec["errors"].values() if v is not None)


@pytest.mark.parametrize("name", sorted(ranking.PRECISIONS))
@pytest.mark.parametrize("limit", TOLERANCES)
def test_the_choice_is_the_fastest_eligible_row_within_the_tolerance(name, limit):
    prec = ranking.PRECISIONS[name]
    mine, fallbacks = ranking.ranked(RECORDS, prec, limit)
    losers = ranking.less_accurate_calibrations(RECORDS)
    eligible = [r for r in RECORDS if r["outcome"] == "OK" and r["family"] in prec.eligible
                and _largest(r) <= limit and not r.get("same_run_as") and r["id"] not in losers]
    assert [r["id"] for r in mine] == [r["id"] for r in sorted(
        eligible, key=lambda r: (cost_ms(r, False), r["id"]))]
    for r in mine + fallbacks:
        assert _largest(r) <= limit and r["outcome"] == "OK"
    assert all(r["engine"] == "cuDNN" and r["family"] not in prec.eligible for r in fallbacks)
    times = [cost_ms(r, False) for r in fallbacks]
    assert times == sorted(times)


def test_the_tolerance_decides_between_precisions():
    """At 1e-2 BF16 (1.8e-2 from the module) and the 8-bit rows on both GEMMs are out, so
    'auto' runs FP16; at 6e-2 the fastest of everything, an 8-bit row, wins."""
    tight = ranking.ranked(RECORDS, ranking.PRECISIONS["auto"], 1e-2)[0]
    loose = ranking.ranked(RECORDS, ranking.PRECISIONS["auto"], 6e-2)[0]
    assert all(max_error(r) <= 1e-2 for r in tight)
    assert cost_ms(loose[0], False) <= cost_ms(tight[0], False)
    assert {r["family"] for r in loose} > {r["family"] for r in tight}


def test_of_one_8bit_configuration_only_its_most_accurate_calibration_is_ranked():
    losers = ranking.less_accurate_calibrations(RECORDS)
    assert losers
    kept = [r for r in RECORDS if r["outcome"] == "OK" and r.get("format")
            and not r.get("same_run_as") and r["id"] not in losers]
    assert len({_group(r) for r in kept}) == len(kept)  # one per configuration
    for loser in (r for r in RECORDS if r["id"] in losers):
        winner = next(r for r in kept if _group(r) == _group(loser))
        assert method_score(winner) <= method_score(loser)


@pytest.mark.parametrize("name", ["fp8", "int8", "bf16"])
def test_no_row_within_the_tolerance_is_refused_naming_the_nearest_miss(name):
    prec = ranking.PRECISIONS[name]
    mine = [r for r in RECORDS if r["family"] in prec.eligible and r["outcome"] == "OK"]
    limit = min(max_error(r) for r in mine) / 2
    assert ranking.ranked(RECORDS, prec, limit)[0] == []
    text = ranking.refusal(RECORDS, name, prec, limit, (256, 128))
    nearest = min(mine, key=max_error)
    assert "\n" not in text and nearest["label"] in text
    assert f"{max_error(nearest):.3g}" in text and f"{limit:g}" in text


@pytest.mark.parametrize("bad", ["fp4", "FP16", None, 3])
def test_an_unknown_precision_is_refused_in_one_line(bad):
    with pytest.raises(NotAccelerated, match=r"^precision .* is not one of auto, fp32"):
        ranking.precision(bad)


@pytest.mark.parametrize("bad", [0, -1e-2, float("nan"), float("inf"), "1e-2", True, None])
def test_a_tolerance_that_is_not_a_positive_number_is_refused(bad):
    with pytest.raises(NotAccelerated, match="tolerance must be a positive, finite number"):
        ranking.tolerance(bad)


def test_the_calibration_methods_tried_are_named_ones_in_the_tables_order():
    assert ranking.methods(None) == calibration.METHODS
    assert ranking.methods("p99.9") == ("p99.9",)
    assert ranking.methods(["mse", "max", "mse"]) == ("max", "mse")
    for bad in ("kl", ["max", "kl"], [], 3):
        with pytest.raises(NotAccelerated, match=r"^calibration method .* is not one of max"):
            ranking.methods(bad)


def test_every_record_gets_one_part_in_the_choice_and_the_table_shows_them_in_order():
    prec = ranking.PRECISIONS["fp8"]
    status = ranking.statuses(RECORDS, prec, 6e-2)
    assert set(status) == {r["id"] for r in RECORDS}
    assert list(status.values()).count("chosen") == 1
    rows = report.rows(RECORDS, status)
    assert rows[0]["status"] == "chosen" and rows[0]["family"] == "e4m3"
    order = [report.ORDER.index(r["status"]) for r in rows]
    assert order == sorted(order)
    failed = [r for r in rows if r["status"] == "failed"]
    assert failed and all(r["reason"].startswith("NOT_SUPPORTED") for r in failed)
    # at 1e-2, a verified row off by more (BF16, the 8-bit rows on the input or both GEMMs)
    # is "outside" (or a less accurate calibration), and only such a row
    tight = ranking.statuses(RECORDS, prec, 1e-2)
    outside = {r["id"] for r in RECORDS if r["outcome"] == "OK" and _largest(r) > 1e-2
               and not r.get("same_run_as")}
    assert {i for i, s in tight.items() if s == "outside"} <= outside
    assert all(tight[i] in ("outside", "calibration") for i in outside)
    assert list(tight.values()).count("outside") >= 10


def test_the_choice_says_what_runs_its_error_and_its_time_against_the_modules():
    plan = real_plan()
    text = str(report.Choice.of(plan))
    c = plan.choice
    assert c.family == "e4m3" and c.thresholds is not None and c.fmt == "e4m3"
    assert c.label in text and f"{c.max_error:.3g}" in text and "tolerance 0.06" in text
    assert f"x{4.5 / c.ms:.2f}" in text and f"x{9.0 / c.plain_ms:.2f}" in text
    table = report.table(plan)
    assert c.label in table.splitlines()[3] and "capture failed: X" in table
    assert "the module itself: eager 9.0000 ms, graph 4.5000 ms" in table


def test_the_choice_compares_like_with_like_and_says_what_was_not_timed():
    """A choice timed by plain calls (cuDNN may refuse a capture) is not set against the
    module in a CUDA graph, as the table's columns are not; a plan without times (a plan
    file may hold nulls) prints without them."""
    import dataclasses
    plan = real_plan()
    graph = report.Choice.of(plan)
    plain = dataclasses.replace(graph, timed_as="plain", ms=graph.plain_ms)  # its plain calls
    assert "the module in a CUDA graph" in str(graph)
    assert "the module in a CUDA graph" not in str(plain)
    assert f"x{9.0 / graph.plain_ms:.2f} over plain calls" in str(plain)
    assert str(plain).count(f"{graph.plain_ms:.4f} ms") == 1  # its one time, said once
    only_plain = dataclasses.replace(graph, timed_as=None, ms=None)
    assert f"{graph.plain_ms:.4f} ms (plain calls)" in str(only_plain)
    untimed = dataclasses.replace(graph, ms=None, plain_ms=None)
    assert "not timed" in str(untimed) and "(x" not in str(untimed)


def test_a_failure_of_the_accelerated_call_is_raised_and_the_users_is_shown(monkeypatch):
    """timing.times: the user's module failing is a finding (shown as skipped); the
    accelerated module failing by anything but a capture's refusal is this package's bug.
    (The timing itself, CUDA events on PyTorch's stream, is the GPU tests'; here each step
    is called once.)"""
    from cudnn_rnn.torch import timing
    monkeypatch.setattr(timing, "_timed", lambda step, reps, budget_s: step())

    def broken():
        raise TypeError("follow() missing 1 required positional argument")
    shown = timing.times(broken, 3, 0.01)
    assert shown["eager"]["skipped"].startswith("TypeError: follow()") and \
        shown["graph"] == {"skipped": "the eager call failed"}
    with pytest.raises(TypeError, match="follow"):
        timing.times(broken, 3, 0.01, ours=True)


def test_the_accelerated_modules_replay_is_timed_only_where_it_writes_the_plain_calls_bits(
        monkeypatch):
    """timing.times(ours=True): a replay whose outputs differ from the plain call's by one
    bit is not timed, and says so; an equal one is; the user's module is not judged so."""
    torch = pytest.importorskip("torch", reason="tensors of PyTorch's")
    from cudnn_rnn.torch import timing
    monkeypatch.setattr(timing, "_timed", lambda step, reps, budget_s: {"ms": 1.0})
    y, h = torch.ones(2, 3), torch.zeros(1, 3)
    step = lambda: (y.clone(), (h.clone(), h.clone()))  # noqa: E731
    off = y.clone()
    off.view(torch.int32)[0, 0] += 1  # one bit
    for replayed, want in [((y.clone(), (h, h)), {"ms": 1.0}),
                           ((off, (h, h)), {"skipped": "its replay's outputs differ from the "
                                                       "plain call's: not timed"})]:
        monkeypatch.setattr(timing, "graph_of", lambda s, r=replayed: (lambda: r))
        assert timing.times(step, 3, 0.01, ours=True) == {"eager": {"ms": 1.0}, "graph": want}
        assert timing.times(step, 3, 0.01)["graph"] == {"ms": 1.0}
    # plain calls that do not repeat themselves: the replay is not blamed for it
    calls = iter([y, off])
    monkeypatch.setattr(timing, "graph_of", lambda s: (lambda: (y, (h, h))))
    got = timing.times(lambda: (next(calls), (h, h)), 3, 0.01, ours=True)
    assert got["graph"] == {"skipped": "two plain calls' outputs differ: the replay cannot be "
                                       "checked, not timed"}
