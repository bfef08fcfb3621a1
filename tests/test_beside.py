"""matrix.beside.Beside: the probe's two workers (the PERSIST_DYNAMIC cells' and the
others') keep a builder's GPU set-up apart from a cell's verification and timing, and count
the builds compiled beside a measured cell. Real multiprocessing primitives of the spawn
context, as the workers get them; threads (and one spawned process) stand for the workers."""
import multiprocessing as mp
import threading
import time

from cudnn_rnn.matrix.beside import Beside, hold_key

CTX = mp.get_context("spawn")


def _in_thread(fn):
    t = threading.Thread(target=fn, daemon=True)
    t.start()
    return t


def test_a_measured_cell_waits_for_a_set_up_under_way_and_then_blocks_new_ones():
    beside, events = Beside(CTX), []
    inside, release = threading.Event(), threading.Event()

    def builder():
        with beside.preparing():
            events.append("prepare begins")
            inside.set()
            release.wait(5)
            events.append("prepare ends")

    def cell():
        with beside.measuring():
            events.append("measure begins")
            time.sleep(0.05)
            later.start()  # a builder arriving now waits for the measured cell
            time.sleep(0.05)
            events.append("measure ends")

    def late_builder():
        with beside.preparing():
            events.append("late prepare")

    later = threading.Thread(target=late_builder, daemon=True)
    b = _in_thread(builder)
    assert inside.wait(5)
    c = _in_thread(cell)
    time.sleep(0.05)
    assert events == ["prepare begins"]  # the cell has not begun beside the set-up
    release.set()
    for t in (b, c, later):
        t.join(5)
    assert events == ["prepare begins", "prepare ends", "measure begins", "measure ends",
                      "late prepare"]


def test_builds_compiling_inside_a_measured_cell_are_counted():
    beside = Beside(CTX)
    with beside.measuring() as counts:
        pass
    assert counts["builds"] == 0
    going, stop = threading.Event(), threading.Event()

    def long_build():
        with beside.compiling():
            going.set()
            stop.wait(5)

    t = _in_thread(long_build)  # under way before, during and after the cell
    assert going.wait(5)
    with beside.measuring() as counts:
        with beside.compiling():  # one begun and finished inside
            pass
    stop.set()
    t.join(5)
    assert counts["builds"] == 2
    with beside.measuring() as counts:  # the long one finished before: not beside this one
        pass
    assert counts["builds"] == 0


def _compile_in_child(beside, started, stop):
    with beside.compiling():
        started.set()
        stop.wait(10)


def test_a_build_in_another_process_is_seen():
    beside, started, stop = Beside(CTX), CTX.Event(), CTX.Event()
    child = CTX.Process(target=_compile_in_child, args=(beside.at(1), started, stop),
                        daemon=True)
    child.start()
    try:
        assert started.wait(60)
        with beside.measuring() as counts:
            pass
    finally:
        stop.set()
        child.join(30)
    assert counts["builds"] == 1 and child.exitcode == 0


def _killed_inside(beside, inside):
    with beside.measuring():
        inside.set()
        time.sleep(60)


def test_a_worker_killed_while_measured_holds_nobody_up_once_its_slot_is_cleared():
    beside, inside = Beside(CTX), CTX.Event()
    child = CTX.Process(target=_killed_inside, args=(beside.at(0), inside), daemon=True)
    child.start()
    assert inside.wait(60)
    child.kill()
    child.join(30)
    builder, done = beside.at(1), threading.Event()

    def prepare():
        with builder.preparing():
            done.set()

    t = _in_thread(prepare)
    assert not done.wait(0.2)  # the dead worker's count still stands
    beside.at(0).clear()       # what starting its replacement does
    assert done.wait(5)
    t.join(5)


def _killed_holding_the_lock(beside, inside):
    with beside._held():
        inside.set()
        time.sleep(60)


def test_a_worker_killed_inside_the_lock_holds_nobody_up_and_the_cells_say_so():
    """The lock held for good by a process killed inside it: past lock_s each side gives up
    on it, once for its process, and goes on; a measured cell's counts say the set-ups were
    not kept apart, the builds are still counted, and the exclusion is still kept as far as
    the counts alone keep it."""
    beside, inside = Beside(CTX, lock_s=0.2), CTX.Event()
    assert not beside.lost
    child = CTX.Process(target=_killed_holding_the_lock, args=(beside.at(1), inside),
                        daemon=True)
    child.start()
    assert inside.wait(60)
    child.kill()
    child.join(30)
    cell, builder, counts = beside.at(0), beside.at(1), {}

    def measured():
        with cell.measuring() as seen:
            with builder.compiling():
                pass
        counts.update(seen)

    t = _in_thread(measured)
    t.join(10)  # the lock's wait once (0.2 s), not for ever
    assert not t.is_alive()
    assert cell.lost and counts["lock_lost"] and counts["builds"] == 1
    view = beside.at(0)  # as a worker started afterwards holds it: gives up once too
    assert not view.lost
    with view.measuring() as fresh:
        pass
    assert fresh["lock_lost"] and view.lost
    blocked = threading.Event()

    def prepare():  # a set-up still waits for a measured cell, by the counts
        with builder.preparing():
            blocked.set()

    with cell.measuring():
        t = _in_thread(prepare)
        assert not blocked.wait(0.3)
    assert blocked.wait(5)
    t.join(5)


