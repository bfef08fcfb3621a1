"""Variants: every other axis one value at a time around each cell of a block, run only where
that cell passed cuDNN's descriptor stage (spec data, and the real library; no GPU needed)."""
import copy
import json

import pytest

from cudnn_rnn.bindings.enums import DataType, DirectionMode, RNNAlgo, RNNMode
from cudnn_rnn.matrix import spec as specs
from cudnn_rnn.matrix.cells import SpecError

from .test_cli import assert_one_line_exit_2, run

VARIED = {
    "name": "v",
    "block": [{"name": "b", "data_type": ["FLOAT", "INT8"], "math_prec": ["FLOAT"],
               "math_type": ["FMA"], "algo": ["STANDARD"], "cell": ["LSTM", "GRU"],
               "shapes": [{"seq_length": 4, "layers": 2, "hidden": 16, "batch": 4}],
               "vary": {"direction": ["BIDIRECTIONAL", "UNIDIRECTIONAL"], "layers": [1, 2, 3],
                        "proj_size": [8], "lengths": ["descending:2"]},
               "vary_only": {"proj_size": {"cell": ["LSTM"]}}}],
}


def _differences(a, b) -> set:
    ra, rb = a.config.as_record(), b.config.as_record()
    diff = {k for k in ra if ra[k] != rb[k] and k != "shape"}
    diff |= {f"shape.{k}" for k in ra["shape"] if ra["shape"][k] != rb["shape"][k]}
    return diff | ({"lengths"} if a.config.lengths != b.config.lengths else set())


def test_each_variant_changes_one_axis_of_its_base_and_follows_every_base():
    s = specs.from_dict(VARIED)
    bases = [c for c in s.cells if c.base is None]
    variants = [c for c in s.cells if c.base is not None]
    assert len(bases) == 4
    by_id = {c.id: c for c in bases}
    # per base: BIDIRECTIONAL, layers 1 and 3, lengths (UNIDIRECTIONAL and layers 2 are the
    # base's own values), projection for LSTM only
    assert len(variants) == 4 * 4 + 2
    for v in variants:
        assert len(_differences(by_id[v.base], v)) == 1, v.id
    assert max(s.cells.index(b) for b in bases) < min(s.cells.index(v) for v in variants)
    proj = [v for v in variants if v.config.proj_size != v.config.hidden_size]
    assert proj and {v.config.mode for v in proj} == {RNNMode.LSTM}


@pytest.mark.parametrize("change,needle", [
    ({"vary": {"cell": ["GRU"]}}, "'cell' cannot be varied"),
    ({"vary": {"layers": [0]}}, "layers must be positive integers"),
    ({"vary": {"direction": "BIDIRECTIONAL"}}, "direction must be a non-empty list"),
    ({"vary": {"direction": ["SIDEWAYS"]}}, "unknown direction value 'SIDEWAYS'"),
    ({"vary_only": {"layout": {"cell": ["LSTM"]}}}, "'layout' is not varied"),
    ({"vary_only": {"proj_size": {"cell": "LSTM"}}}, "proj_size.cell must be a non-empty list"),
    ({"vary": {"lengths": ["list:1:1"], "proj_size": [8]}}, "2 lengths for a batch of 4"),
])
def test_a_bad_vary_table_is_one_error_naming_it(change, needle):
    data = copy.deepcopy(VARIED)
    data["block"][0].update(change)
    with pytest.raises(SpecError, match=needle):
        specs.from_dict(data)


