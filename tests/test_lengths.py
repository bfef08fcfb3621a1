"""Sequences of different lengths in one batch: the lengths axis, the packed layout, and what
the real library's descriptor stages say about each layout (no GPU needed)."""
import copy
import json

import numpy as np
import pytest

from cudnn_rnn.bindings.enums import RNNDataLayout, RNNMode
from cudnn_rnn.engine import packing
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.engine.flow import RNNFlow
from cudnn_rnn.matrix import cells as matrix_cells, spec as specs
from cudnn_rnn.matrix.cells import SpecError

from .test_cli import assert_one_line_exit_2, run
from .test_spec import MINIMAL


@pytest.mark.parametrize("text,want", [
    ("equal", (6, 6, 6, 6)),
    ("descending:2", (6, 5, 3, 2)),
    ("list:1:6:3:2", (1, 6, 3, 2)),
])
def test_each_form_gives_one_length_per_sequence(text, want):
    assert RNNConfig(seq_length=6, mini_batch=4, lengths=text).seq_lengths == want


def test_random_lengths_are_reproducible_and_within_bounds():
    a = RNNConfig(seq_length=9, mini_batch=64, lengths="random:3:7").seq_lengths
    assert a == RNNConfig(seq_length=9, mini_batch=64, lengths="random:3:7").seq_lengths
    assert min(a) >= 3 and max(a) <= 9 and len(set(a)) > 1
    assert a != RNNConfig(seq_length=9, mini_batch=64, lengths="random:3:8").seq_lengths


@pytest.mark.parametrize("text,needle", [
    ("list:0:1:1:1", "a length of 0"), ("list:7:1:1:1", "a length of 7"),
    ("list:1:1", "2 lengths for a batch of 4"), ("descending:x", "must be integers"),
    ("sorted", "write one of"), ("random:2", "write one of"),
])
def test_bad_lengths_say_what_is_wrong(text, needle):
    with pytest.raises(ValueError, match=needle):
        RNNConfig(seq_length=6, mini_batch=4, lengths=text)


def test_a_spec_axis_of_lengths_makes_cells_and_equal_keeps_the_old_ids():
    data = copy.deepcopy(MINIMAL)
    data["block"][0]["lengths"] = ["equal", "descending:2"]
    cells = specs.from_dict(data).cells
    assert len(cells) == 8
    plain = [c for c in cells if c.config.equal_lengths]
    assert all("len=" not in c.id for c in plain)
    assert {c.id for c in plain} == {c.id for c in specs.from_dict(MINIMAL).cells}
    assert all(c.id.endswith("/len=descending:2") for c in cells if not c.config.equal_lengths)
    kept = matrix_cells.select(cells, matrix_cells.parse_filters({"lengths": "descending:2"}))
    assert len(kept) == 4


@pytest.mark.parametrize("value,needle", [("list:0:1:1:1:1:1:1:1", "a length of 0"),
                                          ("bogus", "lengths must be one of"), (3, "lengths")])
def test_bad_lengths_in_a_spec_are_one_line_exit_2(tmp_path, value, needle):
    data = copy.deepcopy(MINIMAL)
    data["block"][0]["lengths"] = [value]
    with pytest.raises(SpecError, match=needle):
        specs.from_dict(data)
    path = tmp_path / "s.toml"
    path.write_text("name = \"s\"\n[[block]]\nname = \"b\"\ndata_type = [\"HALF\"]\n"
                    "math_prec = [\"FLOAT\"]\nmath_type = [\"DEFAULT\"]\nalgo = [\"STANDARD\"]\n"
                    "cell = [\"LSTM\"]\nlengths = [" + json.dumps(value) + "]\n"
                    "shapes = [{seq_length = 4, layers = 1, hidden = 16, batch = 8}]\n")
    assert_one_line_exit_2(run("cudnn_rnn.probe", "--spec", str(path), "--list"), needle)


@pytest.mark.parametrize("value,needle", [
    ("list:0", "a length of 0"), ("list:0,3", "a length of 0"), ("descending:0", "a length of 0"),
    ("descending:x", "not of the form descending:MIN"), ("random:2", "random:MIN:SEED"),
    ("equal:3", "not of the form equal"), ("list:", "list:L1:L2"), ("3", "lengths must be one of")])
