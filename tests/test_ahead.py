"""The PERSIST_DYNAMIC builds ahead (cudnn_rnn.matrix.ahead), what runs without a GPU: which
cells the supervisor names, the builders' cuDNN objects left out of the cells' leak count, a
worker without a GPU that is named cells ahead and runs its cells as before, and the
builders' coordination (take, want, quiet) with builds the test holds and releases in place
of cuDNN's (what cudnnBuildRNNDynamic does is tested on the GPU: test_gpu_ahead.py)."""
import threading
import time

from cudnn_rnn.bindings.enums import RNNAlgo, RNNMode
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.engine.descriptors import RNNDescriptor, live_objects, uncounted
from cudnn_rnn.matrix.ahead import Builder, Order, Schedule
from cudnn_rnn.matrix.cells import Cell

BASE = RNNConfig(seq_length=4, num_layers=1, hidden_size=16, mini_batch=2, input_size=8)


def _cells(algos: str) -> list:
    by = {"s": RNNAlgo.STANDARD, "d": RNNAlgo.PERSIST_DYNAMIC, "p": RNNAlgo.PERSIST_STATIC}
    return [Cell(BASE.replace(algo=by[a], seq_length=4 + i), "ahead") for i, a in enumerate(algos)]


def test_the_schedule_names_the_next_dynamic_cells_from_the_running_one_on():
    cells = _cells("sdsdpddsd")
    schedule = Schedule(cells, depth=3)
    ids = lambda i: [[c.id for c in cells].index(cid) for cid, _cfg in schedule.starting(i)]
    assert ids(0) == [1, 3, 5]
    assert ids(1) == [1, 3, 5]  # the running cell itself while it runs
    assert ids(2) == [3, 5, 6]
    assert ids(7) == [8]
    assert ids(9) == []
    assert all(cfg.algo == RNNAlgo.PERSIST_DYNAMIC for _cid, cfg in schedule.starting(0))


def _ran(cells, order):
    """The cells' letters (and indices) as ``order`` yields them, with the dynamic head seen
    while each runs."""
    return [(i, cells[i].config.algo.name[0], order.dynamic_head()) for i, _c in order]


def test_the_order_is_the_cells_own_while_no_build_is_waited_for():
    cells = _cells("sdsdpddsd")
    order = Order(cells)
    ran = _ran(cells, order)
    assert [i for i, _a, _h in ran] == list(range(len(cells))) and order.let_first == 0
    # while a cell runs, the PERSIST_DYNAMIC cells go on from the running one or the next
    assert [h for _i, _a, h in ran] == [1, 1, 3, 3, 5, 5, 6, 8, 8]


def test_a_dynamic_cell_that_would_wait_for_builds_lets_the_other_cells_go_first():
    cells = _cells("sddsspsdss")
    waiting = {1: 2, 7: 6}  # cell index: how many other cells run before its builds are done
    others_run, holds = [], []

    def waits(cell):
        return len(others_run) < waiting.get(cells.index(cell), 0)

    order = Order(cells, waits, lambda cell: holds.append(cell and cells.index(cell)))
    ran = []
    for i, cell in order:
        ran.append(i)
        if cell.config.algo != RNNAlgo.PERSIST_DYNAMIC:
            others_run.append(i)
            # the dynamic cells go on from the first not yet run
            assert order.dynamic_head() == next(d for d in (1, 2, 7, 10) if d not in ran)
        else:
            assert order.dynamic_head() == i
    # 1 waits for two other cells (0 ran before it, then 3 runs ahead of it), and 2, not
    # waited for, still follows it; 7 waits for six (five ran before it, then 8 ahead)
    assert ran == [0, 3, 1, 2, 4, 5, 6, 8, 7, 9]
    assert order.let_first == 2
    # the builders are held for a dynamic cell from when it is the next in the cells' order
    # until it ran (through the cells let go first), and let go while other cells are next
    assert holds == [None, 1, 1, 2, None, None, None, 7, 7, None]


def test_the_order_yields_every_cell_once_whatever_is_waited_for():
    cells = _cells("ddsdssddds")
    order = Order(cells, lambda cell: True)  # builds forever under way
    ran = [i for i, _c in order]
    assert sorted(ran) == list(range(len(cells)))
    assert ran == [2, 4, 5, 9, 0, 1, 3, 6, 7, 8]  # the others first, then in their order


def test_a_cell_that_will_not_run_is_neither_waited_for_nor_held_for():
    cells = _cells("sddss")
    holds = []
    order = Order(cells, lambda cell: True, holds.append,
                  skip=lambda cell: cell in (cells[1], cells[3]))
    assert [i for i, _c in order] == [0, 1, 3, 4, 2]  # 1 as it comes; 2 waits behind 3, 4
    # held for 2 while others may go first; let go when none is left (they build ahead)
    assert holds == [None, cells[2], cells[2], None]
    assert order.let_first == 1  # 4; 3, which will not run either, is not counted


