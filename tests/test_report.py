"""Reports rendered from recorded real runs (tests/fixtures: cut from real probe runs)."""
import json
import random
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from cudnn_rnn.reporting import matrix as report
from cudnn_rnn.reporting import (analysis, charts, constraints as cons, diff as diffing, html,
                                 load, markdown)

from . import committed
from .test_cli import assert_one_line_exit_2, run

FIX = Path(__file__).resolve().parent / "fixtures"
INFO = {"command": "python -m cudnn_rnn.report test", "commit": "test", "date": "test",
        "sources": ["fixture"]}


@pytest.fixture(scope="module")
def h919():
    return load.load(FIX / "h200-919")


def render_md(result):
    rules = cons.load()
    return markdown.render(result, report.analyse(result, rules), INFO, rules)


def test_markdown_answers_the_int8_question_with_provenance(h919):
    md = render_md(h919)
    assert "## Can this RNN run in INT8?" in md and "**Not in cuDNN.**" in md
    assert "`cudnnSetRNNDescriptor_v8` returns `CUDNN_STATUS_NOT_SUPPORTED` (3000)" in md
    assert "fastest verified alternative" in md.lower() and "x** true FP32" in md
    for field in ("NVIDIA H200", "compute capability", "580.159.04", "9.19.0", "libcudnn path",
                  "commit", "7981608", "command", "date"):
        assert field in md, field
    assert "### FLOAT" in md and "### INT8" in md and "NS@SetRNN" in md
    assert "## Why no tensor-op speed-up?" in md and "multiples of 8" in md


def test_rendering_is_stable_whatever_the_record_order(h919):
    first = render_md(h919)
    shuffled = list(h919.records)
    random.Random(3).shuffle(shuffled)
    again = render_md(load.ResultSet(shuffled, h919.meta, h919.paths))
    assert first == again


