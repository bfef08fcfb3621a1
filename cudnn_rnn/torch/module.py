"""The accelerated module: a ``torch.nn.Module`` (inference) that runs a plan's verified
configuration on PyTorch's tensors, on PyTorch's current stream.

A call at a shape it has not seen makes that shape's runner (:mod:`.shapes`: the plan's
candidates in order, each built and run on the call's own inputs, then verified against the
module's float64 reference, :mod:`.verify`); that first call synchronises, so make it before
capturing a CUDA graph (as PyTorch's own warm-up on a side stream does). Later calls at the
shape enqueue the runner's work and nothing else: they can be captured by
``torch.cuda.graph`` and replayed.

State: ``hx`` in (``(h_0, c_0)`` for an LSTM), ``h_n`` (and ``c_n``) out, as PyTorch's
modules take and return them, so a long sequence streamed in chunks, each call given the
last one's state, equals one call (unidirectional modules: a bidirectional one's reverse
direction starts at each chunk's end, in PyTorch's module as here).
"""
from __future__ import annotations

import torch
from torch.nn.utils.rnn import PackedSequence

from cudnn_rnn.engine.gpu import cupy_or_raise, external_stream
from cudnn_rnn.engine import packing
from cudnn_rnn.torch import calls, report, runners, verify
from cudnn_rnn.torch.errors import BadCall, NotAccelerated
from cudnn_rnn.torch.shapes import Attempt, Plans, describe, packed_lengths


