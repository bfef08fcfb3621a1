"""Property: whatever the arguments and files, every entry point exits 0, or exits 2 with
one line on stderr; it never writes outside its output folder, never loses or rewrites
what is already recorded there when it refuses, and never touches the committed results.

Hypothesis generates argument lists for each of the seven entry points (example, probe,
tune, bench, overhead, report with and without --diff, bench_report), and the files they
read: probe specs and benchmark specs (a valid spec with one or two parts replaced by
hostile values: wrong types, sizes beyond the C int, path-like names), probe records and
run.json files (recorded real runs with a field replaced or removed), a benchmark's
records, runs and overhead check, and library paths that are not libcudnn. Each case runs
the real command in a fresh process, on the CPU (``CUDNN_RNN_NO_GPU=1``), with the working
area (``CUDNN_RNN_HOME``) in the case's own folder.

CI runs a fixed, derandomised set of cases; ``CUDNN_RNN_HYPOTHESIS=deep`` runs many more,
randomly (``CUDNN_RNN_HYPOTHESIS_EXAMPLES`` sets how many per entry point).
"""
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
DEEP = os.environ.get("CUDNN_RNN_HYPOTHESIS") == "deep"
EXAMPLES = int(os.environ.get("CUDNN_RNN_HYPOTHESIS_EXAMPLES", 400 if DEEP else 30))
CASES = settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=not DEEP,
                 suppress_health_check=list(HealthCheck), print_blob=True)
SKIP_DIRS = {".git", ".venv", "__pycache__", ".pytest_cache", ".hypothesis", "runs", "reports"}

# ----------------------------------------------------------------------------- values
ODD = st.sampled_from([None, 0, -1, 1e-300, 1e300, "", [], {}, "OK", "SKIPPED", "ERROR",
                       "LSTM", "FLOAT", 2 ** 31, -0.0, True])
HOSTILE = st.one_of(
    ODD, ODD, ODD,
    st.sampled_from([0, -1, 1, 7, 2 ** 31 - 1, 2 ** 31, 2 ** 32 + 512, 2 ** 63, 10 ** 30,
                     10 ** 400, -(10 ** 400)]),
    st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
    st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
    st.sampled_from(["../../evil", "/tmp/cudnn_rnn_abs_evil", "a/b", "", ".", "..", "HALF",
                     "LSTM", "none", "NOT_A_NAME", "0", "-1", "x" * 70, "ok_name"]),
    st.text(max_size=8),
    st.lists(st.sampled_from([1, "HALF", None, [], {}]), max_size=3),
    st.dictionaries(st.sampled_from(["a", "seq_length", "name"]), st.integers(), max_size=2),
    st.none(),
)
NUMBER_TEXT = st.sampled_from(["1", "3", "20", "0", "-1", "x", "1.5", "nan", "inf", "-inf", "",
                               "1e309", "2147483648", str(2 ** 63), "9" * 30, "0x10", " 2 "])
ENUM_TEXT = st.lists(st.sampled_from(["HALF", "FLOAT", "INT8", "LSTM", "GRU", "STANDARD",
                                      "DEFAULT", "TENSOR_OP", "FMA", "bogus", "0", "7", "-1", "",
                                      "PERSIST_STATIC", "none", "64", "512"]),
                     min_size=1, max_size=3).map(",".join)
PATHS = st.sampled_from(["{out}", "{file}", "{dir}", "{missing}", "{readonly}", "/dev/null",
                         "{in}", "{in}/default.jsonl", "", "{file}/below"])
LIBS = st.sampled_from(["{dir}", "{file}", "{missing}", "/dev/null", "{fake_so}", "",
                        "/lib/x86_64-linux-gnu/libc.so.6", "{in}"])


# ----------------------------------------------------------------------------- files
def toml_key(k: str) -> str:
    return k if k and all(c.isalnum() or c in "_-" for c in k) else json.dumps(k)


def toml_value(v) -> str:
    if v is None:
        return '"null"'  # TOML has no null; a string stands in
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return "{" + ", ".join(f"{toml_key(str(k))} = {toml_value(x)}" for k, x in v.items()) + "}"


def toml_doc(d) -> str:
    if not isinstance(d, dict):
        return f"value = {toml_value(d)}\n"
    return "".join(f"{toml_key(str(k))} = {toml_value(v)}\n" for k, v in d.items())