class _Cells(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.tags = [], set()

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        a = dict(attrs)
        if "data-id" in a:
            self.ids.append(a["data-id"])
        for key in ("src", "href"):
            assert key not in a or a[key].startswith("#"), (tag, a)


def test_html_parses_is_self_contained_and_contains_every_cell(h919):
    page = html.render(h919, report.analyse(h919, cons.load()), INFO)
    parser = _Cells()
    parser.feed(page)
    parser.close()
    assert sorted(parser.ids) == sorted(r["id"] for r in h919.records)
    assert {"table", "style"} <= parser.tags
    assert ("svg" in parser.tags) == charts.available()  # the sweep's chart, inline
    # namespace names (xmlns, xmlns:xlink) identify, they are never fetched
    assert "<script" not in page and "http://" not in re.sub(r'xmlns(:\w+)?="[^"]*"', "", page)


def test_write_report_produces_the_three_files_and_the_chart(h919, tmp_path):
    written = report.write_report(h919, tmp_path, "python -m cudnn_rnn.report")
    assert [p.name for p in written] == ["matrix.md", "matrix.html", "summary.json"] + (
        ["matrix.png"] if charts.available() else [])
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["schema_version"] == report.SCHEMA_VERSION
    assert len(summary["cells"]) == len(h919.records)
    assert summary["provenance"]["gpu"] == "NVIDIA H200"
    assert summary["int8"]["ran"] == 0
    assert (tmp_path / "matrix.md").read_text().startswith("# cuDNN RNN support matrix")
    assert (tmp_path / "matrix.html").read_text().startswith("<!DOCTYPE html>")


def test_documented_constraints_load_and_a_contradiction_is_found(h919):
    rules = cons.load()
    assert rules.rules and all(r.sources for r in rules.rules)
    assert all(s in rules.sources for r in rules.rules for s in r.sources)
    found = cons.contradictions(h919.records, rules)
    # The v8 sample documents FLOAT data with DEFAULT or ALLOW_CONVERSION math only; the
    # fixture has FLOAT with FMA and TENSOR_OP that ran and verified.
    float_math = [c for c in found if "float-math-type" in c["rules"]]
    assert float_math and all(c["measured"] == "OK" for c in float_math)
    assert not [c for c in found if c["id"].startswith("INT8/")]  # INT8 refusals agree with the docs


def _cell(outcome, version="9.19.0", **config):
    rec = {"data_type": "FLOAT", "math_prec": "FLOAT", "math_type": "DEFAULT",
           "algo": "STANDARD", "cell": "LSTM", **config}
    return dict(rec, id="/".join(rec.values()) + f"/{outcome}@{version}", outcome=outcome,
                cudnn_version=version, failed_call=None if outcome == "OK" else
                "cudnnSetRNNDescriptor_v8", status=None, reason=None)


def test_contradictions_judge_what_ran_against_what_is_documented():
    """Hand-built cells, each on one side of a rule: a cell documented unsupported that ran
    is a contradiction whether it verified or ran wrong (WRONG_RESULT is about numbers, not
    support); one documented supported that cuDNN refused is one, BF16 only from cuDNN 9.13
    (before it the documentation names no BF16); a cell with no verdict (no GPU, a crash)
    is not judged."""
    rules = cons.load()
    unsupported = dict(data_type="DOUBLE", math_prec="DOUBLE", algo="PERSIST_STATIC")
    bf16 = dict(data_type="BFLOAT16")
    cells = [_cell("OK", **unsupported), _cell("WRONG_RESULT", **unsupported),
             _cell("NOT_SUPPORTED", **unsupported),             # agrees: refused
             _cell("NOT_SUPPORTED"),                             # documented supported
             _cell("NOT_SUPPORTED", "9.13.0", **bf16), _cell("NOT_SUPPORTED", "9.12.0", **bf16),
             _cell("SKIPPED"), _cell("CRASH", **unsupported)]
    found = {c["id"]: c["documented"] for c in cons.contradictions(cells, rules)}
    assert found == {cells[0]["id"]: "unsupported", cells[1]["id"]: "unsupported",
                     cells[3]["id"]: "supported", cells[4]["id"]: "supported"}
    bf16_rec = _cell("OK", **bf16)
    assert rules.documented(bf16_rec, 91300)[0] and not rules.documented(bf16_rec, 91299)[0]


def test_a_rules_versions_bound_it_inclusively():
    """min_version and max_version (cuDNN's number, 91300 for 9.13.0) include their own
    version: a rule of 9.13 to 9.15 applies at 9.13.0 and 9.15.0, not at 9.12.99 or 9.15.1
    (the shipped rules use max_version only, so this is the place min_version is held)."""
    rule = cons.Rule("r", "text", {"data_type": ["BFLOAT16"]}, None, True, "support", ("s",),
                     min_version=91300, max_version=91500)
    rec = {"data_type": "BFLOAT16"}
    assert [rule.applies(rec, v) for v in (91299, 91300, 91500, 91501)] == [
        False, True, True, False]
    assert cons.version_number("9.13.0") == 91300 and cons.version_number("nine") == 0


def test_constraint_rule_semantics():
    rules = cons.load()
    rec = {"data_type": "BFLOAT16", "math_prec": "FLOAT", "math_type": "DEFAULT", "algo": "STANDARD",
           "cell": "LSTM"}
    assert rules.documented(rec, 91900)[0]
    assert not rules.documented(rec, 91200)[0]  # before 9.13
    assert not rules.documented(dict(rec, math_prec="BFLOAT16"), 91900)[0]
    assert not rules.documented(dict(rec, data_type="DOUBLE", math_prec="DOUBLE",
                                     algo="PERSIST_STATIC"), 91900)[0]


def test_sweep_analysis_compares_multiples_of_8(h919):
    sweep = analysis.sweep(h919.records)
    assert sweep["rows"] and any(r["multiple_of_8"] for r in sweep["rows"])
    perf = analysis.performance_rule(sweep["rows"])
    assert perf and {p["verdict"] for p in perf} <= {"holds", "contradicted", "no gain"}


def _sweep_row(hidden, batch, speedup, cell="LSTM"):
    return {"cell": cell, "hidden": hidden, "batch": batch,
            "multiple_of_8": hidden % 8 == 0 and batch % 8 == 0,
            "configs": {"HALF/FLOAT/TENSOR_OP/STANDARD": {"speedup": speedup}}}


@pytest.mark.parametrize("a,b,verdict", [
    (1.5, 1.0, "holds"),          # the twin that is not a multiple of 8 gains clearly less
    (1.5, 1.45, "contradicted"),  # it gains about as much: tensor cores used anyway
    (1.5, 1.349, "holds"),        # just under 90 % of the multiple's gain
    (1.5, 1.351, "contradicted"),
    (1.05, 1.0, "no gain"),       # the multiple of 8 itself gains nothing to speak of
    (1.1, 2.0, "no gain"),        # ... up to 1.1x, whatever its twin does
])
def test_the_multiple_of_8_rule_reads_each_twin_by_its_speed_ups(a, b, verdict):
    """The documented rule judged on twins of known speed-ups: each shape against the one
    just below it that is not a multiple of 8, within 8 hidden units (a farther one, or one
    above, is no twin)."""
    rows = [_sweep_row(2048, 128, a), _sweep_row(2044, 127, b), _sweep_row(2030, 127, 9.0),
            _sweep_row(2052, 127, 9.0), _sweep_row(2044, 127, 9.0, cell="GRU")]
    (p,) = analysis.performance_rule(rows)
    assert (p["multiple"], p["not_multiple"], p["verdict"]) == ("2048x128", "2044x127", verdict)
    assert p["contradicted"] == (verdict == "contradicted")


def test_diff_of_two_real_runs():
    a, b = load.load(FIX / "h200-919"), load.load(FIX / "h200-914")
    d = diffing.compare(a, b)
    assert d["common"] == len(a.records) and not d["only_a"] and not d["only_b"]
    for change in d["speed_changes"]:
        assert abs(change["ratio"] - 1) > change["noise"] >= diffing.MIN_CHANGE
    text = diffing.render(d, INFO)
    assert "cuDNN 9.19.0" in text and "cuDNN 9.14.0" in text


def test_diff_of_a_gpu_run_against_a_descriptor_only_run():
    d = diffing.compare(load.load(FIX / "h200-919"), load.load(FIX / "cpu-928"))
    changed = {(c["a"], c["b"]) for c in d["status_changes"]}
    # a cell the GPU verified reads, on the machine without one, in the reports' words
    assert ("OK", "passed the descriptor stages") in changed
    assert d["only_a"] and d["only_b"]


def test_cli_writes_reports_and_diffs(tmp_path):
    proc = run("cudnn_rnn.report", str(FIX / "cpu-928"), "--out", str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr
    md = (tmp_path / "r" / "matrix.md").read_text()
    assert "no GPU" in md and "desc OK" in md and "passed the descriptor stages" in md
    proc = run("cudnn_rnn.report", "--diff", str(FIX / "h200-919"), str(FIX / "h200-914"),
               "--out", str(tmp_path / "d"))
    assert proc.returncode == 0, proc.stderr
    assert list((tmp_path / "d").glob("*.md")) and list((tmp_path / "d").glob("*.json"))


@pytest.mark.parametrize("content,needle", [
    (None, "does not exist"),
    ("not json\n", "line 1 is not JSON"),
    ('{"id": "x"}\n', "not a probe record"),
    ("", "holds no records"),
])
def test_missing_or_malformed_results_exit_2(tmp_path, content, needle):
    path = tmp_path / "r.jsonl"
    if content is not None:
        path.write_text(content)
    assert_one_line_exit_2(run("cudnn_rnn.report", str(path), "--out", str(tmp_path / "o")), needle)


def test_the_int8_answer_names_the_projects_8bit_paths_from_a_benchmark_run(h919, tmp_path):
    bench_dir = Path(__file__).resolve().parent.parent / "results/nvidia-h200/9.19.0/persistent"
    paths = report.eight_bit_paths(bench_dir)
    rows = paths["rows"]
    assert {r["cell"] for r in rows} == {"RNN_RELU", "RNN_TANH", "LSTM", "GRU"}
    assert {r["engine"] for r in rows} == {"cuBLASLt GEMMs", "persistent kernel"}
    assert paths["gpu"] == "NVIDIA H200" and paths["commit"] and paths["date"]
    rules = cons.load()
    md = markdown.render(h919, report.analyse(h919, rules, paths), INFO, rules)
    section = md[md.index("## Can this RNN run in INT8?"):md.index("### The seed's cascade")]
    assert "**Not in cuDNN; yes with this project's own 8-bit paths (below).**" in section
    assert "This project's own 8-bit paths" in section
    for r in rows:  # each engine's figures at the seed shape, as the benchmark has them
        assert f"| {r['cell']}" in section and f"`{r['config']}`" in section
        assert f"{r['ms']:.4f}" in section and markdown.figure(r["vs_cudnn16"]) in section
    assert "--precision int8" in section
    assert "own 8-bit paths" not in render_md(h919)  # not given a benchmark: not claimed
    assert_one_line_exit_2(run("cudnn_rnn.report", str(FIX / "h200-919"), "--out",
                               str(tmp_path / "o"), "--eight-bit", str(tmp_path)),
                           "no bench.jsonl there")
    assert not (tmp_path / "o").exists()  # refused before anything was written
    assert_one_line_exit_2(run("cudnn_rnn.report", "--diff", str(FIX / "h200-919"),
                               str(FIX / "h200-914"), "--eight-bit", str(bench_dir)),
                           "a --diff has none")


def test_report_needs_arguments():
    assert_one_line_exit_2(run("cudnn_rnn.report"), "give the probe results")


def test_a_run_archived_with_gzip_reads_as_the_run_itself(tmp_path, h919):
    """Committed runs keep their records as ``<spec>.jsonl.gz`` beside ``<spec>.run.json``."""
    import gzip
    import shutil
    (tmp_path / "default.jsonl.gz").write_bytes(
        gzip.compress((FIX / "h200-919" / "default.jsonl").read_bytes(), mtime=0))
    shutil.copy(FIX / "h200-919" / "default.run.json", tmp_path)
    archived = load.load(tmp_path)
    assert archived.records == h919.records and archived.meta == h919.meta
    assert archived.paths == [str(tmp_path / "default.jsonl.gz")]
    assert render_md(archived) == render_md(h919)


@pytest.mark.parametrize("cut", [10, -8])  # inside the stream; the trailer (CRC and size) lost
def test_a_torn_gzip_archive_exits_2_saying_what_to_do(tmp_path, cut):
    import gzip
    whole = gzip.compress((FIX / "h200-919" / "default.jsonl").read_bytes())
    (tmp_path / "default.jsonl.gz").write_bytes(whole[:cut])
    assert_one_line_exit_2(run("cudnn_rnn.report", str(tmp_path), "--out", str(tmp_path / "o")),
                           "is not a whole gzip file")


@pytest.mark.parametrize("run", ["nvidia-h200/9.19.0", "nvidia-h200/9.14.0", "no-gpu/9.28.0"])
def test_the_committed_matrix_reports_regenerate_as_committed(tmp_path, monkeypatch, run):
    """matrix.md, matrix.html and summary.json from the committed records, as committed, but
    for the rows naming the command, commit and date that rendered them and the chart's
    drawing (tests/committed.py); matrix.png is there exactly where matrix.md links it."""
    root = Path(__file__).resolve().parent.parent
    monkeypatch.chdir(root)  # the report names its sources as given: results/...
    d = Path("results") / run
    result = load.load(d)
    lowbit = d / "persistent"  # as make rerender renders it: with the 8-bit paths it ran
    eight_bit = report.eight_bit_paths(lowbit) if (lowbit / "bench.jsonl").is_file() else None
    command = f"python -m cudnn_rnn.report results/{run} --out results/{run}" + (
        f" --eight-bit {lowbit}" if eight_bit else "")
    report.write_report(result, tmp_path, command, eight_bit)
    md = (d / "matrix.md").read_text()
    assert committed.without_report_rows((tmp_path / "matrix.md").read_text()) == \
        committed.without_report_rows(committed.markdown_as_here(md))
    page, now = (d / "matrix.html").read_text(), (tmp_path / "matrix.html").read_text()
    assert committed.without_report_rows(committed.page_without_chart(now)) == \
        committed.without_report_rows(committed.page_without_chart(page))
    summary, fresh = (json.loads((f / "summary.json").read_text()) for f in (d, tmp_path))
    assert {k: v for k, v in summary.items() if k != "report"} == \
        {k: v for k, v in fresh.items() if k != "report"}
    assert ("](matrix.png)" in md) == (d / "matrix.png").is_file() == bool(
        summary["tensor_op_sweep"]["rows"])
    if charts.available() and (d / "matrix.png").is_file():
        assert committed.chart_words(now) == committed.chart_words(page)
        assert committed.png_size((d / "matrix.png").read_bytes()) == committed.png_size(
            (tmp_path / "matrix.png").read_bytes())


def _one_record(tmp_path, **shape) -> Path:
    rec = json.loads((FIX / "h200-919" / "default.jsonl").read_text().splitlines()[0])
    rec["shape"].update(shape)
    rec.pop("seq_lengths", None)  # a record from before the resolved lengths were kept
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(rec) + "\n")
    return path


def test_a_size_beyond_a_c_int_in_a_record_is_one_line(tmp_path):
    path = _one_record(tmp_path, batch=10 ** 30)
    assert_one_line_exit_2(run("cudnn_rnn.report", str(path), "--out", str(tmp_path / "o")),
                           "shape.batch: expected a positive integer that fits a C int")


def test_a_record_of_the_largest_c_int_batch_is_reported_without_drawing_its_lengths(tmp_path):
    """Its lengths' order is known from their form ('equal'), not from 2**31 - 1 lengths."""
    path = _one_record(tmp_path, batch=2 ** 31 - 1)
    proc = run("cudnn_rnn.report", str(path), "--out", str(tmp_path / "o"))
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(path.read_text())
    assert cons.lengths_order(dict(rec, lengths="equal")) == "equal"
    assert cons.lengths_order(dict(rec, lengths="descending:1")) == "unknown"


def test_a_report_file_that_is_a_folder_is_one_line_and_nothing_else_is_written(tmp_path):
    out = tmp_path / "o"
    (out / "matrix.md").mkdir(parents=True)
    proc = run("cudnn_rnn.report", str(FIX / "cpu-928"), "--out", str(out))
    assert_one_line_exit_2(proc, "cannot write the report into")
    assert [p.name for p in out.iterdir()] == ["matrix.md"]


def test_a_file_whose_only_line_is_torn_is_one_line(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"id": "x", "outc')
    assert_one_line_exit_2(run("cudnn_rnn.report", str(path), "--out", str(tmp_path / "o")),
                           "holds no whole record: line 1 is torn")


def test_runs_of_two_setups_are_not_merged_into_one_report(tmp_path):
    """One report is one GPU's and one cuDNN's: the no-GPU run beside the H200's is refused
    in one line (either order), and nothing is written; runs of one setup (the H200's
    default and seed specs) still merge."""
    root = Path(__file__).resolve().parent.parent / "results"
    gpu, cpu = str(root / "nvidia-h200" / "9.19.0"), str(root / "no-gpu" / "9.28.0")
    for pair in ((cpu, gpu), (gpu, cpu)):
        proc = run("cudnn_rnn.report", *pair, "--out", str(tmp_path / "mixed"))
        assert_one_line_exit_2(proc, "are runs of different setups (",
                               "NVIDIA H200, cuDNN 9.19.0", "no GPU, cuDNN 9.28.0",
                               "report each apart, or compare two with --diff")
    assert not (tmp_path / "mixed").exists()
    merged = load.load(gpu)
    assert {load.spec_name(f) for f in merged.paths} == {"default", "seed_int8"}


def _copy_run(src: Path, dst: Path, keep=None, **meta) -> Path:
    """A copy of a fixture run: ``keep`` of its records' lines, its .run.json updated."""
    dst.mkdir(parents=True)
    lines = (src / "default.jsonl").read_text().splitlines(keepends=True)
    (dst / "default.jsonl").write_text("".join(lines[:keep]))
    data = json.loads((src / "default.run.json").read_text())
    (dst / "default.run.json").write_text(json.dumps({**data, **meta}))
    return dst


def test_the_diffs_of_two_pairs_of_runs_never_share_a_file(tmp_path):
    fewer = _copy_run(FIX / "h200-919", tmp_path / "fewer", keep=50)  # same GPU and cuDNN
    out = tmp_path / "d"
    for a in (FIX / "h200-919", fewer):
        assert run("cudnn_rnn.report", "--diff", str(a), str(FIX / "h200-914"),
                   "--out", str(out)).returncode == 0
    stems = sorted(p.stem for p in out.glob("*.md"))
    assert len(stems) == 2 and all("__vs__nvidia-h200-9.14.0-default-" in s for s in stems)


def test_an_out_folder_holding_other_runs_report_is_refused_and_kept(tmp_path):
    out = tmp_path / "r"
    assert run("cudnn_rnn.report", str(FIX / "cpu-928"), "--out", str(out)).returncode == 0
    kept = (out / "matrix.md").read_bytes()
    proc = run("cudnn_rnn.report", str(FIX / "h200-919"), "--out", str(out))
    assert_one_line_exit_2(proc, f"--out {out} holds the report of ", "cpu-928",
                           "give another --out")
    assert (out / "matrix.md").read_bytes() == kept
    # the same run again (twice named, as once) refreshes its own report
    assert run("cudnn_rnn.report", str(FIX / "cpu-928"), str(FIX / "cpu-928"),
               "--out", str(out)).returncode == 0
    assert load.load(FIX / "cpu-928", FIX / "cpu-928").paths == load.load(FIX / "cpu-928").paths


def test_an_unfinished_run_is_reported_as_such(tmp_path):
    # as an interrupted probe leaves it: all its cells, and the variants whose cell was refused
    cut = _copy_run(FIX / "cpu-928", tmp_path / "cut", complete=False, cells=130,
                    not_run_base_refused=30)
    proc = run("cudnn_rnn.report", str(cut), "--out", str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr
    assert "an unfinished run" in proc.stderr and "82 cells of at most 100" in proc.stderr
    md = (tmp_path / "r" / "matrix.md").read_text()
    assert "**An unfinished run**" in md and "default.jsonl: 82 cells of at most 100" in md
    live = _copy_run(FIX / "cpu-928", tmp_path / "live", complete=False)  # being written
    live_meta = json.loads((live / "default.run.json").read_text())
    live_meta.pop("cells", None)
    (live / "default.run.json").write_text(json.dumps(live_meta))
    assert load.load(live).incomplete == [f"{live / 'default.jsonl'}: 82 cells so far"]
    assert "An unfinished run" in (tmp_path / "r" / "matrix.html").read_text()
    whole = run("cudnn_rnn.report", str(FIX / "cpu-928"), "--out", str(tmp_path / "w"))
    assert "unfinished run" not in whole.stderr + (tmp_path / "w" / "matrix.md").read_text()


def test_a_report_of_several_runs_names_the_provenance_of_each(tmp_path):
    """A folder of two probe runs (the committed H200 folder: the default spec and the
    seed's INT8 spec, recorded at different commits on different days): the provenance
    table has a column of each run with its own commit, command and date, not the first
    run's alone."""
    src = Path(__file__).resolve().parent.parent / "results" / "nvidia-h200" / "9.19.0"
    result = load.load(src)
    assert [Path(f).name for f, _ in result.runs] == ["default.jsonl.gz", "seed_int8.jsonl"]
    md = render_md(result)
    block = md.split("## Provenance", 1)[1].split("\n## ", 1)[0]
    assert "of `default.jsonl.gz`" in block and "of `seed_int8.jsonl`" in block
    for _, meta in result.runs:
        p = meta["provenance"]
        assert p["commit"] in block and p["command"] in block and p["date"] in block
    commit_row = next(line for line in block.splitlines() if line.startswith("| commit"))
    assert commit_row.count("`") == 4  # two commits, one a column
    # summary.json names each run's provenance as well
    out = tmp_path / "report"
    proc = run("cudnn_rnn.report", str(src), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert [(r["file"], r["provenance"]["commit"]) for r in summary["runs"]] == [
        (Path(f).name, m["provenance"]["commit"]) for f, m in result.runs]
    # one run: one column, as before
    single = load.load(src / "seed_int8.jsonl")
    assert "| of this run" in render_md(single) and "of `seed_int8" not in render_md(single)


@pytest.mark.parametrize("b", ["nvidia-h200/9.14.0", "no-gpu/9.28.0"])
def test_the_committed_diffs_regenerate_as_committed(tmp_path, monkeypatch, b):
    """results/diff/: each diff as `make rerender` makes it from the committed runs, but for
    the line naming the command, commit and date that rendered it; each names the runs it
    read with their commits (a run recorded again shows as such here)."""
    root = Path(__file__).resolve().parent.parent
    monkeypatch.chdir(root)
    proc = run("cudnn_rnn.report", "--diff", "results/nvidia-h200/9.19.0", f"results/{b}",
               "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    made = sorted(tmp_path.glob("*.md"))
    assert len(made) == 1
    committed_md = Path("results/diff") / made[0].name
    assert committed_md.is_file(), f"{made[0].name} is not committed under results/diff"
    report_line = re.compile(r"^Report: .*$", re.M)
    assert report_line.sub("", made[0].read_text()) == report_line.sub("",
                                                                      committed_md.read_text())
    fresh, kept = (json.loads(p.with_suffix(".json").read_text())
                   for p in (made[0], committed_md))
    assert {k: v for k, v in fresh.items() if k != "report"} == \
        {k: v for k, v in kept.items() if k != "report"}
    for side in ("a_runs", "b_runs"):
        for r in kept[side]:
            meta = load.read_meta(Path(r["file"]))
            assert r["provenance"]["commit"] == meta["provenance"]["commit"]


def test_a_run_recorded_over_several_sessions_lists_each_in_its_provenance(h919):
    """A run continued with --resume (the committed full run: two sessions): its date is the
    last session's start, so the table lists every session, with its start, end, commit and
    cells left to run; a run of one session gets no such row."""
    path, meta = h919.runs[0]
    sessions = [{"started": "2026-12-03T11:56:12+00:00", "commit": "a" * 40,
                 "cells_to_run": 51840},
                {"started": "2026-12-03T12:05:44+00:00", "finished": "2026-12-03T12:10:19+00:00",
                 "commit": "b" * 40, "cells_to_run": 22831}]
    resumed = dict(meta, sessions=sessions)
    md = render_md(load.ResultSet(h919.records, resumed, h919.paths, [], [(path, resumed)]))
    row = next(line for line in md.splitlines() if line.startswith("| sessions"))
    assert "2026-12-03T11:56:12+00:00 at `aaaaaaaaaaaa`, 51840 cells to run" in row
    assert ("2026-12-03T12:05:44+00:00 to 2026-12-03T12:10:19+00:00 at `bbbbbbbbbbbb`, "
            "22831 cells to run") in row
    once = dict(meta, sessions=sessions[:1])
    assert "| sessions" not in render_md(
        load.ResultSet(h919.records, once, h919.paths, [], [(path, once)]))


def test_the_committed_full_products_matrix_md_regenerates_as_committed(tmp_path, monkeypatch):
    """results/nvidia-h200/9.19.0/full/matrix.md (its html and json are not committed) is
    what the report makes of the full run's 51,840 committed records, as make rerender
    renders it, but for the rows naming the command, commit and date that rendered it."""
    root = Path(__file__).resolve().parent.parent
    monkeypatch.chdir(root)
    d = Path("results/nvidia-h200/9.19.0/full")
    report.write_report(load.load(d), tmp_path, f"python -m cudnn_rnn.report {d} --out {d}")
    assert committed.without_report_rows((tmp_path / "matrix.md").read_text()) == \
        committed.without_report_rows(committed.markdown_as_here((d / "matrix.md").read_text()))


def test_an_out_folder_holding_another_runs_records_is_refused(tmp_path):
    """A folder that holds another probe run's records but no report yet is that run's: a
    report of this run there would read as its (and push that run's own report aside); a
    benchmark's records beside it (results/<gpu>/<cudnn>/ holds both) are not in the way."""
    other = _copy_run(FIX / "cpu-928", tmp_path / "other", keep=20)
    before = sorted(p.name for p in other.iterdir())
    proc = run("cudnn_rnn.report", str(FIX / "h200-919"), "--out", str(other))
    assert_one_line_exit_2(proc, f"--out {other} holds another run's records (default.jsonl)",
                           "give another --out")
    assert sorted(p.name for p in other.iterdir()) == before
    # its own records' folder takes its report, a benchmark's records there or not
    mine = _copy_run(FIX / "h200-919", tmp_path / "mine", keep=20)
    (mine / "bench.jsonl").write_text("")
    (mine / "bench.run.json").write_text('{"kind": "bench", "runs": []}')
    assert run("cudnn_rnn.report", str(mine), "--out", str(mine)).returncode == 0
    assert (mine / "matrix.md").is_file()


@pytest.mark.parametrize("args,needles", [
    (["results/nvidia-h200/9.19.0/default.run.json"],
     ["is a run's description, not its records",
      "give results/nvidia-h200/9.19.0/default.jsonl.gz"]),
    (["results"], ["results holds no probe results", "the runs below it: results/no-gpu/9.28.0, "
                   "results/nvidia-h200/9.14.0, results/nvidia-h200/9.19.0"]),
    ([""], ["an empty name is no result set"]),
    (["--diff", "", "results/nvidia-h200/9.14.0"], ["an empty name is no result set"]),
])
def test_a_name_that_is_not_a_run_says_what_to_give(tmp_path, monkeypatch, args, needles):
    """Names a user tries before the run's folder: its .run.json (which is JSON, not
    records), the results folder above the runs, an empty name (which Path reads as '.')."""
    monkeypatch.chdir(Path(__file__).resolve().parent.parent)
    proc = run("cudnn_rnn.report", *args, "--out", str(tmp_path / "o"))
    assert_one_line_exit_2(proc, *needles)
    assert not (tmp_path / "o").exists()


def test_a_benchmarks_run_file_points_to_the_benchmarks_report(tmp_path):
    proc = run("cudnn_rnn.report", "results/nvidia-h200/9.19.0/persistent/bench.run.json",
               "--out", str(tmp_path / "o"))
    assert_one_line_exit_2(proc, "describes a benchmark: its report is python -m "
                                 "cudnn_rnn.bench_report results/nvidia-h200/9.19.0/persistent")


def test_two_runs_of_one_file_name_are_told_apart_by_their_paths(tmp_path):
    """Two folders' default.jsonl in one report (the same GPU and cuDNN): the provenance
    columns and summary.json name them by path, not twice as default.jsonl."""
    a = _copy_run(FIX / "h200-919", tmp_path / "a", keep=20)
    b = _copy_run(FIX / "h200-919", tmp_path / "b", keep=20,
                  provenance=dict(json.loads((FIX / "h200-919" / "default.run.json")
                                             .read_text())["provenance"], commit="b" * 40))
    result = load.load(a, b)
    assert result.run_names() == [str(a / "default.jsonl"), str(b / "default.jsonl")]
    block = render_md(result).split("## Provenance", 1)[1].split("\n## ", 1)[0]
    assert f"of `{a / 'default.jsonl'}`" in block and f"of `{b / 'default.jsonl'}`" in block
    assert load.load(FIX / "h200-919").run_names() == ["default.jsonl"]
