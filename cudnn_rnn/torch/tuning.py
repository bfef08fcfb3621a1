"""``accelerate(module, example, ...)``: the fastest verified configuration of a user's
``torch.nn.LSTM``/``GRU``/``RNN``, as a module; ``load(path, module)``: a saved one, without
tuning.

What :func:`accelerate` does, in the user's process and CUDA context:

1. refuses in one line what it does not take (:class:`~cudnn_rnn.torch.errors.NotAccelerated`):
   no PyTorch, not such a module, an unknown precision, a tolerance that is not a positive
   number, no usable GPU, a module on the CPU;
2. maps the module's weights onto cuDNN's layout (:mod:`.modules`, through
   :mod:`cudnn_rnn.charlm.statedict`) and checks the mapping: the module's own forward in
   float64 on the example must equal the float64 reference on the mapped weights (a module
   whose forward is not its class's is refused);
3. runs the precision table's job on the module's weights and the example
   (:func:`cudnn_rnn.charlm.table.run_table`: cuDNN's configurations of the precision's
   families, and the GEMM engine and the persistent kernel in FP16 and in the precision's
   8-bit formats, calibrated on the calibration batches), each row verified and timed;
4. keeps the fastest eligible row within the tolerance of the module in float64
   (:mod:`.ranking`), or refuses in one line saying how near the nearest came; the module
   it returns is verified on the example and on every calibration batch as well (a choice
   that does not hold on a batch gives way to the next eligible row);
5. times the module itself and the accelerated module, eager and in a CUDA graph, in the
   same process (:mod:`.timing`).
"""
from __future__ import annotations

import copy
import time

from cudnn_rnn import bindings
from cudnn_rnn.charlm import network, table
from cudnn_rnn.engine import gpu
from cudnn_rnn.lowbit.candidates import errors
from cudnn_rnn.torch import inputs, modules, ranking, report, runners, timing
from cudnn_rnn.torch.errors import BadPlan, NotAccelerated
from cudnn_rnn.torch.plan import Candidate, Plan, describe_machine, machine
from cudnn_rnn.torch.shapes import position
from cudnn_rnn.torch.verify import chunk
from cudnn_rnn.tune import cost_ms

MAPPING_BOUND = 1e-9  # the module's float64 forward against the reference on its weights
TORCH_HINT = "pip install 'cudnn-rnn[torch]' (or any PyTorch with CUDA)"


def torch_or_refuse():
    """The torch module, or :class:`NotAccelerated` saying it is not importable."""
    try:
        import torch
    except ImportError as exc:
        raise NotAccelerated(f"cudnn_rnn.torch needs PyTorch, which is not importable here "
                             f"({exc}): {TORCH_HINT}") from None
    return torch


def _device(module, torch):
    """The module's device where this machine can run it there; else NotAccelerated."""
    params = list(module.parameters())
    device = params[0].device if params else torch.device("cpu")
    why = modules.device_refusal(device.type, gpu.unavailable_reason())
    if why:
        raise NotAccelerated(why)
    return device


def accelerate(module, example, precision: str = "auto", calibration=None,
               tolerance: float = 1e-2, *, methods=None, reps: int = 20,
               budget_s: float = 0.1):
    """The fastest configuration of ``module`` that verifies within ``tolerance`` (relative
    error of every output against the module in float64) at ``example``'s shape, as a
    ``torch.nn.Module`` (see the module docstring and docs/torch.md). ``precision``: one of
    :data:`~cudnn_rnn.torch.ranking.PRECISIONS`; ``calibration``: a tensor or a list of
    tensors the 8-bit scales are calibrated on (None: the example); ``methods``: the
    calibration methods tried (a name or a list; None: every one, the most accurate kept);
    ``reps``, ``budget_s``: the most timed calls and about the device time of each
    measurement."""
    torch = torch_or_refuse()
    spec = modules.inspect(module)
    prec = ranking.precision(precision)
    limit = ranking.tolerance(tolerance)
    tried = ranking.methods(methods)
    device = _device(module, torch)
    cp = gpu.cupy_or_raise()
    with cp.cuda.Device(device.index):
        cudnn_or_refuse()
        return _tune(module, spec, example, precision, prec, calibration, limit, device,
                     torch, cp, reps, budget_s, tried)


def cudnn_or_refuse() -> dict:
    """The loaded cuDNN's provenance, or :class:`NotAccelerated` saying it is not loadable."""
    try:
        return bindings.load().describe()
    except bindings.errors.LibraryNotFound as exc:
        raise NotAccelerated(f"cuDNN is not loadable here ({exc}): install the project's "
                             f"CUDA extra") from None


