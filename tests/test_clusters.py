"""The persistent kernel in thread-block clusters, without a GPU: the launch shape's name,
the partition (each group one cluster of consecutive CTAs, no counter wait on its own
group), its refusals, the numpy model of the kernel in clusters against the twin in any
order the waits and the cluster barrier allow, and the kernel compiled for sm_90."""
import numpy as np
import pytest

from cudnn_rnn.bindings.enums import RNNMode
from cudnn_rnn.engine.config import RNNConfig
from cudnn_rnn.lowbit import partition, tables
from cudnn_rnn.lowbit import persistent as P
from cudnn_rnn.lowbit import ptxas
from cudnn_rnn.lowbit.engine import Unsupported
from cudnn_rnn.lowbit.launch import Settings

from tests.test_persistent import CELLS, SMEM, _cfg, _close, _nvrtc_or_skip, _run_model

SEED = RNNConfig(seq_length=20, num_layers=2, hidden_size=512, mini_batch=64, input_size=512,
                 mode=RNNMode.LSTM)


def test_a_launch_shape_names_its_cluster_and_reads_back():
    s = Settings.parse("b3t256k16")
    assert (s.batch_slices, s.threads, s.cluster) == (3, 256, 16) and s.name == "b3t256k16"
    assert Settings.parse("b1t256").cluster == 0
    assert Settings(areg=True, cluster=8).name == "b1t256rk8"
    for bad in ("b1t256k0", "b1t256k", "b1t256k16r"):
        with pytest.raises(ValueError, match="no launch shape"):
            Settings.parse(bad)


