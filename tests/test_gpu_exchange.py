"""The cluster floor's microbenchmark on a GPU (marker ``gpu``), in both forms (stores and
the cluster barrier; bulk copies on mbarriers): the exchange hands every CTA's share on to
every mate, its check catches a share left out or wrong, a larger state costs more than the
barrier alone, and a state whose slots do not fit is said, not measured."""
import pytest

from cudnn_rnn.lowbit import exchange
from cudnn_rnn.lowbit.engine import capability

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def clusters_capable(cuda):
    if capability(cuda) < (9, 0):
        pytest.skip("thread-block clusters need compute capability 9.0")


@pytest.mark.timing  # compares two times: alone, after the rest
def test_every_share_reaches_every_mate_and_more_bytes_cost_more(clusters_capable):
    out = exchange.cluster_exchange([0, 8192, 65536], rounds=101, repeats=3)
    assert out["met"], out["not_met"]
    t = out["per_round_us"]
    assert set(t) == {"0", "8192", "65536"} and all(v > 0 for v in t.values())
    assert t["65536"] > t["0"]  # 4 KB into each of 16 mates against the barrier alone
    assert out["cluster"] == 16 and out["sms"] >= 16
    assert out["on_chip_bytes_per_sm"] > 0 and out["not_measured"] == {}
    lo, hi = out["per_round_spread_us"]["8192"]
    assert lo <= hi


@pytest.mark.parametrize("cluster", [2, 16])
def test_a_share_left_out_is_caught(clusters_capable, cluster):
    out = exchange.cluster_exchange([4096], cluster=cluster, rounds=2, repeats=1, drop=1)
    assert not out["met"]
    # the dropped CTA's pieces, missing in every CTA's copy, in both launches
    pieces = exchange.padded(4096, cluster) // cluster // 16
    assert f"{pieces * cluster} 16-byte pieces" in out["not_met"][0]
    assert len(out["not_met"]) == 2


def test_what_an_earlier_launch_left_in_shared_memory_does_not_pass(clusters_capable):
    """The same launch twice, the second with a CTA's stores left out: its pieces, still in
    shared memory from the first as that launch stored them but for the tag, are caught."""
    assert exchange.cluster_exchange([4096], rounds=2, repeats=1)["met"]
    again = exchange.cluster_exchange([4096], rounds=2, repeats=1, drop=1)
    assert len(again["not_met"]) == 2


def test_a_state_too_large_for_shared_memory_is_said_not_measured(clusters_capable):
    out = exchange.cluster_exchange([1 << 20, 256], rounds=1, repeats=1)
    assert list(out["per_round_us"]) == ["256"] and out["met"]
    assert "two slots of 1048576 bytes" in out["not_measured"][str(1 << 20)]


@pytest.mark.parametrize("cluster", [2, 16])
def test_the_bulk_form_hands_every_share_on_and_a_wrong_one_is_caught(clusters_capable,
                                                                       cluster):
    out = exchange.cluster_exchange([0, 8192, 65536], cluster=cluster, rounds=101, repeats=2,
                                    form="bulk")
    assert out["met"], out["not_met"]
    assert set(out["per_round_us"]) == {"8192", "65536"} and out["form"] == "bulk"
    assert "0 bytes is the stores form's" in out["not_measured"]["0"]
    dropped = exchange.cluster_exchange([4096], cluster=cluster, rounds=3, repeats=1,
                                        drop=1, form="bulk")
    pieces = exchange.padded(4096, cluster) // cluster // 16
    assert not dropped["met"] and len(dropped["not_met"]) == 2
    assert dropped["not_met"][0].endswith(f"{pieces * cluster} 16-byte pieces not as handed "
                                          "on in the last round")  # no wait gave up