class Accelerated(torch.nn.Module):
    """What :func:`~cudnn_rnn.torch.accelerate` returns (or :func:`~cudnn_rnn.torch.load`):
    call it as the module it accelerates. ``choice``, ``table()``, ``save(path)``,
    ``shapes()``, ``verify(x)``."""

    def __init__(self, plan, rnn, device):
        super().__init__()
        self.plan = plan
        self._rnn = rnn  # float64 weights in cuDNN's layout: the runners' and the reference's
        self._device = torch.device(device)
        self._plans = Plans(plan.candidates)
        self._cp = cupy_or_raise()
        self._streams: dict = {}

    # ------------------------------------------------------------------ what it shows
    @property
    def choice(self) -> report.Choice:
        """What runs at the example's shape and why (print it)."""
        return report.Choice.of(self.plan)

    def table(self) -> str:
        """The ranking the choice came from and the module's own times."""
        return report.table(self.plan)

    def save(self, path):
        """The plan as JSON in ``path`` (:func:`~cudnn_rnn.torch.load` reads it back)."""
        return self.plan.save(path)

    def shapes(self) -> list[dict]:
        """Each shape made so far: what runs it, its verification at first use, and why the
        candidates before it did not serve."""
        return [{"shape": describe(key), "runs": e.candidate.label, "verified": e.facts,
                 "passed_over": e.passed_over} for key, e in self._plans.entries()]

    def serving(self, shape: tuple):
        """What runs ``shape`` ((seq, batch)): its :class:`~cudnn_rnn.torch.shapes.Entry`
        (the candidate, its verification, why those before it did not serve), or None
        before the shape's first call."""
        return self._plans.cached(tuple(shape))

    def choose(self, candidate) -> None:
        """Make ``candidate``, one of the plan's, its choice: the candidates before it leave
        the plan (the tuning's use, when they did not serve the example in this module)."""
        self._plans.start_at(candidate)
        self.plan.candidates = list(self._plans.candidates)

    def forget(self) -> None:
        """Every shape made so far closed and forgotten: each is made again on its next call
        (the tuning's use, when the choice changes after the example's shape was made)."""
        self._plans.close()

    def extra_repr(self) -> str:
        return f"{self.plan.module.describe()}; choice: {self.plan.choice.label}"

    # ------------------------------------------------------------------ calls
    def forward(self, input, hx=None):
        with torch.no_grad(), self._cp.cuda.Device(self._device.index):
            if isinstance(input, PackedSequence):
                return self._packed(input, hx)
            spec = self.plan.module
            x, unbatched = calls.sequence_major(input, spec, self._device)
            h0, c0 = calls.state(hx, spec, x.shape[1], self._device, unbatched)
            if x.shape[1] == 0:  # an empty batch: empty outputs, as torch.nn's modules give
                y, hy, cy = calls.empty_outputs(spec, (x.shape[0], 0), 0, x.dtype, self._device)
            else:
                y, hy, cy = self._run((x.shape[0], x.shape[1]), x, h0, c0)
            return calls.as_module_returns(spec, y, hy, cy, unbatched)

    def verify(self, input, hx=None, choice_only: bool = False) -> dict:
        """Run ``input`` (padded, the module's layout) from ``hx`` and judge the outputs as a
        shape's first call is judged (:mod:`.verify`: the candidate's own rule, then the
        tolerance against the module in float64); the facts (``errors`` against the module),
        or :class:`~cudnn_rnn.torch.errors.NotAccelerated` saying what is outside.
        ``choice_only``: the plan's choice must be what runs the shape (a shape not made yet
        tries the choice alone), as the calibration batches are checked."""
        with torch.no_grad(), self._cp.cuda.Device(self._device.index):
            spec = self.plan.module
            x, unbatched = calls.sequence_major(input, spec, self._device)
            h0, c0 = calls.state(hx, spec, x.shape[1], self._device, unbatched)
            if x.shape[1] == 0:
                raise BadCall("the input's batch is empty: nothing to verify")
            key = (x.shape[0], x.shape[1])
            entry = self._plans.cached(key)
            if entry is None:  # made now, and verified on these very inputs
                self._run(key, x, h0, c0, [self.plan.choice] if choice_only else None)
                return self._plans.cached(key).facts
            if choice_only and entry.candidate is not self.plan.choice:
                raise NotAccelerated(f"{describe(key)} is run by {entry.candidate.label}, not "
                                     f"by the choice, {self.plan.choice.label}")
            outputs = self._call(entry.runner, key, x, h0, c0)
            torch.cuda.current_stream(self._device).synchronize()
            entry.runner.check()
            facts, why = self._judge(entry.candidate, entry.runner, key, x, h0, c0, outputs)
        if why is not None:
            raise NotAccelerated(f"{entry.candidate.label} at {describe(key)}: {why}")
        return facts

    def _packed(self, input, hx):
        spec = self.plan.module
        data = input.data
        calls.sequence_major(data, spec, self._device)  # checks device, data type, features
        lengths = packed_lengths(input.batch_sizes)
        h0, c0 = calls.state(hx, spec, len(lengths), self._device, order=input.sorted_indices)
        y, hy, cy = self._run((len(input.batch_sizes), len(lengths), lengths), data, h0, c0)
        y, state = calls.as_module_returns(spec, y, hy, cy, restore=input.unsorted_indices)
        return PackedSequence(y, input.batch_sizes, input.sorted_indices,
                              input.unsorted_indices), state

    def _run(self, key: tuple, x, h0, c0, only=None) -> tuple:
        entry = self._plans.cached(key)
        if entry is None:
            _, outputs = self._plans.make(key, lambda c: self._attempt(c, key, x, h0, c0), only)
            return outputs
        return self._call(entry.runner, key, x, h0, c0)

    def _stream(self):
        """PyTorch's current stream as cupy's (the runners enqueue on it)."""
        ptr = torch.cuda.current_stream(self._device).cuda_stream
        stream = self._streams.get(ptr)
        if stream is None:
            stream = self._streams[ptr] = external_stream(self._cp, ptr, self._device.index)
        return stream

    def _call(self, runner, key: tuple, x, h0, c0) -> tuple:
        """One call of ``runner``: (y, h_n, c_n) in its data type, on the current stream."""
        io = getattr(torch, runner.io_dtype)
        as_io = lambda t: None if t is None else t.detach().to(io).contiguous()  # noqa: E731
        xr, hr, cr = as_io(x), as_io(h0), as_io(c0)
        rows = (x.shape[0],) if len(key) > 2 else (key[0], key[1])
        y, hy, cy = calls.empty_outputs(self.plan.module, rows, key[1], io, self._device)
        stream, cp = self._stream(), self._cp
        with stream:
            arrays = [calls.device_array(t, cp) for t in (xr, hr, cr, y, hy, cy)]
            runner.run(stream, *arrays)
        return y, hy, cy

    def _attempt(self, candidate, key: tuple, x, h0, c0) -> Attempt:
        """``candidate`` built for ``key``, called on this call's inputs and verified."""
        lengths = key[2] if len(key) > 2 else None
        try:
            runner = runners.build(candidate, self._rnn, key[0], key[1], lengths)
        except runners.NotServed as exc:
            return Attempt(why=str(exc))
        try:
            y, hy, cy = self._call(runner, key, x, h0, c0)
            torch.cuda.current_stream(self._device).synchronize()
            runner.check()
            facts, why = self._judge(candidate, runner, key, x, h0, c0, (y, hy, cy))
            if why is None and h0 is None:  # a zero state proves nothing of the state's path:
                hs, cs = self._as_state(hy, cy)  # the call again from its own final state, as
                again = self._call(runner, key, x, hs, cs)  # a stream of chunks gives it
                torch.cuda.current_stream(self._device).synchronize()
                runner.check()
                _, why = self._judge(candidate, runner, key, x, hs, cs, again,
                                     nearer_twin=False)
                why = why and f"from the call's own final state, {why}"
        except runners.run_errors(self._cp) as exc:
            facts, why = {}, f"{type(exc).__name__}: {exc}"
        if why is not None:
            runner.close()
            return Attempt(facts=facts, why=why)
        return Attempt(runner, (y, hy, cy), dict(facts, **runner.facts()))

    def _as_state(self, hy, cy) -> tuple:
        """A call's final (h_n, c_n) as the next call's (h_0, c_0): the module's data type, as
        a caller streaming chunks gives them (values in the range calibration saw)."""
        dtype = getattr(torch, self.plan.module.dtype)
        return hy.to(dtype), (None if cy is None else cy.to(dtype))

    def _judge(self, candidate, runner, key, x, h0, c0, outputs, nearer_twin=True) -> tuple:
        """:func:`.verify.judge` on this call's inputs and outputs, as float64 cupy arrays
        (a packed batch unpacked to (seq, batch, features))."""
        io = getattr(torch, runner.io_dtype)
        lengths = key[2] if len(key) > 2 else None
        f64 = lambda t: None if t is None else self._cp.from_dlpack(  # noqa: E731
            t.detach().double().contiguous())
        dense = (lambda a: a) if lengths is None else \
            (lambda a: packing.unpack(a, lengths, key[0]))  # noqa: E731
        as_io = lambda t: None if t is None else t.to(io)  # noqa: E731
        module_in = {"x": dense(f64(x)), "hx": f64(h0), "cx": f64(c0)}
        held_in = {"x": dense(f64(as_io(x))), "hx": f64(as_io(h0)), "cx": f64(as_io(c0))}
        y, hy, cy = outputs
        out = {"y": dense(f64(y)), "hy": f64(hy)} | ({} if cy is None else {"cy": f64(cy)})
        return verify.judge(candidate, runner, self._rnn, self.plan.tolerance, module_in,
                            held_in, out, lengths, nearer_twin)

    def close(self) -> None:
        """Free every shape's runner (the module is unusable after; a graph captured with it
        must not be replayed)."""
        self._plans.close()
