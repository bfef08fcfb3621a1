"""Probe specifications: loading, validation, filters, baselines."""
import pytest

from cudnn_rnn.bindings.enums import DataType, MathType, RNNAlgo, RNNMode
from cudnn_rnn.matrix import baseline, cells as matrix_cells, spec as specs
from cudnn_rnn.matrix.cells import SpecError

MINIMAL = {
    "name": "t",
    "block": [{"name": "b", "data_type": ["HALF"], "math_prec": ["FLOAT", "HALF"],
               "math_type": ["TENSOR_OP"], "algo": ["STANDARD"], "cell": ["LSTM", "GRU"],
               "shapes": [{"seq_length": 4, "layers": 1, "hidden": 16, "batch": 8}]}],
}


def test_block_is_a_cartesian_product_with_defaults():
    s = specs.from_dict(MINIMAL)
    assert len(s.cells) == 4
    c = s.cells[0].config
    assert (c.data_type, c.math_prec, c.math_type, c.mode) == (
        DataType.HALF, DataType.FLOAT, MathType.TENSOR_OP_MATH, RNNMode.LSTM)
    assert c.direction.name == "UNIDIRECTIONAL" and c.proj_size == c.hidden_size


def test_shipped_specs_load():
    default = specs.load("default")
    ids = {c.id for c in default.cells}
    assert len(ids) == len(default.cells) >= 3072 + 40
    names = {c.config.data_type.name for c in default.cells}
    assert names >= {"FLOAT", "DOUBLE", "HALF", "BFLOAT16", "INT8", "INT32", "FP8_E4M3", "FP8_E5M2"}
    seed = specs.load("seed_int8")
    assert any(c.config.data_type == DataType.INT8 and c.config.math_prec == DataType.INT8
               and (c.config.seq_length, c.config.num_layers, c.config.hidden_size,
                    c.config.mini_batch) == (20, 2, 512, 64) for c in seed.cells)


@pytest.mark.parametrize("mutate,needle", [
    (lambda d: d.update(colour=1), "unknown key 'colour'"),
    (lambda d: d["block"][0].update(dtype=["HALF"]), "unknown axis 'dtype'"),
    (lambda d: d["block"][0].update(data_type=["HALF16"]), "unknown data_type value 'HALF16'"),
    (lambda d: d["block"][0].update(algo=["PERSIST"]), "unknown algo value 'PERSIST'"),
    (lambda d: d["block"][0].update(shapes=[{"seq_length": 1, "layers": 1, "hidden": 8}]),
     "shape lacks batch"),
    (lambda d: d["block"][0].update(shapes=[{"seq_length": 1, "layers": 1, "hidden": 8,
                                             "batch": 2, "heads": 3}]), "unknown shape field"),
    (lambda d: d["block"][0].update(shapes=[{"seq_length": 0, "layers": 1, "hidden": 8,
                                             "batch": 2}]), "positive integer"),
    (lambda d: d["block"][0].update(proj_size=["half"]), "proj_size"),
    (lambda d: d["block"][0].update(cell=[]), "non-empty"),
    (lambda d: d.update(block=[]), "at least one"),
])
def test_malformed_specs_name_the_problem(mutate, needle):
    import copy
    data = copy.deepcopy(MINIMAL)
    mutate(data)
    with pytest.raises(SpecError, match=needle.replace("(", r"\(")):
        specs.from_dict(data)


def test_missing_and_invalid_files(tmp_path):
    with pytest.raises(SpecError, match="not found"):
        specs.load(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("name = [unclosed")
    with pytest.raises(SpecError, match="not valid TOML"):
        specs.load(bad)


def test_filters_and_baselines():
    cells = specs.load("default").cells
    f = matrix_cells.parse_filters({"data_type": "HALF,INT8", "algo": "STANDARD", "cell": "LSTM",
                             "hidden": "512"})
    chosen = matrix_cells.select(cells, f)
    assert chosen and all(c.config.data_type in (DataType.HALF, DataType.INT8) and
                          c.config.algo == RNNAlgo.STANDARD and c.config.hidden_size == 512
                          for c in chosen)
    planned = specs.with_baselines(chosen)
    ids = [c.id for c in planned]
    assert len(ids) == len(set(ids))
    for c in chosen:
        base = matrix_cells.cell_id(baseline.of(c.config))
        assert base in ids and ids.index(base) < ids.index(c.id)  # baseline runs first
    with pytest.raises(SpecError, match="unknown data_type"):
        matrix_cells.parse_filters({"data_type": "FLOAT,QUARTER"})
    with pytest.raises(SpecError, match="integers"):
        matrix_cells.parse_filters({"hidden": "big"})


def test_baseline_id_matches_the_baseline_config():
    for c in specs.load("default").cells[::97]:
        assert baseline.id_of(c.id) == matrix_cells.cell_id(baseline.of(c.config))


def test_a_spec_of_the_other_kind_names_the_command_that_runs_it(tmp_path):
    """probes/ holds probe specs and benchmark specs side by side: giving one to the other
    command says which it is and the command that runs it, in its one line."""
    from cudnn_rnn.matrix import bench
    with pytest.raises(SpecError, match=r"bench is a benchmark spec: python -m cudnn_rnn\.bench "
                                        r"--spec bench"):
        specs.load("bench")
    with pytest.raises(bench.BenchSpecError, match=r"default is a probe spec: python -m "
                                                   r"cudnn_rnn\.probe --spec default"):
        bench.load_spec("default")
    mine = tmp_path / "mybench.toml"  # outside probes/: the command names the file as given
    mine.write_bytes((specs.PROBES_DIR / "bench.toml").read_bytes())
    with pytest.raises(SpecError, match=rf"python -m cudnn_rnn\.bench --spec {mine}\)"):
        specs.load(str(mine))
    with pytest.raises(SpecError) as plain:  # an unknown key of neither kind: no such hint
        specs.from_dict(dict(MINIMAL, colour="red"))
    assert " spec: python -m" not in str(plain.value)


def test_a_spec_named_with_its_suffix_is_found_in_probes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no default.toml here: probes/default.toml is meant
    assert specs.load("default.toml").name == specs.load("default").name == "default"
    (tmp_path / "default.toml").write_text('name = "here"\n[[block]]\nname = "b"\n')
    with pytest.raises(SpecError, match="^default.toml block 'b'"):  # the file here is given
        specs.load("default.toml")
