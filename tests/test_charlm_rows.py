"""The precision table's persistent row (charlm.rows.engine_row) without a GPU: its launch
shapes tried in the tuner's order, each shape's build and verification given by a stand-in
for ``rows._try`` (what a GPU gave: an outcome and a quick time), so the rules that leave
'g' untried where a bulk-staged shape verified and was timed, and a bulk shape untried where
its 'e' twin (or its 'e' and 'i' twin, or their 'q' twins) was (launch.not_tried), are
checked in this loop as in the candidates' (tests/test_lowbit_candidates.py)."""
import numpy as np

from cudnn_rnn.bindings.enums import RNNMode
from cudnn_rnn.charlm import rows
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.lowbit import persistent

G = [s.name for s in persistent.SETTINGS if s.gx_global]
E = "b2t256u16wbeiq"  # the first bulk shape of 4-chunk copies, 'e', 'i' and 'q': its twins
# without them untried
TWINS = ["b2t256u16wbiq", "b2t256u16wbi", "b2t256u16wbe", "b2t256u16wb"]
Q_TWINS = ["b2t256u16wbeis2", "b2t256u16wbei"]  # untried once their 'q' twins verified
S2 = "b2t256u16wbes2"  # copies of 2 chunks with 'e': untried once 'wbe' or 'wbei' verified
S1 = "b1t256u16wbes2"  # the same of one batch slice: untried once one of two verified
STAGED = [s.name for s in persistent.SETTINGS if s.bulk and not s.gx_global]


class Built:
    """A verified build of one launch shape: what the row runs again and times."""
    cp = np

    def __init__(self, name):
        self.name, self.closed = name, False

    def forward(self):
        pass

    def outputs(self):
        return {"y": np.ones(3)}

    def close(self):
        self.closed = True


def _row(monkeypatch, gave):
    """The row with ``gave(name)`` -> (outcome, quick ms) for each shape tried: (record,
    its shapes' entries by name, the builds made)."""
    built = []

    def attempt(cfg, stacked, io_dev, ref, plan, twin, bound, against, engine, settings,
                quick):
        outcome, ms = gave(settings.name)
        if outcome != "OK":
            return {"outcome": outcome, "reason": f"{settings.name}: refused"}, None, None, None
        built.append(Built(settings.name))
        return {"outcome": "OK"}, {"y": np.ones(3)}, ms, built[-1]
    monkeypatch.setattr(rows, "_try", attempt)
    monkeypatch.setattr(rows.persistent, "precompile", lambda *args: 0)
    monkeypatch.setattr(rows, "timed", lambda cp, cfg, e, *args: {"timed": e.name})
    monkeypatch.setattr(rows, "e_cp", lambda: np)  # precompile's (a stand-in here)
    cfg = RNNConfig(seq_length=4, num_layers=1, hidden_size=8, mini_batch=2, input_size=8,
                    mode=RNNMode.LSTM)
    rec, _ = rows.engine_row(cfg, [], [], {}, {}, None, None, None, None, 3, 1, None,
                             engine="persistent")
    return rec, {t["settings"]: t for t in rec["settings_tried"]}, built


def test_where_a_bulk_staged_shape_was_timed_g_is_not_tried(monkeypatch):
    times = {s.name: 1.0 + i for i, s in enumerate(persistent.SETTINGS)}
    rec, tried, built = _row(monkeypatch, lambda name: ("OK", times[name]))
    assert list(tried) == [s.name for s in persistent.SETTINGS]
    for name in G:  # the first bulk-staged shape named
        assert tried[name]["outcome"] == "NOT_TRIED" and tried[name]["ms"] is None
        assert f"{STAGED[0]} verified" in tried[name]["reason"]
    for name in TWINS:
        assert tried[name]["outcome"] == "NOT_TRIED"
        assert f"{E} verified" in tried[name]["reason"]
    for name in Q_TWINS:
        assert tried[name]["outcome"] == "NOT_TRIED" and "('q'" in tried[name]["reason"]
    assert tried[S2]["outcome"] == "NOT_TRIED"
    assert f"{E} verified, copies of 4" in tried[S2]["reason"]
    assert tried[S1]["outcome"] == "NOT_TRIED"
    assert f"{STAGED[0]} verified, bulk staging of two" in tried[S1]["reason"]
    assert {b.name for b in built} == set(tried) - set(G) - set(TWINS) - set(Q_TWINS) - {
        S2, S1}  # not built
    first = persistent.SETTINGS[0].name  # the fastest tried
    assert rec["outcome"] == "OK" and rec["settings"] == first and rec["timed"] == first
    assert all(b.closed for b in built)