def test_a_cell_measured_with_the_lock_whole_says_nothing_of_it():
    with Beside(CTX).measuring() as counts:
        pass
    assert "lock_lost" not in counts


def test_the_waits_are_measured():
    """A cell measured while a set-up is under way waits for it, and says how long; a
    set-up with no cell measured waits for nothing. The set-up is known to be under way
    (its event), not assumed after a sleep; the release comes 0.5 s later, so only a stall
    of 0.45 s between the two could make the wait look short."""
    beside, inside, release = Beside(CTX), threading.Event(), threading.Event()

    def builder():
        with beside.at(1).preparing():
            inside.set()
            release.wait(5)

    t = _in_thread(builder)
    assert inside.wait(5)
    threading.Timer(0.5, release.set).start()
    with beside.measuring() as counts:
        pass
    t.join(5)
    assert counts["waited"] >= 0.05
    with beside.at(1).preparing() as waited:
        assert waited < counts["waited"] / 2


def test_a_worker_that_ended_between_cells_is_revived_and_its_slot_cleared():
    """A real worker (descriptor stages only here): killed between cells, :meth:`revive`
    says how it ended, counts it lost and starts another, which clears the slot the dead one
    left counted (here: a measured cell it never finished)."""
    from cudnn_rnn.matrix.worker import Worker
    beside = Beside(CTX)
    worker = Worker(None, {"beside": beside.at(1), "no_device": True})
    try:
        worker.start()
        assert worker.revive() is None  # alive: nothing to do
        with beside.at(1)._lock:
            beside.at(1)._add(beside._measuring, 1)  # as if killed inside a measured cell
        worker.proc.kill()
        worker.proc.join(30)
        assert worker.revive() == "SIGKILL"
        assert worker.alive and worker.started == 2 and worker.lost == 1
        with beside.at(0).preparing() as waited:  # the other worker's builder goes on
            assert waited < 1
    finally:
        worker.close()


def _builds_in_child(beside, results, said):
    """A builder's side in another process: what it may begin while the parent holds it."""
    results[0] = beside.held_for()
    results[1] = beside.begin_build("cell-b")  # held for cell-a: refused, not counted
    results[2] = beside.begin_build("cell-a")  # the cell it is held for: counted
    said.set()


def test_the_supervisor_holds_a_workers_builders_and_sees_their_builds_under_way():
    beside, said, results = Beside(CTX), CTX.Event(), CTX.Array("q", 3)
    supervisor = beside.at(1)  # the PERSIST_DYNAMIC worker's slot, read from the parent
    assert supervisor.held_for() == 0 and supervisor.builds_under_way() == 0
    supervisor.hold("cell-a")
    child = CTX.Process(target=_builds_in_child, args=(beside.at(1), results, said),
                        daemon=True)
    child.start()
    assert said.wait(60)
    child.join(30)
    assert list(results) == [hold_key("cell-a"), 0, 1]
    assert hold_key("cell-a") != hold_key("cell-b")
    assert supervisor.builds_under_way() == 1  # begun in another process
    assert beside.builds_under_way() == 0 and beside.held_for() == 0  # the other slot's
    supervisor.hold(None)
    assert supervisor.held_for() == 0 and supervisor.begin_build("cell-b")  # let go
    supervisor.end_build()
    assert supervisor.builds_under_way() == 1
    supervisor.clear()  # a worker (re)started or dropped: its process's builds are gone
    assert supervisor.builds_under_way() == 0


def test_a_dropped_workers_builds_are_no_longer_counted():
    """A worker dropped (a crash or timeout on a cell, or closed) takes the builds its
    builders had begun with it: the supervisor must not wait for them (matrix.ahead.Order)."""
    from cudnn_rnn.matrix.worker import Worker
    beside = Beside(CTX)
    worker = Worker(None, {"beside": beside.at(1), "no_device": True})
    try:
        worker.start()
        assert beside.at(1).begin_build("cell-a")  # as if its builder began one
        assert beside.at(1).builds_under_way() == 1
        worker.proc.kill()  # ... and died inside it
        worker.proc.join(30)
        assert not worker.alive
    finally:
        worker.close()  # dropped
    assert beside.at(1).builds_under_way() == 0