def paths_of(tree, prefix=()):
    yield prefix
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from paths_of(v, prefix + (k,))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            yield from paths_of(v, prefix + (i,))


@st.composite
def mutated(draw, tree, changes=st.integers(min_value=1, max_value=2)):
    """``tree`` with a node replaced by a hostile value, or removed (once or twice)."""
    tree = json.loads(json.dumps(tree))
    for _ in range(draw(changes)):
        where = draw(st.sampled_from(list(paths_of(tree))))
        if not where:
            if draw(st.booleans()):
                return draw(HOSTILE)
            continue
        parent = tree
        for step in where[:-1]:
            parent = parent[step]
        if isinstance(parent, dict) and draw(st.integers(0, 3)) == 0:
            del parent[where[-1]]
        else:
            parent[where[-1]] = draw(HOSTILE)
    return tree


SPEC = {"name": "gen", "description": "generated",
        "defaults": {"cell": ["GRU"], "direction": ["UNIDIRECTIONAL"]},
        "block": [{"name": "b", "data_type": ["FLOAT", "INT8"], "math_prec": ["FLOAT"],
                   "math_type": ["DEFAULT"], "algo": ["STANDARD"], "proj_size": ["none"],
                   "shapes": [{"seq_length": 5, "layers": 1, "hidden": 64, "batch": 8}]}]}
BENCH_SPEC = {"name": "b", "objective": "forward_inference",
              "candidates": [["HALF", "FLOAT", "TENSOR_OP", "STANDARD"]],
              "group": [{"name": "g", "cell": ["GRU"], "layers": [1], "hidden": [64],
                         "batch": [8], "seq_length": [5]}]}
RECORDS = [json.loads(x) for x in (FIX / "h200-919" / "default.jsonl").read_text().splitlines()[:4]]
RUN_META = json.loads((FIX / "h200-919" / "default.run.json").read_text())
BENCH = [json.loads(x) for x in (FIX / "bench-h200-919" / "bench.jsonl").read_text().splitlines()[:2]]
BENCH_RUNS = json.loads((FIX / "bench-h200-919" / "bench.run.json").read_text())
OVERHEAD = json.loads((FIX / "overhead" / "overhead-7444781.json").read_text())


def text_file(obj, allow_nan=True) -> str:
    return json.dumps(obj, allow_nan=allow_nan)


@st.composite
def probe_spec(draw):
    choice = draw(st.integers(0, 9))
    if choice == 0:
        return draw(st.sampled_from([b"\xff\xfe not utf-8", b"[[block]\n", b"", b"name = 1 2"]))
    tree = SPEC if choice == 1 else draw(mutated(SPEC))
    return toml_doc(tree).encode()


NAMES = st.sampled_from(["OK", "WRONG_RESULT", "SKIPPED", "CRASH", "TIMEOUT", "ERROR",
                         "NOT_SUPPORTED", "BAD_PARAM", "FLOAT", "HALF", "INT8", "BFLOAT16",
                         "LSTM", "GRU", "RNN_RELU", "STANDARD", "PERSIST_STATIC", "DEFAULT",
                         "TENSOR_OP", "FMA", "X"])
TYPED = {  # field -> values of the right type, in combinations no real run writes
    "outcome": NAMES, "data_type": NAMES, "math_prec": NAMES, "math_type": NAMES, "algo": NAMES,
    "cell": NAMES, "block": st.sampled_from(["shape sweep fp16", "shape sweep fp32", "", None]),
    "speedup": st.sampled_from([None, {}, {"forward_training": 0.0},
                                {"forward_training": 2.5, "forward_inference": 1e-9}]),
    "timings": st.sampled_from([None, {}]), "errors": st.sampled_from([None, {}, {"y": None}]),
    "shape": st.fixed_dictionaries({k: st.sampled_from([1, 8, 20, 64, 127, 512, 2044, 2048])
                                    for k in ("seq_length", "layers", "hidden", "batch")}),
    "failed_call": st.sampled_from([None, "", "cudnnRNNForward", "x" * 200]),
    "reason": st.sampled_from([None, "", "<b>&</b>", "x" * 300]),
    "status_code": st.sampled_from([None, 0, -1, 3000]), "id": st.sampled_from(["", "a", "a/b"]),
}