def test_objects_a_builder_thread_creates_are_left_out_of_the_leak_count(lib):
    before = live_objects()
    made = []

    def builder():
        uncounted()
        made.append(RNNDescriptor(lib))

    t = threading.Thread(target=builder)
    t.start()
    t.join()
    assert live_objects() == before  # the builder's descriptor is not counted
    mine = RNNDescriptor(lib)
    assert live_objects() == before + 1  # this thread's still are
    made[0].close()  # closed by another thread (a cell that adopted it): still not counted
    mine.close()
    assert live_objects() == before


def test_a_worker_without_a_gpu_is_named_cells_ahead_and_runs_its_cells(lib):
    from cudnn_rnn.matrix.worker import start_worker
    cells = _cells("dd")
    cells[1] = Cell(cells[1].config.replace(mode=RNNMode.GRU), "ahead")
    worker, _info = start_worker(None, {"no_device": True})
    try:
        schedule = Schedule(cells)
        recs = []
        for i, cell in enumerate(cells):
            worker.ahead(schedule.starting(i))
            recs.append(worker.run(cell, timeout=60).as_json())
        assert worker.lost == 0 and worker.started == 1
    finally:
        worker.close()
    assert [r["id"] for r in recs] == [c.id for c in cells]
    assert all(r["outcome"] == "SKIPPED" for r in recs)  # descriptor stages passed, no device
    assert not any("called ahead" in n for r in recs for n in r["notes"])


class _Flow:
    """A stand-in for a builder's flow (the coordination under test is ours, not cuDNN's)."""

    def __init__(self, cfg):
        self.cfg, self.buf, self.closed = cfg, {}, False

    def close(self):
        assert not self.closed, "closed twice"
        self.closed = True


class _Builder(Builder):
    """A Builder whose builds wait for the test to release them, per cell (its sequence
    length), and fail for the lengths in ``fail``."""

    def __init__(self, fail=(), beside=None):
        self.release, self.begun, self.flows, self.fail = {}, [], [], set(fail)
        self.looks = []
        self.started = threading.Condition()
        super().__init__(lib=None, threads=2, beside=beside)

    def _open(self):
        return None

    def _shut(self, handle):
        self.shut = getattr(self, "shut", 0) + 1

    def _prepare(self, handle, cfg):
        flow = _Flow(cfg)
        self.flows.append(flow)
        return flow

    def _compile(self, handle, flow, cfg):
        with self.started:
            self.begun.append(cfg.seq_length)
            self.started.notify_all()
        self.release.setdefault(cfg.seq_length, threading.Event()).wait(10)
        if cfg.seq_length in self.fail:
            raise RuntimeError("refused")

    def _next(self):  # each builder thread's look for work (under the Builder's lock)
        job, key = super()._next()
        with self.started:
            self.looks.append(job)
            self.started.notify_all()
        return job, key

    def looked_since(self, mark, n):
        """The looks for work from ``mark`` on, once there are ``n`` of them."""
        with self.started:
            assert self.started.wait_for(lambda: len(self.looks) >= mark + n, 10), self.looks
            return self.looks[mark:]

    def wait_begun(self, n):
        with self.started:
            assert self.started.wait_for(lambda: len(self.begun) >= n, 10), self.begun

    def let(self, length):
        self.release.setdefault(length, threading.Event()).set()


def _named(*lengths):
    return [(f"c{n}", BASE.replace(algo=RNNAlgo.PERSIST_DYNAMIC, seq_length=n)) for n in lengths]


def _until(condition, what: str) -> None:
    """Wait (10 s at most) for ``condition()``: a state the code under test announces."""
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


def _in_thread(fn):
    """``fn()`` in a thread of its own: (the thread, a list that gets its result)."""
    out = []
    t = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    t.start()
    return t, out


def test_take_waits_for_a_build_under_way_and_gets_it():
    b = _Builder()
    b.want(_named(5, 6))
    b.wait_begun(2)
    taker, got = _in_thread(lambda: b.take("c5"))
    _until(lambda: "c5" in b._taking, "the taker did not reach its wait")
    taker.join(0.05)
    assert taker.is_alive() and not got  # under way: the taker waits for it
    b.let(5)
    taker.join(10)
    (built,) = got  # ... then it is the caller's
    assert built is not None and built.flow is not None and built.error is None
    assert not built.flow.closed and "called ahead" in built.note()
    b.let(6)
    assert b.take("c7") is None  # nobody began it: the cell builds itself


def test_cells_no_longer_named_are_destroyed_and_a_failed_build_says_why():
    b = _Builder(fail={6})
    b.want(_named(5, 6))
    b.wait_begun(2)
    b.let(5)
    b.let(6)
    failed = b.take("c6")
    assert failed.flow is None and "RuntimeError: refused" in failed.error
    assert "failed" in failed.note() and "called here" in failed.note()
    with b.quiet():  # c5's build finished too
        pass
    b.want(_named(8))  # c5 built, no longer named: destroyed
    flows = {f.cfg.seq_length: f for f in b.flows}
    assert flows[5].closed and flows[6].closed  # the failed one too
    assert b.take("c5") is None


class _Adopter:
    """The side of a cell's flow that :meth:`Builder.adopt` uses."""

    def __init__(self):
        self.adopted = []

    def adopt(self, built):
        self.adopted.append(built)


