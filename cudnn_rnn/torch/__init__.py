"""A user's ``torch.nn.LSTM``, ``GRU`` or ``RNN``, run by the fastest configuration this
project verifies for it (docs/torch.md)::

    from cudnn_rnn.torch import accelerate
    fast = accelerate(lstm, example=(20, 64), precision="auto", tolerance=1e-2)
    print(fast.choice)
    y, (h, c) = fast(x)

The modules, top to bottom: :mod:`.tuning` (``accelerate`` and ``load``), :mod:`.module`
(the ``torch.nn.Module`` it returns) and :mod:`.calls` (a call's tensors), :mod:`.timing`,
:mod:`.report` (``choice`` and ``table()``), :mod:`.ranking` (which row is chosen),
:mod:`.shapes` (a runner per shape, made and verified on first use), :mod:`.runners` (one
configuration at one shape on the caller's memory), :mod:`.verify`, :mod:`.inputs` (the
example and calibration batches), :mod:`.plan` (the plan file), :mod:`.modules` (a module's
structure and weights), :mod:`.errors`.

PyTorch is optional for the project: importing this package does not import it (only
:func:`accelerate` and :func:`load` do, and refuse in one line without it); importing
``cudnn_rnn`` never imports this package.
"""
from cudnn_rnn.torch.errors import BadCall, BadPlan, NotAccelerated
from cudnn_rnn.torch.tuning import accelerate, load

__all__ = ["accelerate", "load", "NotAccelerated", "BadPlan", "BadCall"]