def test_a_lengths_filter_that_no_batch_can_have_is_one_line_exit_2(value, needle):
    """Checked before the spec is read: no shape makes these lengths (a seed of 0 is fine)."""
    assert_one_line_exit_2(run("cudnn_rnn.probe", "--lengths", value, "--list"), needle)
    matrix_cells.parse_filters({"lengths": "random:2:0"})  # a seed may be 0


def test_packing_when_no_sequence_runs_the_last_steps():
    """Every sequence shorter than seqLength: the last steps hold no row at all."""
    rng = np.random.default_rng(1)
    dense = rng.random((6, 3, 2))
    lengths = [4, 2, 2]
    rows = packing.pack(dense, lengths)
    assert rows.shape == (8, 2)
    back = packing.unpack(rows, lengths, 6)
    assert back.shape == dense.shape and not back[4:].any()
    np.testing.assert_array_equal(back[:2], dense[:2])
    np.testing.assert_array_equal(back[2:4, 0], dense[2:4, 0])


def test_packing_keeps_the_running_sequences_step_by_step():
    rng = np.random.default_rng(0)
    dense = rng.random((5, 3, 2))
    lengths = [5, 3, 1]
    rows = packing.pack(dense, lengths)
    assert rows.shape == (9, 2)
    np.testing.assert_array_equal(rows[:3], dense[0])  # step 0: all three run
    np.testing.assert_array_equal(rows[7:], dense[3:, 0])  # steps 3 and 4: only the first
    back = packing.unpack(rows, lengths, 5)
    running = (np.arange(5)[:, None] < np.array(lengths)[None, :])[..., None]
    np.testing.assert_array_equal(back, np.where(running, dense, 0.0))


@pytest.mark.parametrize("layout", list(RNNDataLayout), ids=lambda x: x.name)
def test_descriptor_stages_with_unequal_lengths_per_layout(lib, layout):
    """The library decides: every layout takes sorted lengths; only the packed one refuses
    unsorted ones, at cudnnSetRNNDataDescriptor, with its reason."""
    for lengths, sorted_ in (("descending:3", True), ("list:2:20:5:7", False)):
        cfg = RNNConfig(mini_batch=4, layout=layout, lengths=lengths, mode=RNNMode.LSTM)
        with RNNFlow(cfg, lib, device=False) as flow:
            result = flow.run()
        if sorted_ or layout != RNNDataLayout.SEQ_MAJOR_PACKED:
            assert result.failure is None, (lengths, result.failure)
            assert "state_descriptors" in result.reached
        else:
            f = result.failure
            assert (f.call, f.status) == ("cudnnSetRNNDataDescriptor", "BAD_PARAM")
            assert f.reason and "sorted" in f.reason.lower()


@pytest.mark.parametrize("layout", list(RNNDataLayout), ids=lambda x: x.name)
def test_a_batch_whose_longest_sequence_is_shorter_than_max_seq_length(lib, layout):
    """Found on the H200 (9.19) and the same here: the packed layout wants maxSeqLength to be
    the longest length in the batch (BAD_PARAM, cuDNN's reason names it); the unpacked ones
    take steps that no sequence reaches."""
    cfg = RNNConfig(seq_length=6, mini_batch=4, layout=layout, lengths="list:5:4:4:1",
                    mode=RNNMode.GRU)
    with RNNFlow(cfg, lib, device=False) as flow:
        result = flow.run()
    if layout != RNNDataLayout.SEQ_MAJOR_PACKED:
        assert result.failure is None and "state_descriptors" in result.reached
    else:
        f = result.failure
        assert (f.call, f.status, f.reason) == (
            "cudnnSetRNNDataDescriptor", "BAD_PARAM", "maxSeqLengthInArray != maxSeqLength")
    longest = cfg.replace(lengths="list:6:4:4:1")  # the same batch reaching maxSeqLength
    with RNNFlow(longest, lib, device=False) as flow:
        assert flow.run().failure is None


