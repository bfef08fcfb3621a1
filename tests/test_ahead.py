"""The PERSIST_DYNAMIC builds ahead (cudnn_rnn.matrix.ahead), what runs without a GPU: which
cells the supervisor names, the builders' cuDNN objects left out of the cells' leak count,
and a worker without a GPU that is named cells ahead and runs its cells as before."""
import threading

from cudnn_rnn.bindings.enums import RNNAlgo, RNNMode
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.engine.descriptors import RNNDescriptor, live_objects, uncounted
from cudnn_rnn.matrix.ahead import Schedule
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
