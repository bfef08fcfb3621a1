"""Timing with events (cudnn_rnn.engine.timing.time_call), on a scripted clock: each call
takes a known time, so the median, quartiles, extremes and the budgeted repeat count are
checked against numpy's, not against themselves."""
from types import SimpleNamespace

import numpy as np
import pytest

from cudnn_rnn.engine.timing import time_call


class Clock:
    """A device whose calls take the scripted ``durations`` (ms), one after another."""

    def __init__(self, durations):
        self.durations, self.now, self.calls = list(durations), 0.0, 0

    def call(self):
        self.now += self.durations[self.calls]
        self.calls += 1

    def cupy(self):
        clock = self

        class Event:
            def record(self, stream=None):
                self.at = clock.now
        return SimpleNamespace(cuda=SimpleNamespace(
            Event=Event, get_elapsed_time=lambda a, b: b.at - a.at))


class Stream:
    def synchronize(self):
        pass


def test_the_median_quartiles_and_extremes_are_of_the_timed_repeats_alone():
    warm = [50.0, 40.0]  # warm-up calls: slow, and not among the repeats
    timed = [3.0, 1.0, 7.0, 2.0, 5.0, 4.0, 6.0]
    clock = Clock(warm + timed)
    t = time_call(clock.cupy(), Stream(), clock.call, reps=len(timed), warmup=len(warm))
    q1, med, q3 = np.percentile(timed, [25, 50, 75])
    assert (t.median_ms, t.q1_ms, t.q3_ms, t.min_ms, t.max_ms, t.reps) == (
        med, q1, q3, 1.0, 7.0, 7)
    assert clock.calls == len(warm) + len(timed)


@pytest.mark.parametrize("budget_s,min_reps,want", [
    (0.05, 5, 5),     # 10 ms a call in warm-up: 5 fit in 50 ms
    (0.05, 8, 8),     # never fewer than min_reps
    (10.0, 5, 20),    # nor more than reps
    (0.001, 50, 20),  # min_reps above reps: reps
])
def test_a_budget_sets_the_repeats_from_the_warm_ups_time(budget_s, min_reps, want):
    clock = Clock([10.0] * 100)
    t = time_call(clock.cupy(), Stream(), clock.call, reps=20, warmup=2, budget_s=budget_s,
                  min_reps=min_reps)
    assert t.reps == want and clock.calls == 2 + want


def test_no_repeat_is_refused():
    clock = Clock([1.0] * 5)
    with pytest.raises(ValueError, match="reps must be at least 1"):
        time_call(clock.cupy(), Stream(), clock.call, reps=0)
