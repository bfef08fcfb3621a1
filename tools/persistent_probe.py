"""The persistent kernel's candidates at chosen shapes, each launch shape's quick time, then
the chosen one verified and timed, beside the GEMM engine of the same plans (one process).

    python tools/persistent_probe.py --out DIR [--shapes LSTM:20:2:512:64,...] [--names ...]

A diagnostic behind statements in the README and the issue notes (not part of the package).
"""
import argparse
import json
import sys
import time
from pathlib import Path

from cudnn_rnn.bindings.enums import RNNMode
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.lowbit.candidates import run_configs

SHAPES = "LSTM:20:2:512:64,LSTM:50:1:1024:256,LSTM:50:1:2048:128,LSTM:50:1:1024:64,GRU:20:2:512:64"
NAMES = "persistent:fp16,persistent:int8/both,persistent:e4m3/both,fp16,int8/both"


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--shapes", default=SHAPES)
    p.add_argument("--names", default=NAMES)
    p.add_argument("--settings", default=None, help="comma-separated launch shapes (all)")
    a = p.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for spec in a.shapes.split(","):
        cell, T, L, H, B = spec.split(":")
        cfg = RNNConfig(seq_length=int(T), num_layers=int(L), hidden_size=int(H),
                        mini_batch=int(B), mode=RNNMode[cell])
        started = time.monotonic()
        r = run_configs(cfg, a.names.split(","), reps=20, budget_s=0.3,
                        settings=a.settings.split(",") if a.settings else None)
        print(f"\n== {spec}  ({time.monotonic() - started:.1f} s)")
        for rec in r["records"]:
            g = (rec.get("graph_timings") or {}).get("forward_inference", {})
            pl = (rec.get("timings") or {}).get("forward_inference", {})
            err = max((rec.get("errors") or {"": float("nan")}).values())
            tried = " ".join(f"{t['settings']}={t['ms']:.4f}" if t["ms"] else
                             f"{t['settings']}:{t['outcome']}" for t in rec.get("settings_tried", []))
            print(f"{rec['config']:24s} {rec['outcome']:13s} replay {g.get('median_ms', 0):.4f} "
                  f"plain {pl.get('median_ms', 0):.4f} err {err:.2e} {rec.get('settings', '')} "
                  f"[{tried}] {(rec.get('reason') or '')[:300]}")
        results.append({"shape": spec, "records": r["records"]})
        (out / "persistent_probe.json").write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
