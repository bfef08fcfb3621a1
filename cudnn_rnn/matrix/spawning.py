"""How the supervisor starts its child processes (the cells' worker): with SIGINT ignored
while one is spawned (:func:`sigint_ignored_by_child`)."""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager


@contextmanager
def sigint_ignored_by_child():
    """SIGINT ignored while a worker is spawned, so that the child starts with it ignored
    (an ignored signal stays so across exec, and Python then installs no handler for it): a
    Ctrl-C in the terminal reaches the whole process group, and a worker still importing
    its modules printed a KeyboardInterrupt traceback under the supervisor's one line. The
    supervisor's own handler is back as soon as the child exists (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