def test_adopt_hands_a_successful_build_to_the_flow_and_a_failed_one_back_with_its_error():
    b = _Builder(fail={6})
    b.want(_named(5, 6))
    b.wait_begun(2)
    b.let(5)
    b.let(6)
    ok, bad, none = _Adopter(), _Adopter(), _Adopter()
    built = b.adopt(ok, "c5")
    assert built.flow is not None and ok.adopted == [built]
    failed = b.adopt(bad, "c6")
    assert failed.flow is None and "refused" in failed.error and bad.adopted == []
    assert b.adopt(none, "c9") is None and none.adopted == []


def test_quiet_waits_for_builds_under_way_and_starts_none():
    b = _Builder()
    b.want(_named(5))
    b.wait_begun(1)
    inside = threading.Event()
    leave = threading.Event()

    def quietly():
        with b.quiet():
            inside.set()
            leave.wait(10)
    quieter, _ = _in_thread(quietly)
    _until(lambda: b._quiet, "quiet() was not entered")
    assert not inside.wait(0.05)  # c5 under way: quiet waits for it
    b.let(5)
    assert inside.wait(10)
    leave.set()
    quieter.join(10)
    with b.quiet():
        assert "c5" not in b._building  # the build under way finished first
        mark = len(b.looks)
        b.want(_named(5, 6))  # wakes both threads: each looks for work, and finds none
        b.let(6)
        assert b.looked_since(mark, 2)[:2] == [None, None]
        assert b.begun == [5]  # nothing began inside
    b.wait_begun(2)
    assert b.take("c6").flow is not None


def test_close_waits_for_builds_under_way_destroys_the_built_and_ends_the_threads():
    b = _Builder()
    b.want(_named(5, 6, 7))
    b.wait_begun(2)
    closer = threading.Thread(target=b.close)
    closer.start()
    deadline = time.monotonic() + 10
    while not b._closed:  # closing, and waiting for the two under way
        assert time.monotonic() < deadline
        time.sleep(0.01)
    b.let(5)
    b.let(6)
    closer.join(10)
    assert not closer.is_alive()
    assert sorted(b.begun) == [5, 6]  # c7 never began
    assert all(f.closed for f in b.flows) and len(b.flows) == 2
    for t in b._threads:
        t.join(5)
        assert not t.is_alive()
    assert b.shut == 2  # each thread's handle destroyed as it ended (many builders a process)


def test_a_build_that_finishes_after_close_gave_up_waiting_is_destroyed():
    b = _Builder()
    b.want(_named(5))
    b.wait_begun(1)
    b.close(wait_s=0.05)  # gives up: c5 is still under way
    assert not b.flows[0].closed
    b.let(5)
    b._threads[0].join(5)
    b._threads[1].join(5)
    assert b.flows[0].closed and b.take("c5") is None


def test_held_builders_begin_only_the_cell_they_are_held_for_and_count_their_builds():
    import multiprocessing as mp
    from cudnn_rnn.matrix.beside import Beside
    seen = Beside(mp.get_context("spawn")).at(1)  # the supervisor's view of the worker
    seen.hold("c6")
    b = _Builder(beside=seen)
    b.want(_named(5, 6, 7))
    b.wait_begun(1)
    assert b.begun == [6] and seen.builds_under_way() == 1  # not 5 or 7, held for 6
    seen.hold(None)  # let go: the threads look again by themselves (no message comes)
    b.wait_begun(2)
    assert b.begun == [6, 5] and seen.builds_under_way() == 2
    b.let(6)  # its thread takes up 7 next: two under way again, 6 no longer among them
    b.wait_begun(3)
    _until(lambda: "c6" in b._done, "c6's build did not finish")
    assert seen.builds_under_way() == 2
    b.let(5)
    b.let(7)
    _until(lambda: seen.builds_under_way() == 0, "the finished builds are still counted")
    assert all(b.take(c).flow is not None for c in ("c5", "c6", "c7"))
    b.close()


def test_a_build_looked_up_before_a_hold_does_not_begin_after_it():
    """The supervisor holds, then reads the count: a builder that chose a cell before the
    hold either counted it first (and is waited for) or begins nothing."""
    import multiprocessing as mp
    from cudnn_rnn.matrix.beside import Beside
    seen = Beside(mp.get_context("spawn")).at(1)

    class _Late(_Builder):
        def __init__(self, **kwargs):
            self.held_once = False  # before the threads start
            super().__init__(**kwargs)

        def _next(self):  # the supervisor's hold lands between a thread's look and its count
            job, key = super()._next()
            if job is not None and job[0] == "c5" and not self.held_once:
                self.held_once = True
                seen.hold("c6")
            return job, key

    b = _Late(beside=seen)
    b.want(_named(5, 6))
    b.wait_begun(1)
    assert b.begun == [6] and seen.builds_under_way() == 1  # c5 refused, looked up again
    seen.hold(None)
    b.wait_begun(2)
    b.let(5)
    b.let(6)
    _until(lambda: seen.builds_under_way() == 0, "the finished builds are still counted")
    b.close()