def _tune(module, spec, example, name, prec, calibration, limit, device, torch, cp, reps,
          budget_s, methods):
    started = time.monotonic()
    state = modules.state_arrays(module)
    rnn = modules.weights(state, spec)
    x, made = inputs.example_batch(example, spec, device, torch)
    cal, calibrated_on = inputs.calibration_batches(calibration, spec, device, torch)
    check_mapping(module, spec, rnn, x, torch, cp)
    host = lambda t: t.detach().double().cpu().numpy()  # noqa: E731
    src = table.Source("the module", rnn, host(x), [host(b) for b in cal] if cal else host(x),
                       calibrated_on)
    result = table.run_table(src, reps, 1, budget_s, methods=methods, formats=prec.formats,
                             families=prec.families)
    # the table's freed arrays stay in CuPy's pool until returned: back to the device, for
    # the user's own allocator and cuDNN's (at LSTM 50/1/4096/256 on an H100 the process
    # filled the card's 80 GB during the table and held 39 GB through its last rows)
    cp.get_default_memory_pool().free_all_blocks()
    records = result["records"]
    mine, fallbacks = ranking.ranked(records, prec, limit)
    if not mine:
        raise NotAccelerated(ranking.refusal(records, name, prec, limit, tuple(x.shape[:2])))
    candidates = [Candidate.from_record(r, cost_ms(r, False), cost_ms(r, False, plain=True),
                                        result["thresholds"]) for r in mine + fallbacks]
    plan = Plan(spec, modules.digest(state), tuple(x.shape[:2]), name, limit, candidates,
                report={"rows": report.rows(records, ranking.statuses(records, prec, limit)),
                        "example": made, "calibrated_on": calibrated_on,
                        "run": {"tuning_s": None, "phases_s": result["phases_s"],
                                "library": result["library"], "cublaslt": result["cublaslt"],
                                "device": gpu.device_info()}})
    fast = _accelerated(plan, rnn, device)
    given = x.transpose(0, 1) if spec.batch_first else x
    training = module.training
    try:
        fast(given)  # the example's shape made and verified before anything is timed
        left = settle(fast, len(mine), name)
        plan.report["calibration_errors"] = hold_on_calibration(fast, given, cal, spec, left,
                                                                name)
        torch.cuda.synchronize(device)
        module.eval()  # timed as verified (and as inference runs): not the training path
        plan.report["times"] = {
            "module": timing.times(timing.step_of(module, given, torch), reps, budget_s),
            "accelerated": timing.times(timing.step_of(fast, given, torch), reps, budget_s,
                                        ours=True)}
        try:  # the timed calls' launches (a persistent kernel that gave up a wait among them
            # sets a status only a check reads) and outputs, checked again after the timing
            plan.report["checked_after_timing"] = fast.verify(given).get("errors")
        except (NotAccelerated,) + runners.run_errors(gpu.cupy_or_raise()) as exc:
            raise NotAccelerated(f"the choice failed its check after it was timed: "
                                 f"{type(exc).__name__}: {exc}") from None
    except BaseException:  # a refusal, an error, an interrupt: no runner left behind
        fast.close()
        raise
    finally:
        module.train(training)
    plan.report["run"]["tuning_s"] = round(time.monotonic() - started, 2)
    return fast


def settle(fast, eligible: int, name: str) -> int:
    """The example's shape runs the first candidate that built and verified inside ``fast``
    on the example's tensors, which need not be the ranking's first (it verified in the
    ranking's own run). The first that did becomes the choice, and the table's rows of those
    before it say why they were passed over; when only a fallback (cuDNN in a precision not
    asked for: ``eligible`` candidates come first) served, NotAccelerated. The eligible
    candidates left, the choice first."""
    plan = fast.plan
    entry = fast.serving(plan.shape)
    at = position(plan.candidates, entry.candidate)
    if at == 0:
        return eligible
    if at >= eligible:
        raise NotAccelerated(
            f"none of the {eligible} {name} configurations verified in the ranking served the "
            f"module at seq {plan.shape[0]}, batch {plan.shape[1]} ("
            + "; ".join(entry.passed_over[:eligible]) + "); try precision='auto'")
    reasons = {c.id: why for c, why in zip(plan.candidates[:at], entry.passed_over)}
    fast.choose(entry.candidate)
    plan.report["rows"] = report.passed_over(plan.report.get("rows", []), reasons,
                                             entry.candidate.id)
    return eligible - at


