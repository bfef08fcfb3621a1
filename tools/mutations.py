"""Mutation checks of the verifier: deliberate mistakes, each of which a test must catch.

Every figure of this project stands on the verification, so the verification's own
mistakes must show. Each mistake in :data:`MUTATIONS` is an exact-text patch of one file
(the text must occur exactly once), applied to a temporary copy of the repository, never to
the working tree, and undone before the next. The tests named for it run in the copy; the
mistake is *caught* if at least one of them fails. Before any mistake, the same tests run
on the unpatched copy and must all pass: a test that fails anyway catches nothing.

    python tools/mutations.py           # each mistake against its CPU tests (CI, via
                                        #   tests/test_mutations.py)
    python tools/mutations.py --gpu     # against its GPU tests too (needs a GPU)
    python tools/mutations.py --suite   # against every CPU test (slow): who else catches it
    python tools/mutations.py --list    # the mistakes and their tests; runs nothing

Prints a markdown table, mistake -> the tests that caught it (or NOT CAUGHT), and exits 1
if a mistake that ran was not caught, 2 if the check itself could not run (a patch that
does not match exactly once, a named test that is missing or does not pass unpatched).
A mistake with no CPU test is GPU-only: without ``--gpu`` it is listed, not run.

Loaded by pytest as a plugin (``-p mutations``), this module records each test's outcome
in the file that ``$MUTATIONS_OUTCOMES`` names.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTCOMES = "MUTATIONS_OUTCOMES"  # the plugin's output file, named in the environment
NOT_COPIED = (".git", ".venv", ".venv-*", "__pycache__", ".pytest_cache", ".hypothesis",
              "*.egg-info", "runs", "reports", "build", ".device", ".whl")


@dataclass(frozen=True)
class Mutation:
    """One deliberate mistake: ``old`` replaced by ``new`` in ``path``, and the tests
    (pytest node ids) that should catch it without a GPU (``cpu``) and with one (``gpu``)."""
    mistake: str
    path: str
    old: str
    new: str
    cpu: tuple[str, ...] = ()
    gpu: tuple[str, ...] = ()


VERIFY = "cudnn_rnn/check/verify.py"
REFERENCE = "cudnn_rnn/check/reference.py"
T_VERIFY = "tests/test_verify.py::"
T_LOWBIT = "tests/test_lowbit_candidates.py::"
T_CAPTURE = "tests/test_capture.py::"
T_GPU_FLOW = "tests/test_gpu_flow.py::"
KINK_FAILS = ("tests/test_kinks.py::test_a_derivative_on_the_other_side_of_zero_fails_the_"
              "plain_check_and_passes_the_recheck")
TOLERANCES_MEASURED = (T_VERIFY + "test_each_tolerance_sits_a_few_times_above_the_errors_"
                       "the_h200_measured")
GPU_LSTM = T_GPU_FLOW + "test_outputs_and_gradients_match_the_reference[LSTM-UNI-1-FLOAT/FMA]"
GPU_GRU = T_GPU_FLOW + "test_outputs_and_gradients_match_the_reference[GRU-BID-2-FLOAT/FMA]"

MUTATIONS = (
    Mutation(
        "the verification's error function returns 0 for every output",
        VERIFY,
        "    if not bool(xp.all(xp.isfinite(out))):\n        return float(\"inf\")\n",
        "    return 0.0\n",
        cpu=(T_VERIFY + "test_the_error_is_the_relative_frobenius_norm", KINK_FAILS),
        gpu=(T_GPU_FLOW + "test_unwritten_outputs_are_caught_by_the_poison",)),
    Mutation(
        "the 8-bit engine's error function (lowbit.candidates.errors) returns 0",
        "cudnn_rnn/lowbit/candidates.py",
        "{n: relative_error(out[n], ref[n]) for n in OUTPUTS",
        "{n: 0.0 for n in OUTPUTS",
        cpu=(T_LOWBIT + "test_errors_are_relative_norms_of_the_outputs_the_reference_has",
             T_LOWBIT + "test_an_engine_that_computes_wrongly_is_a_wrong_result_and_not_timed"
                        "[NoBias-int8/both]"),
        gpu=("tests/test_gpu_lowbit.py::test_every_cell_verifies_twice_and_replays_bit_for_bit"
             "[LSTM-UNI]",)),
    Mutation(
        "a tolerance multiplied by 100 (true FP32: FLOAT/FLOAT/FMA)",
        VERIFY,
        "(DataType.FLOAT, DataType.FLOAT, MathType.FMA_MATH): (5e-5, 5e-5, 5e-5)",
        "(DataType.FLOAT, DataType.FLOAT, MathType.FMA_MATH): (5e-3, 5e-3, 5e-3)",
        cpu=(TOLERANCES_MEASURED,)),
    Mutation(
        "a tolerance multiplied by 100 (FP16 storage, FP32 math: HALF/FLOAT)",
        VERIFY,
        "(DataType.HALF, DataType.FLOAT, None): (5e-3, 5e-3, 1e-1)",
        "(DataType.HALF, DataType.FLOAT, None): (5e-1, 5e-1, 1e1)",
        cpu=(TOLERANCES_MEASURED,)),
    Mutation(
        "a weight layout off by one gate (cuDNN's linLayerIDs read one gate further)",
        REFERENCE,
        '            W=[get(k, "matrix") for k in range(g)],\n'
        '            R=[get(g + k, "matrix") for k in range(g)],\n',
        '            W=[get((k + 1) % g, "matrix") for k in range(g)],\n'
        '            R=[get(g + (k + 1) % g, "matrix") for k in range(g)],\n',
        cpu=("tests/test_weight_layout.py::test_a_model_cudnn_trained_reads_back_gate_for_gate"
             "[lstm]",
             "tests/test_lengths.py::test_the_check_uses_the_lengths_and_observes_padded_dx"),
        gpu=(GPU_LSTM, GPU_GRU)),
    Mutation(
        "the reference skips the input bias (bW)",
        REFERENCE,
        "            a = a + bW\n",
        "            a = a\n",
        cpu=("tests/test_reference.py::test_forward_matches_a_naive_implementation"
             "[base-LSTM]",),
        gpu=(GPU_LSTM,)),
    Mutation(
        "an accelerated module's 8-bit runner judged without its quantized twin "
        "(cudnn_rnn.torch.verify)",
        "cudnn_rnn/torch/verify.py",
        'check_outputs(out, ref, twin, TWIN_BOUNDS[candidate.fmt], "float64 twin",',
        'check_outputs(out, ref, None, TWIN_BOUNDS[candidate.fmt], "float64 twin",',
        cpu=("tests/test_torch_state.py::test_an_8bit_engines_arithmetic_passes_and_its_"
             "unquantized_network_does_not[LSTM]",)),
    Mutation(
        "an accelerated module's runner not held to the user's tolerance (cudnn_rnn.torch)",
        "cudnn_rnn/torch/verify.py",
        "    if why is None and not worst <= tolerance:\n",
        "    if why is None and not worst <= 1e9 * tolerance:\n",
        cpu=("tests/test_torch_state.py::test_an_engine_within_its_bound_but_outside_the_"
             "users_tolerance_fails_saying_so",)),
    Mutation(
        "the accelerated module's choice ranks rows outside the tolerance (cudnn_rnn.torch)",
        "cudnn_rnn/torch/ranking.py",
        "            and err <= limit)",
        "            and err <= 1e9 * limit)",
        cpu=("tests/test_torch_ranking.py::test_the_choice_is_the_fastest_eligible_row_within_"
             "the_tolerance[0.01-auto]",)),
    Mutation(
        "the INT8 quantizer rounds toward zero instead of to nearest",
        "cudnn_rnn/lowbit/quant.py",
        "xp.clip(xp.rint(x / scale), -INT8_MAX, INT8_MAX)",
        "xp.clip(xp.trunc(x / scale), -INT8_MAX, INT8_MAX)",
        cpu=("tests/test_quant.py::test_int8_rounds_half_to_even_and_clips_symmetrically",),
        gpu=("tests/test_gpu_lowbit.py::test_quantizer_kernel_rounds_as_the_host_rules"
             "[int8]",)),
    Mutation(
        "a CUDA-graph replay compared with the plain call instead of the replay",
        "cudnn_rnn/engine/capture.py",
        "_written(flow, lambda: graph.launch(flow.stream), present,",
        "_written(flow, lambda: call(flow), present,",
        cpu=(T_CAPTURE + "test_a_replay_that_writes_other_bytes_is_refused",
             T_CAPTURE + "test_an_output_the_replay_leaves_unwritten_is_refused")),
    Mutation(
        "the flow's weights drawn 7x too wide (engine.values)",
        "cudnn_rnn/engine/values.py",
        "    scale = 1.0 / np.sqrt(cfg.hidden_size)\n",
        "    scale = 7.0 / np.sqrt(cfg.hidden_size)\n",
        cpu=("tests/test_values_draw.py::test_random_weights_are_uniform_within_one_over_root_"
             "hidden[FLOAT]",),
        gpu=("tests/test_gpu_values.py::test_the_weight_space_holds_what_the_reference_is_"
             "given[FLOAT]",)),
    Mutation(
        "the reference's and the 8-bit engine's weights drawn 7x too wide "
        "(check.reference.random_params)",
        REFERENCE,
        "s = scale if scale is not None else 1.0 / np.sqrt(cfg.hidden_size)",
        "s = scale if scale is not None else 7.0 / np.sqrt(cfg.hidden_size)",
        cpu=("tests/test_lowbit_engine.py::test_draws_are_float32_exact_and_the_calibration_"
             "batch_is_another",)),
)


# ------------------------------------------------------------------------ the pytest plugin
def pytest_runtest_logreport(report) -> None:
    """Each test's outcome, one JSON line per phase that did not just pass, and the call's."""
    path = os.environ.get(OUTCOMES)
    if path and (report.when == "call" or report.outcome != "passed"):
        with open(path, "a") as fh:
            fh.write(json.dumps([report.nodeid, report.when, report.outcome]) + "\n")


def pytest_sessionfinish(session) -> None:
    """Where the package under test was imported from (the copy, or the check is void)."""
    path = os.environ.get(OUTCOMES)
    package = sys.modules.get("cudnn_rnn")
    if path and package is not None:
        with open(path, "a") as fh:
            fh.write(json.dumps(["<package>", "", package.__file__]) + "\n")


# ------------------------------------------------------------------------ running tests
class CheckFailed(RuntimeError):
    """The mutation check itself could not run; the message says why."""


def outcomes_of(lines: list[str]) -> tuple[dict, str | None]:
    """({node id: passed | failed | error | skipped}, the package's file) from the plugin's
    lines. A failing call is *failed*; a failing setup or teardown is *error*."""
    status, package = {}, None
    for nodeid, when, outcome in (json.loads(x) for x in lines if x.strip()):
        if nodeid == "<package>":
            package = outcome
        elif outcome == "failed":
            status[nodeid] = "failed" if when == "call" else "error"
        elif nodeid not in status or status[nodeid] == "passed":
            status[nodeid] = outcome
    return status, package


def run_tests(copy: Path, args: list[str]) -> dict:
    """Run pytest in ``copy`` with ``args``; each test's outcome by node id."""
    record = copy / ".mutations-outcomes.jsonl"
    record.unlink(missing_ok=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(copy), str(copy / "tools")]),
               PYTHONDONTWRITEBYTECODE="1", CUDNN_RNN_HOME=str(copy / ".home"),
               **{OUTCOMES: str(record)})
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "mutations",
           "--no-header", "-o", "addopts=", *args]
    proc = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True)
    status, package = outcomes_of(record.read_text().splitlines() if record.exists() else [])
    if package is None or not Path(package).resolve().is_relative_to(copy.resolve()):
        raise CheckFailed(f"pytest in the copy imported cudnn_rnn from {package}, not from "
                          f"the copy (exit {proc.returncode}): {proc.stdout[-800:]}"
                          f"{proc.stderr[-800:]}")
    return status


