"""The precision table's job: every configuration on one model's weights and inputs.

A *source* is the shipped character model (``{"model": path}``: the held-out slice is the
batch, the task metric is bits per character and top-1 accuracy, the calibration slice
of training text calibrates), or a user's recurrent module (``{"weights": path, "inputs":
path, "calibration": path or None}``: output agreement instead of a task metric,
calibrated on ``calibration`` or else on the inputs themselves, which the record says).

:func:`precision_table` (a worker job, in one process and CUDA context) runs, in order:

1. the float64 reference on the GPU (:func:`cudnn_rnn.charlm.network.reference_outputs`);
2. calibration: histograms of every GEMM's activation operand in a float64 run on the
   calibration batch, and each method's thresholds per format
   (:mod:`cudnn_rnn.lowbit.calibration`);
3. every cuDNN configuration of the FP32, TF32, FP16 and BF16 families
   (:mod:`cudnn_rnn.matrix.families`), FP32 first (:func:`.rows.cudnn_row`), each verified
   against the reference on the weights and inputs rounded to its data type; the fastest
   verified FP32 one is the baseline the others' agreement and speed-up are measured on.
   The PERSIST_DYNAMIC rows' descriptors are built ahead from the start, beside 1 and 2
   (:func:`dynamic_rows`, :class:`cudnn_rnn.matrix.ahead.Builder`);
4. the GEMM engine in FP16, then INT8 and FP8 E4M3 on each part (input, recurrent, both)
   with each calibration method (:func:`.rows.engine_row`);
5. the persistent kernel in FP16, and on each 8-bit format and part with the calibration
   method that gave the GEMM engine its best task metric (the two engines compute one
   function on one plan: the same twin verifies both).

Each verified record gets its metrics (:func:`metrics`); :func:`.summary.summarise` picks
the rows the table shows.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np

from cudnn_rnn import bindings
from cudnn_rnn.bindings import cublaslt
from cudnn_rnn.charlm import corpus, files, network, statedict
from cudnn_rnn.bindings.enums import RNNAlgo
from cudnn_rnn.charlm.rows import cudnn_config, cudnn_id, cudnn_row, engine_row
from cudnn_rnn.check import reference
from cudnn_rnn.check.verify import relative_error
from cudnn_rnn.engine import dtypes
from cudnn_rnn.engine.descriptors import Handle
from cudnn_rnn.engine.gpu import cupy_or_raise
from cudnn_rnn.engine.values import ValuesCache
from cudnn_rnn.lowbit import calibration, model
from cudnn_rnn.lowbit.operands import FORMAT_PRECISION
from cudnn_rnn.matrix.ahead import Builder
from cudnn_rnn.matrix.families import search_space
from cudnn_rnn.matrix.jobs import job
from cudnn_rnn.matrix.record import objective_ms, objective_speedup

FLOAT_FAMILIES = ("fp32", "tf32", "fp16", "bf16")
INFERENCE = ("forward_inference",)  # the timed objective: one inference forward
FORMAT_FAMILY = FORMAT_PRECISION  # an 8-bit format -> its table family (its precision)
CALIBRATION_SEQ, CALIBRATION_BATCH = network.EVAL_SEQ, 64


@dataclass
class Source:
    name: str
    rnn: statedict.RNNWeights
    x: np.ndarray  # (T, B, input) float64
    x_calibration: np.ndarray | list  # (T, B, input) float64, or a list of such batches
    calibrated_on: str
    charlm: network.CharLM | None = None
    targets: np.ndarray | None = None  # (T, B) codes (the character model)


def load_source(spec: dict) -> Source:
    """The model and batch ``spec`` names (see the module docstring); BadModel if wrong.
    ``spec["seq"]``, when given, cuts the batches to that many steps (a rehearsal's,
    :mod:`cudnn_rnn.matrix.warmup`: the same work on less data; the batch stays whole, as
    the persistent kernel's compiled constants depend on it)."""
    seq = spec.get("seq")
    if "model" in spec:
        m = network.load(spec["model"])
        inputs, targets = corpus.batch(network.slice_codes("heldout"),
                                       seq or network.EVAL_SEQ, network.EVAL_BATCH)
        cal, _ = corpus.batch(network.slice_codes("calibration"),
                              seq or CALIBRATION_SEQ, CALIBRATION_BATCH)
        return Source(f"{m.meta.get('cell', 'model')} character model", m.rnn,
                      network.embed(m, inputs), network.embed(m, cal),
                      "calibration.txt (training text)", m, targets)
    plain = spec.get("plain_cell")  # RNN_RELU is 0: test for None, not for truth
    rnn = statedict.from_state(files.read_weights(spec["weights"]), str(spec["weights"]),
                               plain_cell=statedict.RNNMode.RNN_TANH if plain is None else plain)
    x = files.read_inputs(spec["inputs"]).astype(np.float64)
    cal = x if not spec.get("calibration") else \
        files.read_inputs(spec["calibration"]).astype(np.float64)
    if seq:
        x, cal = x[:seq], cal[:seq]
    for what, a in (("inputs", x), ("calibration", cal)):
        if a.shape[2] != rnn.input_size:
            raise statedict.BadModel(f"{spec.get(what) or spec['inputs']}: the {what} batch has "
                                     f"{a.shape[2]} features per step; the module takes "
                                     f"{rnn.input_size}")
    return Source(str(spec["weights"]), rnn, x, cal,
                  str(spec["calibration"]) if spec.get("calibration") else
                  f"{spec['inputs']} (the inputs themselves: no calibration batch was given)")


def metrics(src: Source, out: dict, base: dict | None, cp) -> dict:
    """The task metric of outputs ``out`` and their agreement with the FP32 baseline's."""
    m = {}
    if src.charlm is not None:
        logits = network.decode(src.charlm, out["y"], cp)
        m.update(network.evaluate(logits, src.targets))
        if base is not None:
            other = network.decode(src.charlm, base["y"], cp)
            m["agreement"] = float((logits.argmax(-1) == other.argmax(-1)).mean())
            m["max_dlogit"] = float(cp.abs(logits - other).max())
    elif base is not None:
        m["error_vs_fp32"] = relative_error(out["y"], base["y"])
        m["max_doutput"] = float(cp.abs(out["y"] - base["y"]).max())
    return m


def _used(thresholds: dict, part: str) -> tuple:
    """The thresholds a plan on ``part`` uses (equal tuples: equal plans)."""
    names = {"input": ("input",), "recurrent": ("recurrent", "projection")}.get(
        part, ("input", "recurrent", "projection"))
    return tuple((n, tuple(thresholds[n])) for n in names)


def held_weights(rnn: statedict.RNNWeights, dt) -> statedict.RNNWeights | None:
    """The module's weights as data type ``dt`` stores them, or None where storing changes
    no value."""
    q = lambda a: None if a is None else dtypes.quantize(np.asarray(a), dt)  # noqa: E731
    params = [reference.LayerParams([q(a) for a in p.W], [q(a) for a in p.R],
                                    [q(a) for a in p.bW], [q(a) for a in p.bR], q(p.P))
              for p in rnn.params]
    if all(np.array_equal(a, b) for a, b in zip(reference.flat_params(params),
                                                 reference.flat_params(rnn.params))):
        return None
    return dataclasses.replace(rnn, params=params)


def held_values(rnn: statedict.RNNWeights, x: np.ndarray, dt) -> tuple | None:
    """(weights, inputs) as data type ``dt`` stores them, or None where storing changes no
    value (FLOAT for the shipped model, trained in FP32): the reference on the original
    values is then already the one on the values held, and is not run again."""
    weights = held_weights(rnn, dt)
    xq = dtypes.quantize(x, dt)
    if weights is None and np.array_equal(xq, x):
        return None
    return weights or rnn, xq


def _ms(rec: dict) -> float | None:
    return objective_ms(rec, INFERENCE)


@job
def precision_table(spec: dict, reps: int = 20, warmup: int = 1, budget_s: float = 0.1,
                    methods: tuple = calibration.METHODS, formats: tuple = model.FORMATS,
                    parts: tuple = model.PARTS, families: tuple = FLOAT_FAMILIES,
                    dynamic: bool = True, rest: bool = True) -> dict:
    """Every configuration's record on ``spec``'s model (see the module docstring);
    :func:`run_table` says what ``families``, ``dynamic`` and ``rest`` leave out."""
    return run_table(load_source(spec), reps, warmup, budget_s, methods, formats, parts,
                     tuple(families), dynamic, rest)


def histograms(rnn: statedict.RNNWeights, stacked_dev: list, batches, cp) -> dict:
    """Every GEMM's activation histograms over the float64 runs of the calibration
    ``batches`` (one (T, B, input) array, or a list of them) from a zero state."""
    batches = batches if isinstance(batches, (list, tuple)) else [batches]

    def run(fn):
        for batch in batches:
            cfg = rnn.config(*batch.shape[:2])
            hx, cx = network.zero_state(cfg, cp)
            model.observe(cfg, stacked_dev, cp.asarray(batch), hx, cx, fn)
    return calibration.collect(run)


CLOSE_S = 60.0  # how long closing the builders waits for a build under way (0.1-2.8 s each)


def dynamic_rows(rnn, T: int, B: int, families: tuple) -> list:
    """``(row id, configuration)`` of the PERSIST_DYNAMIC rows of ``families``, in the order
    :func:`run_table` runs them: what its builder builds ahead (cudnnBuildRNNDynamic, about
    a second a row on the H200, 11 of the shipped LSTM's 56 s)."""
    return [(cudnn_id(c), cudnn_config(rnn, T, B, c)) for family in families
            for c in search_space(family) if c[3] == RNNAlgo.PERSIST_DYNAMIC]


def run_table(src: Source, reps: int = 20, warmup: int = 1, budget_s: float = 0.1,
              methods: tuple = calibration.METHODS, formats: tuple = model.FORMATS,
              parts: tuple = model.PARTS, families: tuple = FLOAT_FAMILIES,
              dynamic: bool = True, rest: bool = True) -> dict:
    """:func:`precision_table` on a loaded source, in this process, with cuDNN's
    configurations of ``families`` only (FP32 first where it is among them: the baseline
    of the metrics' agreement; without it they have none). The PERSIST_DYNAMIC rows'
    builds begin at once, in builder threads, beside the reference and the calibration
    (which need no cuDNN) and the rows before them; none runs while a row is timed, and
    the builders are closed before the engines' rows. Without ``dynamic`` the
    PERSIST_DYNAMIC rows are left out (a rehearsal's table: their builds compile cuDNN's
    kernels, which no cache keeps, and their rows the same CuPy kernels as the others);
    without ``rest`` the engines' FP16-throughout rows (a rehearsal's other than the first:
    their kernels are the same in every one)."""
    cp = cupy_or_raise()
    lib = bindings.load()
    started = time.monotonic()
    T, B, _ = src.x.shape
    wanted = dynamic_rows(src.rnn, T, B, families) if dynamic else []
    builder = Builder(lib) if wanted else None
    try:
        if builder:
            builder.want(wanted)
        return _run(src, lib, cp, builder, started, reps, warmup, budget_s, methods, formats,
                    parts, families, dynamic, rest)
    finally:
        if builder:
            builder.close(CLOSE_S)


def _run(src: Source, lib, cp, builder, started: float, reps: int, warmup: int,
         budget_s: float, methods: tuple, formats: tuple, parts: tuple, families: tuple,
         dynamic: bool, rest: bool) -> dict:
    T, B, _ = src.x.shape
    cfg = src.rnn.config(T, B)
    hx, cx = network.zero_state(cfg, np)
    io = {"x": src.x, "hx": hx} | ({"cx": cx} if cx is not None else {})
    io_dev = {k: cp.asarray(v) for k, v in io.items()}
    chunk = max(1, min(B, (1 << 31) // (T * cfg.hidden_size * 80)))  # the reference's memory
    ref = network.reference_outputs(src.rnn, io_dev["x"], cp, chunk)
    phases = {"reference": round(time.monotonic() - started, 2)}
    # the calibration before cuDNN's rows: it needs no cuDNN, so the builds run beside it
    stacked = model.stack(cfg, src.rnn.params)
    stacked_dev = model.moved(stacked, cp)
    hists = histograms(src.rnn, stacked_dev, src.x_calibration, cp) if formats else {}
    chosen = {fmt: {m: calibration.thresholds(hists, m, fmt) for m in methods} for fmt in formats}
    phases["calibration"] = round(time.monotonic() - started - sum(phases.values()), 2)
    records, base, base_out, held = [], None, None, {}
    arrays = reference.arrays_from_params(cfg, src.rnn.params)
    drawn = ValuesCache()  # the flows' own values, replaced by the model's: drawn once
    with Handle(lib) as handle:
        for family in families:
            kept = []
            for choice in search_space(family):  # FP32 first: the baseline
                if choice[3] == RNNAlgo.PERSIST_DYNAMIC and not dynamic:
                    continue
                dt = choice[0]
                if dt not in held:  # the reference on the values as that data type holds them
                    values = held_values(src.rnn, src.x, dt)
                    held[dt] = ref if values is None else network.reference_outputs(
                        values[0], cp.asarray(values[1]), cp, chunk)
                rec, out = cudnn_row(lib, handle, src.rnn, arrays, io, ref, held[dt], choice,
                                     family, reps, warmup, budget_s, builder, drawn)
                records.append(rec)
                if out is not None and family == "fp32":
                    kept.append((rec, out))  # until the fastest is known
                elif out is not None:
                    rec["metrics"] = metrics(src, out, base_out, cp)
                del out
            if family == "fp32":
                timed = [(r, o) for r, o in kept if _ms(r) is not None]
                base, base_out = min(timed, key=lambda ro: (_ms(ro[0]), ro[0]["id"])) \
                    if timed else (None, None)
                for rec, out in kept:
                    rec["metrics"] = metrics(src, out, base_out, cp)
            del kept
    del held, drawn  # the reference and drawn values of cuDNN's rows: not the engines'
    if builder:  # every build taken or destroyed: none beside the engines' timed calls
        builder.close(CLOSE_S)
    phases["cudnn"] = round(time.monotonic() - started - sum(phases.values()), 2)
    head = [(None, None, None)] if rest else []  # FP16 throughout first
    runs = head + [(f, p, m) for f in formats for p in parts for m in methods]
    done: dict = {}
    twins: dict = {}
    for fmt, part, method in runs:
        key = fmt and (fmt, part, _used(chosen[fmt][method], part))
        if key in done:  # another method chose the same thresholds: the same plan and run
            rec = dict(done[key], id=f"lowbit/{fmt}/{part}/{method}", calibration=method,
                       same_run_as=done[key]["id"])
            records.append(rec)
            continue
        rec, out = engine_row(cfg, stacked, stacked_dev, io_dev, ref, fmt, part, method,
                              chosen[fmt][method] if fmt else None, reps, warmup, budget_s,
                              twins=twins)
        if out is not None:
            rec["metrics"] = metrics(src, out, base_out, cp)
        records.append(rec)
        if key:
            done[key] = rec
    phases["engine"] = round(time.monotonic() - started - sum(phases.values()), 2)
    for fmt, part, method in head + [
            (f, p, best_method(records, f, p)) for f in formats for p in parts]:
        if fmt and method is None:
            continue  # the GEMM engine verified no method of this plan
        rec, out = engine_row(cfg, stacked, stacked_dev, io_dev, ref, fmt, part, method,
                              chosen[fmt][method] if fmt else None, reps, warmup, budget_s,
                              engine="persistent", twins=twins)
        if out is not None:
            rec["metrics"] = metrics(src, out, base_out, cp)
        records.append(rec)
    phases["persistent"] = round(time.monotonic() - started - sum(phases.values()), 2)
    ref_metrics = metrics(src, ref, base_out, cp)
    return {"source": {"name": src.name, "calibrated_on": src.calibrated_on,
                       "task": "next character" if src.charlm is not None else None,
                       "shape": cfg.as_record()["shape"] | {"cell": cfg.mode.name,
                                                           "direction": cfg.direction.name},
                       "recorded": (src.charlm.meta.get("heldout") if src.charlm else None)},
            "reference": ref_metrics, "baseline": base["id"] if base else None,
            "thresholds": chosen, "records": records, "phases_s": phases,
            "methods": list(methods), "formats": list(formats), "parts": list(parts),
            "wall_s": round(time.monotonic() - started, 2),
            "library": lib.describe(), "cublaslt": _cublaslt()}


def method_score(rec: dict) -> float:
    """How well a verified row's calibration did, lower is better: its task metric (bits per
    character), else its error against the FP32 baseline, else (no FP32 baseline ran) its
    largest error against the float64 reference."""
    m = rec.get("metrics") or {}
    if "bpc" in m or "error_vs_fp32" in m:
        return m.get("bpc", m.get("error_vs_fp32"))
    return max(rec["errors"].values())


def best_method(records: list, fmt: str, part: str) -> str | None:
    """The calibration method whose GEMM-engine row of ``fmt`` on ``part`` verified with the
    best :func:`method_score`."""
    mine = [r for r in records if r.get("engine") == "cuBLASLt" and r.get("format") == fmt
            and r.get("parts") == part and r["outcome"] == "OK"]
    if not mine:
        return None
    return min(mine, key=lambda r: (method_score(r),
                                    calibration.METHODS.index(r["calibration"])))["calibration"]


def _cublaslt() -> dict | None:
    try:
        return cublaslt.load().describe()
    except Exception as exc:  # the engine's rows then carry the same failure
        return {"error": str(exc)}


def speedup(base: dict | None, rec: dict) -> float | None:
    """The FP32 baseline's time over ``rec``'s, replays over replays where both were
    captured, else plain over plain."""
    return objective_speedup(base, rec, INFERENCE)