@st.composite
def record_variant(draw, rec):
    rec = dict(rec)
    for key in draw(st.lists(st.sampled_from(sorted(TYPED)), max_size=3, unique=True)):
        rec[key] = draw(TYPED[key])
    return rec


@st.composite
def record_lines(draw):
    recs = [draw(st.one_of(mutated(r), record_variant(r), record_variant(r), st.just(r)))
            for r in RECORDS]
    text = "".join(text_file(r) + "\n" for r in recs)
    if draw(st.integers(0, 7)) == 0:  # an integer json.loads refuses (over 4300 digits)
        text += '{"id": "x", "status_code": ' + "9" * 5000 + "}\n"
    if draw(st.integers(0, 5)) == 0:
        text += '{"id": "torn", "outc'  # a killed run's last line
    return text.encode()


# ----------------------------------------------------------------------------- running
def snapshot(root: Path, skip=()) -> dict:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and
                       os.path.join(dirpath, d) not in skip]
        for f in filenames:
            p = os.path.join(dirpath, f)
            with open(p, "rb") as fh:
                out[p] = hashlib.sha256(fh.read()).hexdigest()
    return out


TALLY: list = []  # (module, exit code, the one line) of every case run


@pytest.fixture(scope="module", autouse=True)
def committed_results_untouched():
    before = snapshot(ROOT)
    yield
    from collections import Counter
    print(f"\n{len(TALLY)} cases: " + ", ".join(
        f"{m.replace('cudnn_rnn.', '')} exit {rc}: {n}" for (m, rc), n in
        sorted(Counter((m, rc) for m, rc, _ in TALLY).items())))
    for (m, line), n in Counter((m, line) for m, _rc, line in TALLY if line).most_common(60):
        print(f"  {n:4d} {m.replace('cudnn_rnn.', ''):16s} {line}")
    after = snapshot(ROOT)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    assert not changed, changed[:10]


class Case:
    """One case's folder: inputs in ``in/``, the chosen output folder ``out/``, the working
    area ``home/``; everything else in it must stay as it was."""

    def __init__(self):
        self.top = Path(tempfile.mkdtemp(prefix="badin-"))
        self.base = self.top / "a" / "b"
        for d in ("in", "out", "home", "dir", "readonly"):
            (self.base / d).mkdir(parents=True)
        (self.base / "file").write_text("not a folder\n")
        (self.base / "fake_so").mkdir()
        (self.base / "fake_so" / "libcudnn.so.9").write_bytes(b"\x7fELF garbage")
        os.chmod(self.base / "readonly", 0o555)

    def fill(self, text: str) -> str:
        return text.format(out=self.base / "out", file=self.base / "file", dir=self.base / "dir",
                           missing=self.base / "missing", readonly=self.base / "readonly" / "x",
                           fake_so=self.base / "fake_so" / "libcudnn.so.9", **{"in": self.base / "in"})

    def run(self, module: str, argv: list, env: dict | None = None):
        argv = [self.fill(a) for a in argv]
        chosen = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--out"]
        out = Path(chosen[-1]) if chosen and chosen[-1] else self.base / "out"
        keep = [str(self.base / "home"), str(out)]
        outside = snapshot(self.top, skip=keep)
        recorded = snapshot(out) if out.is_dir() else {}
        full = {k: v for k, v in os.environ.items()
                if k not in ("CUDNN_LIBRARY", "CUDNN_RNN_FAULT", "PYTHONPATH")}
        full.update(PYTHONPATH=str(ROOT), CUDNN_RNN_NO_GPU="1",
                    CUDNN_RNN_HOME=str(self.base / "home"),
                    **{k: self.fill(v) for k, v in (env or {}).items()})
        proc = subprocess.run([sys.executable, "-m", module, *argv], capture_output=True,
                              text=True, env=full, cwd=self.base, timeout=300)
        where = f"python -m {module} {' '.join(argv)} (env {env})"
        assert "Traceback" not in proc.stderr, where + "\n" + proc.stderr[-3000:]
        assert proc.returncode in (0, 2), (where, proc.returncode, proc.stderr[-2000:])
        if proc.returncode == 2:
            lines = proc.stderr.strip().splitlines()
            assert len(lines) == 1, (where, proc.stderr[-2000:])
            assert (snapshot(out) if out.is_dir() else {}) == recorded, (
                where, "refused, but changed its output folder")
        assert snapshot(self.top, skip=keep) == outside, (where, "wrote outside its folder")
        assert not Path("/tmp/cudnn_rnn_abs_evil.jsonl").exists()
        TALLY.append((module, proc.returncode, proc.stderr.strip().splitlines()[-1][:90]
                      if proc.returncode else ""))
        return proc

    def close(self):
        os.chmod(self.base / "readonly", 0o755)
        shutil.rmtree(self.top, ignore_errors=True)


