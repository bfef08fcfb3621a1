"""The supervisor's children start with SIGINT ignored (matrix/spawning.py)."""
import multiprocessing as mp
import signal

from cudnn_rnn.matrix.spawning import sigint_ignored_by_child


def _report_sigint(conn):
    conn.send(signal.getsignal(signal.SIGINT) == signal.SIG_IGN)


def _child_ignores_sigint(ignored: bool) -> bool:
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_report_sigint, args=(child,))
    if ignored:
        with sigint_ignored_by_child():
            proc.start()
    else:
        proc.start()
    try:
        assert parent.poll(60), "the child did not answer"
        return parent.recv()
    finally:
        proc.join(30)


def test_a_child_spawned_inside_starts_with_sigint_ignored_and_the_parent_keeps_its_handler():
    """A Ctrl-C reaches the terminal's whole process group: a child spawned inside ignores it
    from its first instruction (while it still imports, where a KeyboardInterrupt printed a
    traceback), one spawned outside does not, and the parent's own handler is back after."""
    # as an interactive Python has it (a shell's background job starts with SIGINT ignored,
    # which every child would inherit anyway)
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        assert _child_ignores_sigint(True) is True
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert _child_ignores_sigint(False) is False
    finally:
        signal.signal(signal.SIGINT, outer)