def copy_repository(into: Path) -> Path:
    copy = into / "repo"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(*NOT_COPIED), symlinks=True)
    return copy


def patched(text: str, m: Mutation) -> str:
    count = text.count(m.old)
    if count != 1:
        raise CheckFailed(f"{m.path}: the text of '{m.mistake}' occurs {count} times, not "
                          f"once; update tools/mutations.py to the code: {m.old!r}")
    return text.replace(m.old, m.new)


def with_mutation(copy: Path, m: Mutation, args: list[str]) -> dict:
    """The outcomes of ``args`` in ``copy`` with ``m`` applied; the file restored after."""
    target = copy / m.path
    original = target.read_text()
    target.write_text(patched(original, m))
    try:
        return run_tests(copy, args)
    finally:
        target.write_text(original)


# ------------------------------------------------------------------------ the check
def tests_of(m: Mutation, gpu: bool) -> list[str]:
    return list(m.cpu) + (list(m.gpu) if gpu else [])


SUITE = ["tests", "-m", "not gpu", "--ignore=tests/test_mutations.py"]


def check_baseline(copy: Path, mutations, gpu: bool, suite: bool) -> set:
    """Run the named tests (or the CPU suite) unpatched: :class:`CheckFailed` unless each
    named one passes. The node ids that passed."""
    named = sorted({t for m in mutations for t in tests_of(m, gpu)})
    status = run_tests(copy, SUITE if suite else named)
    wrong = {t: status.get(t, "not found") for t in named if status.get(t) != "passed"}
    if wrong:
        raise CheckFailed("unpatched, these named tests do not pass, so they catch nothing: "
                          + "; ".join(f"{t} ({s})" for t, s in wrong.items()))
    return {t for t, s in status.items() if s == "passed"}


