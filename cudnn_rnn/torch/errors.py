"""The refusals of :mod:`cudnn_rnn.torch`, each one line that says what to do.

Both derive from :class:`cudnn_rnn.matrix.errors.BadInput`, so a command that calls
:func:`~cudnn_rnn.torch.accelerate` through :func:`cudnn_rnn.cli.run_main` prints the line and
exits 2, without a traceback.
"""
from __future__ import annotations

from cudnn_rnn.matrix.errors import BadInput


def one_line(text: str) -> str:
    """``text`` with its line breaks and runs of spaces made single spaces (a reason quoted
    from a library may span lines)."""
    return " ".join(str(text).split())


class NotAccelerated(BadInput):
    """No verified configuration to hand back: no PyTorch, no GPU, a module or argument this
    package does not take, or every candidate refused or outside the tolerance."""

    def __init__(self, text: str):
        super().__init__(one_line(text))


class BadPlan(BadInput):
    """A plan file that is not one :meth:`Accelerated.save` wrote, or was written for another
    module."""

    def __init__(self, text: str):
        super().__init__(one_line(text))


class BadCall(BadInput, ValueError):
    """A call the accelerated module does not take (a tensor on another device, of another
    data type or shape than the module's)."""

    def __init__(self, text: str):
        super().__init__(one_line(text))