def hold_on_calibration(fast, given, batches, spec, eligible: int, name: str) -> list | None:
    """:func:`verify_calibration` of the choice; where it does not hold, the next of the
    ``eligible`` candidates becomes the choice (the example's shape made again with it,
    :func:`settle`) and is checked the same way, so what is kept is the fastest that holds
    on the example and on every calibration batch; the table's rows of those passed over
    say why. NotAccelerated, with each one's reason, when none holds."""
    if not batches:
        return None
    failed: dict = {}  # id -> (label, why)
    while True:
        try:
            errors = verify_calibration(fast, batches, spec)
            break
        except NotAccelerated as exc:
            failed[fast.plan.choice.id] = (fast.plan.choice.label, str(exc))
        held = "; ".join(f"{label}: {why}" for label, why in failed.values())
        if eligible <= 1:
            raise NotAccelerated(
                f"none of the {name} configurations that verified on the example held on "
                f"every calibration batch ({held}); give a larger tolerance or another "
                f"precision")
        fast.forget()  # the shapes made with the choice that did not hold
        fast.choose(fast.plan.candidates[1])
        try:
            fast(given)
            eligible = settle(fast, eligible - 1, name)
        except NotAccelerated as exc:  # the rest did not serve the example here
            raise NotAccelerated(f"{exc}; before them, on the calibration batches: "
                                 f"{held}") from None
    if failed:
        fast.plan.report["rows"] = report.passed_over(
            fast.plan.report.get("rows", []), {i: why for i, (_, why) in failed.items()},
            fast.plan.choice.id)
    return errors


def verify_calibration(fast, batches, spec) -> list | None:
    """The largest error against the module in float64 of the module ``fast`` on each
    calibration batch (each verified as a shape's first call is, by the choice itself);
    NotAccelerated if one is outside the tolerance or the choice does not serve its shape
    (the 8-bit scales came from these batches: a choice that does not hold on them is not
    handed back)."""
    if not batches:
        return None
    out = []
    for i, batch in enumerate(batches):
        try:
            facts = fast.verify(batch.transpose(0, 1) if spec.batch_first else batch,
                                choice_only=True)
        except NotAccelerated as exc:
            raise NotAccelerated(f"verified on the example but not on calibration batch {i}: "
                                 f"{exc}") from None
        out.append(max(facts["errors"].values()))
    return out


def check_mapping(module, spec, rnn, x, torch, xp) -> None:
    """:class:`NotAccelerated` unless the module's own forward in float64 on ``x`` (seq,
    batch, input) equals the float64 reference on its mapped weights (run by ``xp``: cupy
    for a module on the GPU, numpy for one on the CPU)."""
    try:
        m64 = copy.deepcopy(module).double().eval()
        with torch.no_grad():
            y, st = m64(x.double().transpose(0, 1) if spec.batch_first else x.double())
    except (RuntimeError, TypeError) as exc:
        raise NotAccelerated(f"the module could not run in float64 to be verified against "
                             f"({type(exc).__name__}: {exc})") from None
    y = y.transpose(0, 1) if spec.batch_first else y
    h, c = st if spec.cell == "LSTM" else (st, None)
    dev = lambda t: None if t is None else xp.from_dlpack(t.contiguous())  # noqa: E731
    ref = network.reference_outputs(rnn, dev(x.double()), xp, chunk(x.shape[0], spec.hidden))
    errs = errors({"y": dev(y), "hy": dev(h), "cy": dev(c)}, ref)
    worst = max(errs.values())
    if not worst <= MAPPING_BOUND:
        raise NotAccelerated(f"the module's own float64 forward differs from the reference "
                             f"on its weights by {worst:.3g} (relative): its forward is not "
                             f"torch.nn.{type(module).__name__}'s, which is all this "
                             f"package runs")


def _accelerated(plan, rnn, device):
    from cudnn_rnn.torch.module import Accelerated  # imports torch: only once it is needed
    return Accelerated(plan, rnn, device)


def load(path, module, *, tuned_elsewhere: bool = False):
    """The accelerated module a plan file describes, for ``module`` (the module it was made
    for: the same structure, data type and weights, else
    :class:`~cudnn_rnn.torch.errors.BadPlan`); no tuning, each shape verified on first use.
    A plan tuned on another GPU model or cuDNN version is BadPlan too (its ranking and times
    are that machine's) unless ``tuned_elsewhere``: then its candidates run here, each
    verified on first use, and its table says where it was tuned."""
    torch = torch_or_refuse()
    spec = modules.inspect(module)
    plan = Plan.load(path)
    if plan.module != spec:
        raise BadPlan(f"{path} was made for a {plan.module.describe()}; this module is a "
                      f"{spec.describe()}: tune it with accelerate()")
    state = modules.state_arrays(module)
    if modules.digest(state) != plan.digest:
        raise BadPlan(f"{path} was made for other weights of the same shape (their sha256 "
                      f"differs): tune this module with accelerate()")
    device = _device(module, torch)
    cp = gpu.cupy_or_raise()
    with cp.cuda.Device(device.index):
        here = machine(gpu.device_info(), cudnn_or_refuse())
        there = plan.tuned_on()
        if here != there and not tuned_elsewhere:
            raise BadPlan(f"{path} was tuned on {describe_machine(there)}; this is "
                          f"{describe_machine(here)}: tune here with accelerate(), or "
                          f"load(path, module, tuned_elsewhere=True) to run its candidates "
                          f"(each verified on first use) with that machine's ranking")
        return _accelerated(plan, modules.weights(state, spec), device)