def case_run(module, argv, env=None, files=None):
    case = Case()
    try:
        for name, data in (files or {}).items():
            path = case.base / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data if isinstance(data, bytes) else data.encode())
        return case.run(module, argv, env)
    finally:
        case.close()


def flags(options: dict, max_size=5):
    """A list of ``--flag value`` pairs drawn from ``options`` (flag -> values strategy;
    None for a flag without a value)."""
    return st.lists(st.sampled_from(sorted(options)), max_size=max_size, unique=True).flatmap(
        lambda chosen: st.tuples(*[st.just([f]) if options[f] is None else
                                   options[f].map(lambda v, f=f: [f, v]) for f in chosen])
    ).map(lambda parts: [x for part in parts for x in part])


# ----------------------------------------------------------------------------- the cases
PROBE_FLAGS = {"--dtype": ENUM_TEXT, "--cell": ENUM_TEXT, "--algo": ENUM_TEXT,
               "--math-type": ENUM_TEXT, "--hidden": NUMBER_TEXT, "--batch": NUMBER_TEXT,
               "--layers": NUMBER_TEXT, "--reps": NUMBER_TEXT, "--timeout": NUMBER_TEXT,
               "--resume": None, "--overwrite": None, "--no-time": None, "--list": None,
               "--report": None, "--cudnn": LIBS, "--out": PATHS}


@CASES
@given(argv=flags(PROBE_FLAGS), spec=probe_spec(), use_spec=st.booleans(),
       existing=st.sampled_from(["none", "foreign", "mutated", "garbage"]),
       records=record_lines(), meta=mutated(RUN_META), lib_env=st.none() | LIBS)
def test_probe(argv, spec, use_spec, existing, records, meta, lib_env):
    if "--out" not in argv:
        argv = ["--out", "{out}"] + argv
    if not use_spec and not any(f in argv for f in ("--dtype", "--cell", "--hidden")):
        argv += ["--cell", "GRU", "--dtype", "INT8,FLOAT"]  # keep the default spec quick
    files = {"in/spec.toml": spec}
    if existing == "foreign":  # a real run of another machine where this one is told to write
        files["out/default.jsonl"] = (FIX / "h200-919" / "default.jsonl").read_bytes()
        files["out/default.run.json"] = (FIX / "h200-919" / "default.run.json").read_bytes()
    elif existing in ("mutated", "garbage"):
        files["out/gen.jsonl"] = files["out/default.jsonl"] = records
        files["out/gen.run.json"] = files["out/default.run.json"] = (
            text_file(meta) if existing == "mutated" else "[1, 2]")
    env = {"CUDNN_LIBRARY": lib_env} if lib_env is not None else None
    case_run("cudnn_rnn.probe", (["--spec", "{in}/spec.toml"] if use_spec else []) + argv, env,
             files)


REPORT_FLAGS = {"--out": PATHS}


