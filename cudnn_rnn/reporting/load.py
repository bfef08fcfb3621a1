"""Reading result sets: one or more probe JSONL files and the run.json beside them."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..cli import BadInput

SAMPLE_SHAPE = {"seq_length": 20, "layers": 2, "hidden": 512, "batch": 64}
REQUIRED = ("id", "outcome", "data_type", "math_prec", "math_type", "algo", "cell", "shape")


@dataclass
class ResultSet:
    records: list
    meta: dict
    paths: list = field(default_factory=list)

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


def _jsonl_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(path.glob("*.jsonl"))
        if not files:
            raise BadInput(f"{path} holds no probe results (*.jsonl)")
        return files
    if not path.exists():
        raise BadInput(f"{path} does not exist (give a probe .jsonl or its directory)")
    return [path]


def read_jsonl(path: Path) -> list[dict]:
    records = []
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise BadInput(f"{path} is not a text file of probe records") from None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            raise BadInput(f"{path}: line {number} is not JSON") from None
        if not isinstance(rec, dict) or any(k not in rec for k in REQUIRED):
            missing = [k for k in REQUIRED if not isinstance(rec, dict) or k not in rec]
            raise BadInput(f"{path}: line {number} is not a probe record (lacks {missing[0]})")
        records.append(rec)
    if not records:
        raise BadInput(f"{path} holds no records")
    return records


def load(*paths) -> ResultSet:
    """Merge the records of every given file or directory (first occurrence of an id wins)."""
    files = [f for p in paths for f in _jsonl_files(Path(p))]
    seen, records, meta = set(), [], {}
    for f in files:
        for rec in read_jsonl(f):
            if rec["id"] not in seen:
                seen.add(rec["id"])
                records.append(rec)
        run = f.with_suffix(".run.json")
        if run.exists():
            try:
                data = json.loads(run.read_text())
            except json.JSONDecodeError:
                raise BadInput(f"{run} is not JSON") from None
            if not meta or data.get("spec") == "default":
                meta = {**data, "seed_replay": data.get("seed_replay") or meta.get("seed_replay")}
    return ResultSet(records, meta, [str(f) for f in files])


def is_sample_shape(rec: dict) -> bool:
    return all(rec["shape"].get(k) == v for k, v in SAMPLE_SHAPE.items())
