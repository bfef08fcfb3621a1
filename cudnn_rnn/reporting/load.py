"""Reading result sets: one or more probe runs (``<spec>.jsonl`` + ``<spec>.run.json``).

Records are read by :func:`cudnn_rnn.matrix.record.read_records`, the one reader of probe
records (it checks each record's structure); the ``.run.json`` beside each file is
checked here. A directory's probe runs are its ``*.jsonl`` files (and the archived
``*.jsonl.gz`` of committed runs) except those whose
``.run.json`` says they are another kind of run (the benchmark's ``bench.jsonl``).
Reading never writes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cudnn_rnn.matrix.errors import BadInput, MalformedResults
from cudnn_rnn.matrix.jsontypes import ANY, BOOL, INT, SCALAR, STR, Dict, List, Obj, Opt, problem
from cudnn_rnn.matrix.record import read_records, run_file
from cudnn_rnn.matrix.runs import read_json_dict

SAMPLE_SHAPE = {"seq_length": 20, "layers": 2, "hidden": 512, "batch": 64}


def _replay_outputs(step: dict, where: str) -> str | None:
    if "output_written" in step:
        for key in ("output_before", "output_after"):
            if not isinstance(step.get(key), int) or isinstance(step.get(key), bool):
                return f"{where}.{key}: expected an integer beside output_written"
    return None


RUN_META = Obj({
    "kind": STR, "spec": STR, "provenance": Dict(SCALAR), "legacy_symbols": Opt(Dict(BOOL)),
    "seed_replay": Opt(List(Obj({"call": STR, "status": STR, "args": Opt(STR), "reason": Opt(STR),
                                 "status_code": Opt(INT), "output_written": Opt(BOOL)},
                                required={"call", "status"}, rule=_replay_outputs))),
    "sessions": Opt(List(Dict(ANY))), "identity": Opt(Dict(ANY)),
})


@dataclass
class ResultSet:
    records: list
    meta: dict
    paths: list = field(default_factory=list)
    incomplete: list = field(default_factory=list)  # "file: N of M cells" of each cut run
    runs: list = field(default_factory=list)  # (records file, its meta) of each file with one

    def run_names(self) -> list[str]:
        """Each run's records file as the reports name it: its file name, or its path where
        two runs' file names are the same (two folders' default.jsonl)."""
        names = [Path(f).name for f, _ in self.runs]
        return names if len(set(names)) == len(names) else [str(f) for f, _ in self.runs]

    @property
    def provenance(self) -> dict:
        return self.meta.get("provenance", {})

    @property
    def label(self) -> str:
        p = self.provenance
        gpu = p.get("gpu") if p.get("gpu") and not p.get("no_gpu_reason") else "no GPU"
        return f"{gpu}, cuDNN {p.get('cudnn_version') or self.records[0].get('cudnn_version')}"

    def by_id(self) -> dict:
        return {r["id"]: r for r in self.records}


def is_probe_run(jsonl: Path) -> bool:
    """Whether ``jsonl`` holds a probe run's records (not a benchmark's: its run file lists
    runs, or names another kind)."""
    meta = read_json_dict(run_file(jsonl))
    return meta is None or ("runs" not in meta and meta.get("kind", "probe") == "probe")


def _runs_below(path: Path) -> list[str]:
    """Folders below ``path`` (two levels at most, as results/<gpu>/<cudnn>/) that hold a
    probe run's records: where to point a user who named the folder above them."""
    found = {f.parent for depth in ("*/", "*/*/") for pattern in ("*.jsonl", "*.jsonl.gz")
             for f in path.glob(depth + pattern) if f.is_file() and is_probe_run(f)}
    return sorted(str(d) for d in found)