def test_the_check_uses_the_lengths_and_observes_padded_dx(lib):
    """verify.expected runs the reference with the config's lengths; dx past a sequence's end
    (which cuDNN does not define) is recorded, not judged, and y's padding stays checked."""
    from cudnn_rnn.check import reference as R, verify
    rng = np.random.default_rng(4)
    cfg = RNNConfig(seq_length=5, num_layers=1, hidden_size=4, mini_batch=3, input_size=4,
                    mode=RNNMode.GRU, lengths="list:5:2:3",
                    layout=RNNDataLayout.SEQ_MAJOR_UNPACKED)
    params = R.random_params(cfg, rng, 0.6)
    host = {"weights": R.arrays_from_params(cfg, params)}
    host.update({k: rng.uniform(-1, 1, size=s) for k, s in (
        ("x", cfg.x_shape()), ("hx", cfg.h_shape()), ("dy", cfg.y_shape()),
        ("dhy", cfg.h_shape()))})
    fwd, grads = verify.expected(cfg, host)
    want = R.forward(cfg, params, host["x"], host["hx"], lengths=[5, 2, 3])
    np.testing.assert_array_equal(fwd.y, want.y)
    assert not np.allclose(fwd.hy, R.forward(cfg, params, host["x"], host["hx"]).hy)
    dx = grads.dx.copy()
    dx[3:, 1] = np.nan  # what a poisoned, unwritten padding looks like
    outputs = {"y": fwd.y, "hy": fwd.hy, "dx": dx, "dhx": grads.dhx}
    check = verify.compare_with(cfg, (fwd, grads), outputs)
    assert check.passed and check.as_record()["padded_dx"]["nonfinite"] == 2 * 4
    # packed, dx has no padding in cuDNN's buffer: the zeros there are the unpacking's own,
    # so nothing is recorded as observed (sorted lengths, as the packed layout needs)
    packed = cfg.replace(layout=RNNDataLayout.SEQ_MAJOR_PACKED, lengths="list:5:3:2")
    fp, gp = verify.expected(packed, host)
    check = verify.compare_with(packed, (fp, gp), {"y": fp.y, "hy": fp.hy, "dx": gp.dx,
                                                   "dhx": gp.dhx})
    assert check.passed and "padded_dx" not in check.as_record()
    y = fwd.y.copy()
    y[4, 1] = 1.0  # y's padding must be the fill
    assert not verify.compare_with(cfg, (fwd, grads), dict(outputs, y=y)).passed


class _Host(np.ndarray):
    """A host array that answers .get() like a device one."""
    def get(self):
        return np.asarray(self)


class _Stream:
    def synchronize(self):
        pass


@pytest.mark.parametrize("layout", list(RNNDataLayout), ids=lambda x: x.name)
def test_every_layout_reads_back_what_it_uploaded(lib, layout):
    from cudnn_rnn.engine import dtypes, readback
    from cudnn_rnn.bindings.enums import DataType
    cfg = RNNConfig(seq_length=5, num_layers=1, hidden_size=4, mini_batch=3, input_size=4,
                    layout=layout, lengths="descending:2", data_type=DataType.FLOAT)
    x = np.random.default_rng(5).uniform(-1, 1, size=cfg.x_shape())
    flow = RNNFlow(cfg, lib, device=False)
    flow.stream = _Stream()
    bits = flow._to_device_layout("x", dtypes.encode(x, cfg.data_type))
    flow.buf["x"] = np.ascontiguousarray(bits).reshape(-1).view(np.uint8).view(_Host)
    back = readback.read(flow, "x")
    running = (np.arange(5)[:, None] < np.array(cfg.seq_lengths)[None, :])
    np.testing.assert_array_equal(back[running], dtypes.decode(dtypes.encode(x, cfg.data_type),
                                                              cfg.data_type)[running])
    assert flow.packed("x") == (layout == RNNDataLayout.SEQ_MAJOR_PACKED)
    assert bits.size == (sum(cfg.seq_lengths) * 4 if flow.packed("x") else x.size)


def test_equal_lengths_in_any_form_are_equal():
    assert RNNConfig(seq_length=4, mini_batch=2, lengths="list:4:4").equal_lengths
    assert RNNConfig(seq_length=4, mini_batch=2, lengths="descending:4").equal_lengths
    c = RNNConfig(seq_length=4, mini_batch=2, lengths="list:4:1")
    assert not c.equal_lengths and c.flop_count() * 8 == RNNConfig(seq_length=4,
                                                                   mini_batch=2).flop_count() * 5