def check(mutations, gpu: bool = False, suite: bool = False, log=print) -> list[dict]:
    """Each mutation's row: the mistake, the file, what ran and what failed."""
    for m in mutations:  # every patch must match before anything runs
        patched((ROOT / m.path).read_text(), m)
    rows = []
    with tempfile.TemporaryDirectory(prefix="cudnn-rnn-mutations-") as tmp:
        copy = copy_repository(Path(tmp))
        passing = check_baseline(copy, mutations, gpu, suite)
        for m in mutations:
            named = tests_of(m, gpu)
            if not named and not suite:
                rows.append({"mutation": m, "ran": [], "caught": None})
                continue
            status = with_mutation(copy, m, SUITE if suite else named)
            caught = sorted(t for t, s in status.items() if s in ("failed", "error")
                            and t in passing)
            rows.append({"mutation": m, "ran": named, "caught": caught})
            found = f"caught by {len(caught)}" if caught else "NOT CAUGHT"
            log(f"  {m.mistake}: {found}", file=sys.stderr)
    return rows


def verdict(row: dict) -> str:
    m = row["mutation"]
    if row["caught"] is None:
        return f"GPU-only, not run (--gpu runs {', '.join(m.gpu) or 'nothing: none listed'})"
    if not row["caught"]:
        return "NOT CAUGHT (ran " + ", ".join(row["ran"]) + ")"
    return "<br>".join(row["caught"])