def test_where_the_bulk_staged_shape_is_refused_g_is_tried_and_can_win(monkeypatch):
    def gave(name):
        if name in STAGED:
            return "NOT_SUPPORTED", None
        return "OK", 0.5 if name == G[0] else 2.0
    rec, tried, built = _row(monkeypatch, gave)
    assert {tried[name]["outcome"] for name in STAGED} == {"NOT_SUPPORTED"}
    # each 'g' shape with 'e' tried; its twin without 'e' not, once it verified
    assert [tried[name]["outcome"] for name in G] == ["OK", "NOT_TRIED"] * (len(G) // 2)
    assert rec["outcome"] == "OK" and rec["settings"] == G[0] and rec["timed"] == G[0]
    assert all(b.closed for b in built)


def test_copies_of_2_are_tried_only_where_the_copies_of_4_were_refused(monkeypatch):
    """'wbes2' (slower than 'wbe' and 'wbei' wherever both ran) is not built where 'wbe'
    verified with the 'i' shapes refused; where every copy-of-4 shape with the projection
    staged was refused (FP16 at LSTM 50/1/1024/256), it is built, timed and can win, and
    the 'g' shapes are then not tried."""
    four = [n for n in STAGED if not persistent.Settings.parse(n).slab]
    inside = [n for n in STAGED if persistent.Settings.parse(n).input_inside]
    rec, tried, built = _row(monkeypatch, lambda name: (
        ("NOT_SUPPORTED", None) if name in inside else ("OK", 2.0)))
    assert tried["b2t256u16wbe"]["outcome"] == "OK"
    assert tried[S2]["outcome"] == "NOT_TRIED"
    assert "b2t256u16wbe verified, copies of 4" in tried[S2]["reason"]
    assert S2 not in {b.name for b in built}
    rec, tried, built = _row(monkeypatch, lambda name: (
        ("NOT_SUPPORTED", None) if name in four + inside else ("OK", 0.5 if name == S2
                                                                 else 2.0)))
    assert tried[S2]["outcome"] == "OK" and tried[S2]["ms"] == 0.5
    assert rec["settings"] == S2 and rec["timed"] == S2
    assert {tried[name]["outcome"] for name in G} == {"NOT_TRIED"}
    assert all(f"{S2} verified" in tried[name]["reason"] for name in G)


def test_one_batch_slice_is_tried_only_where_every_staged_shape_of_two_was_refused(monkeypatch):
    """Where no bulk shape of two batch slices with the projection staged fits (LSTM
    50/1/2048/128 in 8 bits), one slice's 'wbes2' is built, timed and can win, and the 'g'
    shapes are then not tried."""
    two = [n for n in STAGED if persistent.Settings.parse(n).batch_slices > 1]
    rec, tried, built = _row(monkeypatch, lambda name: (
        ("NOT_SUPPORTED", None) if name in two else ("OK", 0.5 if name == S1 else 2.0)))
    assert tried[S1]["outcome"] == "OK" and tried[S1]["ms"] == 0.5
    assert rec["settings"] == S1 and rec["timed"] == S1
    assert all(tried[name]["outcome"] == "NOT_TRIED" and f"{S1} verified" in
               tried[name]["reason"] for name in G)
    assert all(b.closed for b in built)