@pytest.mark.parametrize("layers,bi", [(1, False), (2, False), (3, False), (1, True), (2, True)])
@pytest.mark.parametrize("cluster,batch_slices", [(8, 1), (8, 2), (16, 1)])
def test_each_group_is_one_cluster_of_consecutive_ctas_and_waits_only_for_its_feeders(
        layers, bi, cluster, batch_slices):
    cfg = _cfg(RNNMode.GRU, layers, bi, H=64, B=9)
    part = partition.plan(cfg, "int8" if layers > 1 else None, "int8", sm_count=132,
                          smem_per_block=SMEM, batch_slices=batch_slices, cluster=cluster)
    plain = partition.plan(cfg, "int8" if layers > 1 else None, "int8", sm_count=132,
                           smem_per_block=SMEM, batch_slices=batch_slices)
    assert part.cluster == cluster and part.grid == len(part.groups) * cluster
    owned = np.zeros((cfg.pseudo_layers, cfg.mini_batch, cfg.hidden_size), int)
    for first in range(0, part.grid, cluster):
        group = part.slices[first:first + cluster]
        assert len({(s.k, s.bs) for s in group}) == 1  # one cluster, one group
        assert {s.ctr for s in group} == {part.counter(group[0].k, group[0].bs)}
        for s in group:
            owned[s.k, s.b0:s.b0 + s.nb, s.j0:s.j0 + s.nu] += 1
    assert (owned == 1).all()
    w, w_plain = tables.waits(part), tables.waits(plain)
    for i, s in enumerate(part.slices):
        own = part.counter(s.k, s.bs)
        assert own not in w[i, :, :, 0]  # its own group: the cluster barrier
        # the feeders' waits: the counter waits of the launch without clusters, but its own
        j = next(j for j, q in enumerate(plain.slices) if (q.k, q.bs) == (s.k, s.bs))
        feeders = [[c, t * cluster // plain.units[q_k]] for row in w_plain[j] for c, t in row
                   if c >= 0 and c != plain.counter(s.k, s.bs)
                   for q_k in [next(k for (k, bs), g in plain.groups.items() if g == c)]]
        assert sorted(tuple(e) for e in feeders) == sorted(
            (int(c), int(t)) for row in w[i] for c, t in row if c >= 0)


@pytest.mark.parametrize("cfg,kw,message", [
    (_cfg(H=40), dict(cluster=16), r"H 40 does not split into 16 CTAs"),
    (_cfg(H=64), dict(cluster=17), r"a cluster of 17 CTAs: 1 to 16"),
    (_cfg(H=64), dict(cluster=16, batch_slices=5), r"2 pseudo-layers x 5 batch slices x 16 "
                                                   r"CTAs a cluster: 160 CTAs, 132 available"),
    (SEED, dict(cluster=16, threads=512), r"needs \d+ bytes of shared memory")])
def test_each_refusal_of_a_partition_in_clusters_says_what_is_short(cfg, kw, message):
    with pytest.raises(partition.DoesNotFit, match=message):
        partition.plan(cfg, "int8", "int8", sm_count=132, smem_per_block=SMEM, **kw)


def test_clusters_need_sm_90_and_do_not_poll():
    from cudnn_rnn.lowbit import operands
    from cudnn_rnn.lowbit import candidates as C
    cfg = _cfg(H=64, B=8)
    values = C.draw(cfg, 1)
    gemms = operands.precisions(values["stacked"], "fp16", None)
    limits = {"sm_count": 132, "smem_per_block": SMEM, "cooperative": True,
              "capability": (8, 9)}
    with pytest.raises(Unsupported, match=r"clusters need compute capability 9\.0, this GPU "
                                          r"has 8\.9"):
        P.layout(cfg, gemms, None, Settings(cluster=8), limits)
    hopper = dict(limits, capability=(9, 0))
    with pytest.raises(Unsupported, match="cluster barrier; polling"):
        P.layout(cfg, gemms, None, Settings(cluster=8, poll=True), hopper)
    part, _ = P.layout(cfg, gemms, None, Settings(cluster=8), hopper)
    assert part.cluster == 8 and P.defines(cfg, part, False)["CLUSTER"] == 8


@pytest.mark.parametrize("mode", CELLS)
@pytest.mark.parametrize("layers,bi", [(1, False), (2, False), (3, False), (2, True)])
def test_the_model_of_the_kernel_in_clusters_equals_the_twin(mode, layers, bi):
    cfg = _cfg(mode, layers, bi, H=32)
    for order in (0, 1, 2):  # any order the waits and the cluster barrier allow
        got, want, part = _run_model(cfg, sms=132, cluster=8, order=order)
        assert part.cluster == 8
        _close(got, want)
    got, want, _ = _run_model(cfg, "int8", "both", sms=132, cluster=4, batch_slices=2)
    _close(got, want)


def test_without_the_cluster_barrier_a_cta_reads_a_slot_its_cluster_has_not_written(
        monkeypatch):
    """The waits of a launch in clusters leave the own group to the cluster barrier: the
    model without that barrier reads an unwritten slot (NaN) in some order."""
    from tests import persistent_model
    real = persistent_model.Model.ready

    def no_barrier(self, cta, step, done):
        return real(self, cta, step, [max(done)] * len(done))
    monkeypatch.setattr(persistent_model.Model, "ready", no_barrier)
    with pytest.raises(AssertionError, match="unwritten slot"):
        for order in range(8):
            _run_model(_cfg(RNNMode.LSTM, 1, False, H=32), sms=132, cluster=8, order=order)


@pytest.mark.parametrize("fmt", ["int8", "e4m3"])
@pytest.mark.parametrize("mode", [RNNMode.LSTM, RNNMode.GRU])
@pytest.mark.parametrize("batch_slices", [2, 3])
def test_the_kernel_in_clusters_compiles_for_sm_90(fmt, mode, batch_slices):
    _nvrtc_or_skip()
    cfg = RNNConfig(seq_length=20, num_layers=2, hidden_size=512, mini_batch=64,
                    input_size=512, mode=mode)
    part = partition.plan(cfg, fmt, fmt, sm_count=132, smem_per_block=SMEM,
                          batch_slices=batch_slices, cluster=16)
    consts = P.defines(cfg, part, gx_int=fmt == "int8")
    assert consts["CLUSTER"] == 16
    # 8 m-tiles x 2 n-tiles of accumulators a warp: up to 255 registers, and an LSTM's
    # kernel spills a few bytes (8-56 with KS and TS compiled in; none without them)
    info = ptxas.ptxas_info(consts)
    assert info["registers"] <= 255 and info["spill_stores"] <= 64, info


def _ptx(source: str, arch: str = "compute_90") -> str:
    from cupy_backends.cuda.libs import nvrtc
    prog = nvrtc.createProgram(source, "persistent.cu", [], [])
    try:
        nvrtc.compileProgram(prog, [f"--gpu-architecture={arch}", "--std=c++17"])
        return nvrtc.getPTX(prog).decode()
    finally:
        nvrtc.destroyProgram(prog)


STEP_WAIT = "        cl_wait();  // the group's previous step, h's slot s, written by every CTA of it\n"


def test_the_kernel_waits_at_the_cluster_barrier_before_each_step_and_only_in_clusters():
    _nvrtc_or_skip()
    cfg = _cfg(H=64, B=8)
    ptx = {c: _ptx(P.source(P.defines(cfg, partition.plan(
        cfg, "fp16", "fp16", sm_count=132, smem_per_block=SMEM, cluster=c), False)))
        for c in (0, 8)}
    assert "barrier.cluster" not in ptx[0] and ".reqnctapercluster" not in ptx[0]
    assert ".reqnctapercluster 8" in ptx[8] and "barrier.cluster.arrive.release" in ptx[8]
    # the step's own wait is there: the kernel without it compiles to fewer waits
    source = P.source(P.defines(cfg, partition.plan(cfg, "fp16", "fp16", sm_count=132,
                                                    smem_per_block=SMEM, cluster=8), False))
    assert source.count(STEP_WAIT) == 1
    without = _ptx(source.replace(STEP_WAIT, ""))
    assert ptx[8].count("barrier.cluster.wait.acquire") > without.count(
        "barrier.cluster.wait.acquire")


def test_a_kernel_in_clusters_that_polls_does_not_compile():
    _nvrtc_or_skip()
    cfg = _cfg(H=64, B=8)
    part = partition.plan(cfg, "fp16", "fp16", sm_count=132, smem_per_block=SMEM, cluster=8)
    with pytest.raises(RuntimeError, match="does not poll"):
        ptxas.nvrtc_compile(P.defines(cfg, part, False, poll=True), "sm_90")


def _tool(*args):
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    return subprocess.run([sys.executable, str(root / "tools" / "cluster_probe.py"), *args],
                          capture_output=True, text=True, timeout=120, cwd=root)


@pytest.mark.parametrize("args,needle", [
    (["--sizes", "2,x"], "comma-separated integers"),
    (["--sizes", "17"], "clusters of 1 to 16"),
    (["--bytes", "24"], "multiples of 16"),
])
def test_the_cluster_probe_refuses_bad_input_in_one_line_and_writes_nothing(tmp_path, args,
                                                                            needle):
    proc = _tool("--out", str(tmp_path / "out"), *args)
    assert proc.returncode == 2 and needle in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


def test_the_cluster_probes_kernels_compile_for_sm_90(tmp_path):
    _nvrtc_or_skip()
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parent.parent / "tools" / "cluster_probe.py"
    spec = importlib.util.spec_from_file_location("tools_cluster_probe", path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    from cudnn_rnn.lowbit import exchange  # its round trip: the cluster floor's exchange
    for cluster in (2, 16):
        for ptx in (_ptx(tool.source(cluster)), _ptx(exchange.source(cluster))):
            assert f".reqnctapercluster {cluster}" in ptx
        assert "barrier.cluster.wait" in ptx
