"""A runner per shape: made on first use, verified on that call's own inputs, then kept.

A shape's key is (seq, batch) for padded inputs, and (seq, batch, lengths) for a
PackedSequence (each set of lengths is a cuDNN configuration of its own). On first use the
candidates are tried in the plan's order (the choice first; a PackedSequence tries cuDNN's
only): ``attempt(candidate)`` builds one, runs the call and verifies it, and the first that
serves and verifies is kept; a shape none serves is
:class:`~cudnn_rnn.torch.errors.NotAccelerated`, never the user's module run instead.

Padded shapes are kept for the module's life (a CUDA graph captured at one may still replay
it); packed ones, the :data:`KEEP_PACKED` most recent. Nothing here touches the GPU: the
caller's ``attempt`` does.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from cudnn_rnn.torch.errors import NotAccelerated

KEEP_PACKED = 16


@dataclass
class Attempt:
    """What trying one candidate at a shape gave: its runner and the call's outputs, the
    verification's facts, and why it does not serve (None: it does)."""
    runner: object = None
    outputs: object = None
    facts: dict = field(default_factory=dict)
    why: str | None = None


@dataclass
class Entry:
    """The runner a shape uses, the candidate it runs, its verification at first use, and
    why the candidates before it did not serve."""
    candidate: object
    runner: object
    facts: dict
    passed_over: list


def packed_lengths(batch_sizes) -> tuple:
    """Each sequence's length, longest first, from a PackedSequence's ``batch_sizes`` (how
    many sequences still run at each step)."""
    sizes = [int(n) for n in batch_sizes]
    return tuple(sum(1 for n in sizes if n > b) for b in range(sizes[0])) if sizes else ()


def position(candidates: list, candidate) -> int:
    """Where ``candidate`` itself stands in ``candidates`` (by identity: two candidates of a
    plan may compare equal)."""
    return next(i for i, c in enumerate(candidates) if c is candidate)


def describe(key: tuple) -> str:
    """A shape key as a user reads it."""
    text = f"seq {key[0]}, batch {key[1]}"
    return text if len(key) == 2 else text + f", a PackedSequence of lengths {list(key[2])}"


class Plans:
    """The runners of one accelerated module, by shape key."""

    def __init__(self, candidates: list, keep_packed: int = KEEP_PACKED):
        self.candidates = list(candidates)
        self.keep_packed = keep_packed
        self.padded: dict = {}
        self.packed: OrderedDict = OrderedDict()

    def order(self, key: tuple) -> list:
        """The candidates a shape tries, in order: all of them, or for a PackedSequence
        cuDNN's only (the engines run padded sequences of equal length)."""
        packed = len(key) > 2
        return [c for c in self.candidates if c.is_cudnn or not packed]

    def cached(self, key: tuple) -> Entry | None:
        if len(key) == 2:
            return self.padded.get(key)
        entry = self.packed.get(key)
        if entry is not None:
            self.packed.move_to_end(key)
        return entry

    def make(self, key: tuple, attempt, only=None) -> tuple[Entry, object]:
        """The first candidate that serves and verifies at ``key`` (``attempt(candidate) ->``
        :class:`Attempt`), kept; (its entry, the outputs of the call that verified it).
        ``only``: these candidates tried, not the shape's whole order."""
        passed = []
        for candidate in self.order(key) if only is None else only:
            got = attempt(candidate)
            if got.why is None:
                entry = Entry(candidate, got.runner, got.facts, passed)
                self._keep(key, entry)
                return entry, got.outputs
            passed.append(f"{candidate.label}: {got.why}")
        if not passed:
            raise NotAccelerated(f"no configuration serves {describe(key)}: a PackedSequence "
                                 f"runs cuDNN's configurations, and none of them verified "
                                 f"within the tolerance at the example; pass padded tensors, "
                                 f"or accelerate with precision='auto'")
        raise NotAccelerated(f"no verified configuration serves {describe(key)}: "
                             + "; ".join(passed))

    def start_at(self, candidate) -> None:
        """``candidate`` first: the candidates before it leave (see Accelerated.choose)."""
        self.candidates = self.candidates[position(self.candidates, candidate):]

    def _keep(self, key: tuple, entry: Entry) -> None:
        if len(key) == 2:
            self.padded[key] = entry
            return
        self.packed[key] = entry
        while len(self.packed) > self.keep_packed:
            _, old = self.packed.popitem(last=False)
            old.runner.close()

    def entries(self) -> list[tuple]:
        """(key, entry) of every shape made so far, padded ones first."""
        return list(self.padded.items()) + list(self.packed.items())

    def close(self) -> None:
        for _, entry in self.entries():
            entry.runner.close()
        self.padded.clear()
        self.packed.clear()