def test_a_bad_vary_table_in_a_spec_file_is_one_line_and_exit_2(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('[[block]]\ndata_type = ["FLOAT"]\nmath_prec = ["FLOAT"]\n'
                    'math_type = ["FMA"]\nalgo = ["STANDARD"]\ncell = ["LSTM"]\n'
                    'shapes = [{seq_length = 4, layers = 1, hidden = 8, batch = 2}]\n'
                    '[block.vary]\nhidden = [16]\n')
    assert_one_line_exit_2(run("cudnn_rnn.probe", "--spec", str(path), "--list"),
                           "'hidden' cannot be varied")


def test_variants_run_only_where_the_real_library_passed_their_base(tmp_path):
    """INT8 is refused by cudnnSetRNNDescriptor_v8: its variants are not run; FLOAT's are."""
    path = tmp_path / "v.toml"
    path.write_text('name = "v"\n[[block]]\nname = "b"\ndata_type = ["FLOAT", "INT8"]\n'
                    'math_prec = ["FLOAT"]\nmath_type = ["FMA"]\nalgo = ["STANDARD"]\n'
                    'cell = ["LSTM"]\n'
                    'shapes = [{seq_length = 4, layers = 2, hidden = 16, batch = 4}]\n'
                    '[block.vary]\ndirection = ["BIDIRECTIONAL"]\nlayers = [1]\n')
    out = tmp_path / "out"
    proc = run("cudnn_rnn.probe", "--spec", str(path), "--out", str(out), "--no-device")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    recs = {json.loads(x)["id"]: json.loads(x) for x in (out / "v.jsonl").read_text().splitlines()}
    s = specs.from_dict({"name": "v", "block": [{
        "name": "b", "data_type": ["FLOAT", "INT8"], "math_prec": ["FLOAT"],
        "math_type": ["FMA"], "algo": ["STANDARD"], "cell": ["LSTM"],
        "shapes": [{"seq_length": 4, "layers": 2, "hidden": 16, "batch": 4}],
        "vary": {"direction": ["BIDIRECTIONAL"], "layers": [1]}}]})
    refused = {c.id for c in s.cells if c.base is None and c.config.data_type == DataType.INT8}
    assert all(recs[i]["failed_call"] == "cudnnSetRNNDescriptor_v8" for i in refused)
    for c in s.cells:
        if c.id in refused:
            continue
        if c.base in refused:
            assert c.id not in recs  # not run: its base was refused at the descriptor stage
        else:
            assert c.id in recs and recs[c.id]["outcome"] == "SKIPPED"  # device stages skipped
    meta = json.loads((out / "v.run.json").read_text())
    assert meta["complete"] and meta["not_run_base_refused"] == 2
    assert "2 variants not run" in proc.stdout
    # the same command again finds the run complete: nothing to run, nothing lost
    again = run("cudnn_rnn.probe", "--spec", str(path), "--out", str(out), "--no-device")
    assert again.returncode == 0 and "0 to run" in again.stdout


def test_the_default_matrix_varies_every_axis_and_holds_the_pairs_users_hit():
    s = specs.load("default")
    variants = [c.config for c in s.cells if c.base is not None]
    persistent = {RNNAlgo.PERSIST_STATIC, RNNAlgo.PERSIST_DYNAMIC, RNNAlgo.PERSIST_STATIC_SMALL_H}
    for algo in persistent:
        assert any(v.algo == algo and not v.equal_lengths for v in variants)
        assert any(v.algo == algo and v.direction == DirectionMode.BIDIRECTIONAL for v in variants)
    assert any(v.data_type in (DataType.HALF, DataType.BFLOAT16)
               and v.proj_size != v.hidden_size for v in variants)
    assert {v.num_layers for v in variants} >= {1, 3}
    assert len({v.layout for v in variants}) == 3 and len({v.bias_mode for v in variants}) == 4


@pytest.fixture(scope="module")
def varied_run(tmp_path_factory):
    """A descriptor-stage run of the real library: LSTM in FLOAT with STANDARD and
    PERSIST_STATIC, each varied in bias mode, projection and lengths."""
    d = tmp_path_factory.mktemp("varied")
    (d / "a.toml").write_text(
        'name = "a"\n[[block]]\nname = "b"\ndata_type = ["FLOAT"]\nmath_prec = ["FLOAT"]\n'
        'math_type = ["FMA"]\nalgo = ["STANDARD", "PERSIST_STATIC"]\ncell = ["LSTM", "GRU"]\n'
        'shapes = [{seq_length = 6, layers = 2, hidden = 32, batch = 4}]\n'
        '[block.vary]\nbias_mode = ["NO_BIAS"]\nproj_size = [16]\n'
        'lengths = ["descending:2", "random:2:1"]\n'
        '[block.vary_only]\nproj_size = {cell = ["LSTM"]}\n')
    proc = run("cudnn_rnn.probe", "--spec", str(d / "a.toml"), "--out", str(d / "out"),
               "--no-device", "--report")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    from cudnn_rnn.matrix.record import read_records
    return read_records(d / "out" / "a.jsonl")[0], d / "out"


def test_the_axis_view_counts_what_each_change_broke_from_the_records(varied_run):
    from cudnn_rnn.reporting import axes
    recs, out = varied_run
    by_id = {r["id"]: r for r in recs}
    rows = axes.summarise(recs)
    variants = [r for r in recs if r.get("varies")]
    assert variants and sum(r["variants"] for r in rows) == len(variants)
    for row in rows:
        mine = [r for r in variants if r["varies"]["axis"] == row["axis"]
                and axes.value_of(r, row["axis"]) == row["value"]]
        broke = [r for r in mine if by_id[r["varies"]["base"]]["outcome"] in axes.WORKS
                 and r["outcome"] not in axes.WORKS]
        assert row["broken_count"] == len(broke)
        for g in row["broken"]:  # each group is the library's own call, status and reason
            assert any(r["failed_call"] == g["call"] and (r["reason"] or "")[:120] == g["reason"]
                       for r in broke)
    # what cuDNN's descriptor stages say (9.x) about the four bases (STANDARD and
    # PERSIST_STATIC, LSTM and GRU, all packed): the packed layout refuses the unsorted
    # lengths of all four; the persistent algorithm refuses NO_BIAS and the projection
    row = {r["value"]: r for r in rows}
    assert row["lengths random:2:1"]["broken_count"] == 4
    assert row["lengths random:2:1"]["broken"][0]["call"] == "cudnnSetRNNDataDescriptor"
    assert row["lengths descending:2"]["broken_count"] == 0
    assert row["NO_BIAS"]["broken_count"] == 2
    assert row["NO_BIAS"]["broken"][0]["by_algo"] == {"PERSIST_STATIC": 2}
    assert row["projection 16"]["variants"] == 2  # LSTM only
    assert row["projection 16"]["broken"][0]["by_algo"] == {"PERSIST_STATIC": 1}
    md = (out / "matrix.md").read_text()
    assert "## Every other axis, one at a time" in md and "lengths random:2:1" in md
    assert "Every other axis" in (out / "matrix.html").read_text()


def test_the_documented_rules_read_the_derived_axes(varied_run):
    from cudnn_rnn.reporting import constraints as cons
    recs, _ = varied_run
    rules = cons.load()
    orders = {cons.lengths_order(r) for r in recs}
    assert orders == {"equal", "sorted", "unsorted"}
    assert {cons.axis_of(r, "projection") for r in recs} == {"yes", "no"}
    packed_unsorted = [r for r in recs if cons.lengths_order(r) == "unsorted"]
    for r in packed_unsorted:
        supported, forbidding = rules.documented(r, cons.version_number(r["cudnn_version"]))
        assert not supported and "packed-needs-sorted-lengths" in [f.id for f in forbidding]
    found = {c["id"] for c in cons.contradictions(recs, rules)}
    assert not found & {r["id"] for r in packed_unsorted}


def test_the_full_spec_is_the_whole_product_of_the_other_axes():
    from itertools import product
    s = specs.load("full")
    seen = {(c.config.direction, c.config.input_mode, c.config.bias_mode, c.config.layout,
             c.config.num_layers, c.config.lengths, c.config.mode, c.config.algo,
             c.config.data_type, c.config.math_prec, c.config.math_type)
            for c in s.cells if c.config.proj_size == c.config.hidden_size}
    combos = {(c.config.data_type, c.config.math_prec, c.config.math_type) for c in s.cells}
    others = product(*(sorted({getattr(c.config, f) for c in s.cells}, key=str) for f in (
        "direction", "input_mode", "bias_mode", "layout", "num_layers", "lengths", "mode",
        "algo")))
    assert {o + k for o in others for k in combos} == seen  # nothing of the product missing
    lstm_proj = {c.config.data_type for c in s.cells if c.config.proj_size < c.config.hidden_size}
    assert lstm_proj == {d for d, _, _ in combos}
    assert len(specs.with_baselines(s.cells)) == len(s.cells)  # every FP32 baseline is in it


def test_the_list_counts_cells_and_variants_as_a_run_does():
    proc = run("cudnn_rnn.probe", "--list")
    assert proc.returncode == 0, proc.stderr
    listed = proc.stdout.splitlines()[2:-1]  # past the header, up to the count
    variants = sum(" variant " in line for line in listed)
    last = proc.stdout.strip().splitlines()[-1]
    assert variants and f"{len(listed)} cells in spec 'default'" in last
    assert f": {len(listed) - variants} cells and {variants} variants" in last