def _jsonl_files(path: Path) -> list[Path]:
    if path.name.endswith(".run.json"):
        records = [path.with_name(path.name[:-len(".run.json")] + s) for s in (".jsonl",
                                                                                ".jsonl.gz")]
        there = next((r for r in records if r.is_file()), records[0])
        if not is_probe_run(records[0]):
            raise BadInput(f"{path} describes a benchmark: its report is python -m "
                           f"cudnn_rnn.bench_report {path.parent}")
        raise BadInput(f"{path} is a run's description, not its records: give {there} or "
                       f"its folder {path.parent}")
    if path.is_dir():
        files = [f for f in sorted([*path.glob("*.jsonl"), *path.glob("*.jsonl.gz")])
                 if f.is_file() and is_probe_run(f)]
        if not files and (path / "bench.jsonl").is_file():
            raise BadInput(f"{path} holds a benchmark (bench.jsonl), not probe results: its "
                           f"report is python -m cudnn_rnn.bench_report {path}")
        if not files:
            below = _runs_below(path)
            raise BadInput(f"{path} holds no probe results (<spec>.jsonl beside <spec>.run.json)"
                           + (f"; the runs below it: {', '.join(below[:4])}"
                              + (f" and {len(below) - 4} more" if len(below) > 4 else "")
                              if below else ""))
        return files
    if not path.exists():
        raise BadInput(f"{path} does not exist (give a probe run's folder or its .jsonl file)")
    if not is_probe_run(path):
        raise BadInput(f"{path} is a benchmark's records, not a probe run's: their report is "
                       f"python -m cudnn_rnn.bench_report {path.parent}")
    return [path]


def spec_name(path) -> str:
    """The spec a records file belongs to, by its name (``default`` for default.jsonl.gz)."""
    name = Path(path).name
    return name[:-len(".gz")].rsplit(".", 1)[0] if name.endswith(".gz") else Path(name).stem


def read_meta(jsonl: Path) -> dict | None:
    """The ``.run.json`` beside ``jsonl``, checked; None when there is none."""
    run = run_file(jsonl)
    if not run.exists():
        return None
    data = read_json_dict(run)
    if data is None:
        raise BadInput(f"{run} is not a JSON object (a probe run's .run.json)")
    wrong = problem(data, RUN_META, "the file")
    if wrong:
        raise BadInput(f"{run} is not a probe run's .run.json ({wrong})")
    return data


def _of_total(meta: dict) -> str:
    """`` of at most N`` for a cut run's meta (its cells less the variants whose cell was
    refused: those left still include variants that will not run), or `` so far`` where
    the run has not said (it is being written)."""
    cells, gated = meta.get("cells"), meta.get("not_run_base_refused") or 0
    if isinstance(cells, int) and isinstance(gated, int):
        return f" of at most {cells - gated}"
    return " so far"


def setup(meta: dict) -> tuple:
    """What a run's outcomes belong to, by its provenance: the GPU (None: no GPU, the
    descriptor stages only) and the cuDNN version."""
    prov = meta.get("provenance") or {}
    return prov.get("gpu"), prov.get("cudnn_version")


def describe_setup(key: tuple) -> str:
    gpu, cudnn = key
    return f"{gpu or 'no GPU'}, cuDNN {cudnn}"


def load(*paths) -> ResultSet:
    """Merge the records of every given file or directory (first occurrence of an id wins)."""
    files = list({f.resolve(): f for p in paths for f in _jsonl_files(Path(p))}.values())
    seen, records, meta, setups, incomplete = set(), [], {}, {}, []
    metas = {f: read_meta(f) for f in files}
    for f, data in metas.items():
        if data is not None:
            setups.setdefault(setup(data), f)
    if len(setups) > 1:
        (a, fa), (b, fb) = list(setups.items())[:2]
        raise BadInput(f"{fa} and {fb} are runs of different setups ({describe_setup(a)} "
                       f"against {describe_setup(b)}): a report is one GPU's and one cuDNN's; "
                       f"report each apart, or compare two with --diff")
    for f in files:
        try:
            found, _ = read_records(f, reading=True)
        except MalformedResults as exc:
            raise BadInput(str(exc)) from None
        if not found:
            raise BadInput(f"{f} holds no records")
        for rec in found:
            if rec["id"] not in seen:
                seen.add(rec["id"])
                records.append(rec)
        data = metas[f]
        if data is not None and data.get("complete") is False:  # cut, or being written
            incomplete.append(f"{f}: {len(found)} cells{_of_total(data)}")
        if data is not None and (not meta or data.get("spec") == "default"):
            meta = {**data, "seed_replay": data.get("seed_replay") or meta.get("seed_replay")}
    return ResultSet(records, meta, [str(f) for f in files], incomplete,
                     [(str(f), m) for f, m in metas.items() if m is not None])


def is_sample_shape(rec: dict) -> bool:
    return all(rec["shape"].get(k) == v for k, v in SAMPLE_SHAPE.items())
