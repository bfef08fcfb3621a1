"""A real precision-table run's records (the shipped LSTM on an NVIDIA H200,
results/nvidia-h200/9.19.0/precision.json) and the plans an accelerated module would make of
them, for the CPU tests of cudnn_rnn.torch's choice, report and plan file."""
import json
from pathlib import Path

from cudnn_rnn.torch import ranking, report
from cudnn_rnn.torch.modules import ModuleSpec
from cudnn_rnn.torch.plan import Candidate, Plan
from cudnn_rnn.tune import cost_ms

RUN = Path(__file__).resolve().parent.parent / "results" / "nvidia-h200" / "9.19.0" / "precision.json"
RESULT = json.loads(RUN.read_text())["result"]
RECORDS = RESULT["records"]
# the shipped LSTM: what its records were run on
SPEC = ModuleSpec("LSTM", 2, 64, 256, 256, False, False, "float32")
TIMES = {"module": {"eager": {"ms": 9.0}, "graph": {"ms": 4.5}},
         "accelerated": {"eager": {"ms": 3.0}, "graph": {"skipped": "capture failed: X"}}}


def real_plan(name: str = "fp8", limit: float = 6e-2) -> Plan:
    """The plan of precision ``name`` at tolerance ``limit`` from the real records, with
    made-up module times (:data:`TIMES`)."""
    prec = ranking.PRECISIONS[name]
    mine, fallbacks = ranking.ranked(RECORDS, prec, limit)
    cands = [Candidate.from_record(r, cost_ms(r, False), cost_ms(r, False, plain=True),
                                   RESULT["thresholds"]) for r in mine + fallbacks]
    rows = report.rows(RECORDS, ranking.statuses(RECORDS, prec, limit))
    prov = json.loads(RUN.read_text())["provenance"]
    run = {"device": {k: prov[k] for k in ("gpu", "compute_capability")},
           "library": RESULT["library"]}
    return Plan(SPEC, "0" * 64, (256, 128), name, limit, cands,
                {"rows": rows, "times": json.loads(json.dumps(TIMES)), "example": "given",
                 "run": run})