ODD_RECORDS = "".join(text_file(r) + "\n" for r in [
    dict(RECORDS[0], speedup=None, block="shape sweep fp16"),
    dict(RECORDS[1], block="shape sweep fp16", speedup={"forward_training": 0.0}),
    dict(RECORDS[2], outcome="ERROR", timings=None, errors=None, reason="<b>&</b>"),
    dict(RECORDS[3], data_type="X", cell="X", shape={"seq_length": 20, "layers": 2,
                                                     "hidden": 2048, "batch": 128}),
    *[dict(RECORDS[1], id=f"sweep{h}", data_type="HALF", math_type="TENSOR_OP",
           cell="RNN_RELU", block="shape sweep fp16",
           shape={"seq_length": 20, "layers": 1, "hidden": h, "batch": h // 16},
           speedup=None if h == 2048 else {"forward_training": 1.5})
      for h in (2048, 2044, 1024)]]).encode()


@CASES
@example(records=ODD_RECORDS, meta=RUN_META, argv=[], inputs=[], diff=False, bench_beside=True)
@example(records=ODD_RECORDS, meta=RUN_META, argv=["--out", "{out}"], inputs=[], diff=True,
         bench_beside=False)
@example(records="".join(text_file(r) + "\n" for r in RECORDS).encode(),
         meta=dict(RUN_META, seed_replay=[]), argv=[], inputs=["{in}/default.jsonl"],
         diff=False, bench_beside=False)
@given(records=record_lines(), meta=st.one_of(st.just(RUN_META), st.just(RUN_META),
                                              mutated(RUN_META), HOSTILE.map(text_file)),
       argv=flags(REPORT_FLAGS, 2),
       inputs=st.one_of(st.just([]), st.just([]), st.lists(PATHS, min_size=0, max_size=2)),
       diff=st.booleans(), bench_beside=st.booleans())
def test_report(records, meta, argv, inputs, diff, bench_beside):
    files = {"in/default.jsonl": records,
             "in/default.run.json": meta if isinstance(meta, str) else text_file(meta)}
    if bench_beside:
        files["in/bench.jsonl"] = (FIX / "bench-h200-919" / "bench.jsonl").read_bytes()
        files["in/bench.run.json"] = (FIX / "bench-h200-919" / "bench.run.json").read_bytes()
    inputs = inputs or ["{in}"]
    head = ["--diff", inputs[0], inputs[-1] if len(inputs) > 1 else str(FIX / "h200-914")] \
        if diff else inputs
    case_run("cudnn_rnn.report", head + argv, files=files)


@CASES
@given(bench=st.lists(st.one_of(st.sampled_from(BENCH), mutated(BENCH[0])), min_size=0,
                      max_size=3),
       runs=st.one_of(st.just(BENCH_RUNS), mutated(BENCH_RUNS)),
       overhead=st.one_of(st.none(), st.just(OVERHEAD), mutated(OVERHEAD)),
       argv=flags(REPORT_FLAGS, 2), directory=st.sampled_from(["{in}", "{file}", "{missing}",
                                                                "{dir}"]))
def test_bench_report(bench, runs, overhead, argv, directory):
    files = {"in/bench.jsonl": "".join(text_file(b) + "\n" for b in bench),
             "in/bench.run.json": text_file(runs)}
    if overhead is not None:
        files["in/overhead.json"] = text_file(overhead)
    case_run("cudnn_rnn.bench_report", [directory] + argv, files=files)


COMMON = {"--cudnn": LIBS, "--bogus": None, "--help": None}
COMMANDS = {
    "cudnn_rnn.example": {**COMMON, "--data-type": ENUM_TEXT, "--math-type": ENUM_TEXT,
                          "--algo": ENUM_TEXT, "--proj-size": NUMBER_TEXT,
                          "--input-size": NUMBER_TEXT, "--dropout": NUMBER_TEXT,
                          "--reps": NUMBER_TEXT, "--layout": ENUM_TEXT, "--verify": None},
    "cudnn_rnn.tune": {**COMMON, "--cell": ENUM_TEXT, "--seq": NUMBER_TEXT,
                       "--hidden": NUMBER_TEXT, "--batch": NUMBER_TEXT, "--layers": NUMBER_TEXT,
                       "--precision": ENUM_TEXT, "--budget": NUMBER_TEXT,
                       "--timeout": NUMBER_TEXT, "--reps": NUMBER_TEXT, "--json": None},
    "cudnn_rnn.bench": {**COMMON, "--spec": st.just("{in}/bench.toml") | PATHS,
                        "--group": ENUM_TEXT, "--deadline": NUMBER_TEXT, "--reps": NUMBER_TEXT,
                        "--budget": NUMBER_TEXT, "--timeout": NUMBER_TEXT, "--list": None,
                        "--resume": None, "--overwrite": None, "--out": PATHS},
    "cudnn_rnn.overhead": {**COMMON, "--shape": st.sampled_from(
        ["LSTM:20,2,512,64", "GRU:1,1,8,8:float16", "LSTM:20,2,4294967808,64", "X:1,1,1,1",
         "LSTM:1,1", "LSTM:0,1,1,1", "LSTM:1,1,1,1:int8", ""]),
        "--mode": ENUM_TEXT, "--rounds": NUMBER_TEXT, "--processes": NUMBER_TEXT,
        "--reps": NUMBER_TEXT, "--out": PATHS, "--save": None, "--json": None},
}


@CASES
@given(module=st.sampled_from(sorted(COMMANDS)), data=st.data(),
       positional=st.lists(NUMBER_TEXT, max_size=6), bench_spec=mutated(BENCH_SPEC))
def test_other_commands(module, data, positional, bench_spec):
    argv = data.draw(flags(COMMANDS[module]))
    if module == "cudnn_rnn.example":
        argv = positional + argv
    case_run(module, argv, files={"in/bench.toml": toml_doc(bench_spec)})


# ----------------------------------------------------------------------------- the classes
def spec_text(**changes) -> str:
    tree = json.loads(json.dumps(SPEC))
    tree["block"][0].update(changes.pop("block", {}))
    tree.update(changes)
    return toml_doc(tree)


BLOCK_SHAPE = {"seq_length": 5, "layers": 1, "hidden": 64, "batch": 8}
CATALOGUE = [  # (class, module, argv, files, env, words the one line must hold)
    ("library path: a text file", "cudnn_rnn.probe", ["--cudnn", "{file}"], {}, {}, "cannot load"),
    ("library path: a directory", "cudnn_rnn.probe", ["--cudnn", "{dir}"], {}, {}, "is a directory"),
    ("library path: a directory (env)", "cudnn_rnn.tune",
     ["--cell", "LSTM", "--hidden", "8", "--batch", "8"], {}, {"CUDNN_LIBRARY": "{dir}"},
     "is a directory"),
    ("library path: not libcudnn", "cudnn_rnn.bench", ["--cudnn", "{fake_so}"], {}, {},
     "cannot load"),
    ("library path: a directory", "cudnn_rnn.overhead", ["--cudnn", "{dir}"], {}, {},
     "is a directory"),
    ("library path: a directory", "cudnn_rnn.example", ["20", "2", "512", "64", "0", "--cudnn",
                                                        "{dir}"], {}, {}, "is a directory"),
    ("--spec is a directory", "cudnn_rnn.probe", ["--spec", "{dir}"], {}, {}, "is a directory"),
    ("--out is a file", "cudnn_rnn.probe", ["--out", "{file}"], {}, {}, "is a file"),
    ("--out below a file", "cudnn_rnn.report", [str(FIX / "h200-919"), "--out", "{file}/x"], {},
     {}, "a part of that path is a file"),
    ("--out cannot be created", "cudnn_rnn.bench", ["--out", "/proc/cudnn_rnn_x"], {}, {},
     "cannot create --out"),
    ("results path is a file of another kind", "cudnn_rnn.report", ["{file}"], {}, {},
     "line 1 is not JSON"),
    ("results path: a folder without runs", "cudnn_rnn.report", ["{dir}"], {}, {},
     "holds no probe results"),
    ("benchmark folder is a file", "cudnn_rnn.bench_report", ["{file}"], {}, {},
     "is not a folder"),
    ("TOML: block = [1, 2]", "cudnn_rnn.probe", ["--spec", "{in}/s.toml"],
     {"in/s.toml": 'name = "s"\nblock = [1, 2]\n'}, {}, "block 1 must be a table"),
    ("TOML: a name where a list is due", "cudnn_rnn.probe", ["--spec", "{in}/s.toml"],
     {"in/s.toml": spec_text(block={"data_type": "HALF"})}, {}, "data_type must be a non-empty list"),
    ("TOML: a number where a name is due (was read as FLOAT)", "cudnn_rnn.probe",
     ["--spec", "{in}/s.toml"], {"in/s.toml": spec_text(block={"data_type": [0]})}, {},
     "data_type values are names"),
    ("TOML: benchmark candidates of the wrong shape", "cudnn_rnn.bench", ["--spec", "{in}/b.toml"],
     {"in/b.toml": toml_doc(dict(BENCH_SPEC, candidates=[["HALF"]]))}, {}, "must be four names"),
    ("JSON: a record whose shape is a number", "cudnn_rnn.report", ["{in}"],
     {"in/default.jsonl": text_file(dict(RECORDS[0], shape=5)) + "\n"}, {},
     "shape: expected an object"),
    ("JSON: a run.json holding a list", "cudnn_rnn.report", ["{in}"],
     {"in/default.jsonl": text_file(RECORDS[0]) + "\n", "in/default.run.json": "[1, 2]"}, {},
     "is not a JSON object"),
    ("JSON: bench.run.json of the wrong shape", "cudnn_rnn.bench_report", ["{in}"],
     {"in/bench.jsonl": text_file(BENCH[0]) + "\n", "in/bench.run.json": '{"runs": 3}'}, {},
     "runs: expected a list"),
    ("JSON: overhead.json with a NaN ratio", "cudnn_rnn.bench_report", ["{in}"],
     {"in/bench.jsonl": text_file(BENCH[0]) + "\n", "in/bench.run.json": text_file(BENCH_RUNS),
      "in/overhead.json": text_file(dict(OVERHEAD, target=float("nan")))}, {}, "target"),
    ("--timeout 0", "cudnn_rnn.probe", ["--timeout", "0"], {}, {}, "argument --timeout"),
    ("--timeout -1", "cudnn_rnn.probe", ["--timeout", "-1"], {}, {}, "argument --timeout"),
    ("--timeout nan", "cudnn_rnn.probe", ["--timeout", "nan"], {}, {}, "argument --timeout"),
    ("--reps 0", "cudnn_rnn.probe", ["--reps", "0"], {}, {}, "argument --reps"),
    ("--budget nan", "cudnn_rnn.tune", ["--cell", "LSTM", "--hidden", "8", "--batch", "8",
                                        "--budget", "nan"], {}, {}, "argument --budget"),
    ("--deadline 0", "cudnn_rnn.bench", ["--deadline", "0"], {}, {}, "argument --deadline"),
    ("--rounds 0", "cudnn_rnn.overhead", ["--rounds", "0"], {}, {}, "argument --rounds"),
    ("--processes -1", "cudnn_rnn.overhead", ["--processes", "-1"], {}, {}, "--processes"),
    ("hidden = 2**32 + 512 (was run as 512)", "cudnn_rnn.probe", ["--spec", "{in}/s.toml"],
     {"in/s.toml": spec_text(block={"shapes": [dict(BLOCK_SHAPE, hidden=2 ** 32 + 512)]})}, {},
     "hidden_size = 4294967808 does not fit the C int"),
    ("batch = 2**31 (was a host list of 2**31 ints)", "cudnn_rnn.probe", ["--spec", "{in}/s.toml"],
     {"in/s.toml": spec_text(block={"shapes": [dict(BLOCK_SHAPE, batch=2 ** 31)]})}, {},
     "mini_batch = 2147483648 does not fit the C int"),
    ("batch = 2**63 (raised in the worker)", "cudnn_rnn.probe", ["--spec", "{in}/s.toml"],
     {"in/s.toml": spec_text(block={"shapes": [dict(BLOCK_SHAPE, batch=2 ** 63)]})}, {},
     "does not fit the C int"),
    ("hidden 2**32 + 512 on the command line", "cudnn_rnn.example",
     ["20", "2", str(2 ** 32 + 512), "64", "0"], {}, {}, "does not fit the C int"),
    ("name with a path", "cudnn_rnn.probe", ["--spec", "{in}/s.toml"],
     {"in/s.toml": spec_text(name="../../evil")}, {}, "name must be 1-64 letters"),
    ("absolute name", "cudnn_rnn.probe", ["--spec", "{in}/s.toml"],
     {"in/s.toml": spec_text(name="/tmp/cudnn_rnn_abs_evil")}, {}, "name must be 1-64 letters"),
]


@pytest.mark.parametrize("what,module,argv,files,env,words", CATALOGUE,
                         ids=[c[0] for c in CATALOGUE])
def test_each_class_of_bad_input_gets_its_line(what, module, argv, files, env, words):
    proc = case_run(module, argv + (["--out", "{out}"] if module in (
        "cudnn_rnn.probe",) and "--out" not in argv else []), env, files)
    assert proc.returncode == 2, (what, proc.stdout[-500:], proc.stderr)
    assert words in proc.stderr, proc.stderr
    print(f"{what}: {proc.stderr.strip()}")