def gpu_column(m: Mutation, gpu: bool) -> str:
    """The GPU tests listed for ``m``: run with --gpu (so among the failures), else named."""
    if not m.gpu:
        return "none listed"
    return "ran (above)" if gpu else "not run: " + "<br>".join(m.gpu)


def table(rows: list[dict], gpu: bool = False) -> str:
    lines = ["| mistake | file | caught by (failed) | GPU tests (--gpu) |",
             "|---|---|---|---|"]
    lines += [f"| {r['mutation'].mistake} | `{r['mutation'].path}` | {verdict(r)} | "
              f"{gpu_column(r['mutation'], gpu)} |" for r in rows]
    return "\n".join(lines)


def listing(mutations) -> str:
    out = []
    for m in mutations:
        out.append(f"- {m.mistake} (`{m.path}`)")
        out += [f"    - CPU: {t}" for t in m.cpu] + [f"    - GPU: {t}" for t in m.gpu]
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="tools/mutations.py", description=__doc__.splitlines()[0])
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--gpu", action="store_true", help="also run each mistake's GPU tests")
    scope.add_argument("--suite", action="store_true",
                       help="run every CPU test against each mistake, not the named ones")
    p.add_argument("--list", action="store_true", help="list the mistakes and their tests")
    p.add_argument("--only", default=None,
                   help="the mistakes whose description contains this text")
    args = p.parse_args(argv)
    chosen = [m for m in MUTATIONS if args.only is None or args.only in m.mistake]
    if not chosen:
        p.error(f"--only {args.only!r}: no mistake's description holds it (see --list)")
    if args.list:
        print(listing(chosen))
        return 0
    try:
        rows = check(chosen, gpu=args.gpu, suite=args.suite)
    except CheckFailed as exc:
        print(f"mutations: {exc}", file=sys.stderr)
        return 2
    print(table(rows, args.gpu))
    return 1 if any(r["caught"] == [] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
