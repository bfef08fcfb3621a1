"""The PyTorch FP8 peer of the benchmark (cudnn_rnn/compare/torch_fp8.py): the gate function
compiled where torch.compile works at the first forward (it compiles lazily), else the eager
one with why (CPU, PyTorch only); on a GPU, every cell verified against float64 and timed
from CUDA-graph replays."""
import pytest

from cudnn_rnn.compare import torch_fp8

torch = pytest.importorskip("torch", reason="the FP8 peer is PyTorch code")


def test_a_compile_that_fails_at_the_first_call_falls_back_to_the_eager_gates(monkeypatch):
    def lazy(fn, **kw):
        def compiled(*args):
            raise RuntimeError("BackendCompilerFailed: inductor raised\nmore lines")
        return compiled
    monkeypatch.setattr(torch, "compile", lazy)
    seen = []
    gates, how = torch_fp8.compiled_gates("GRU", lambda g: seen.append(g(0, 0, 0, 0, 1.0)))
    assert how == ("eager (torch.compile failed: RuntimeError: BackendCompilerFailed: "
                   "inductor raised)")
    assert gates.__name__ == "gru" and seen == []


def test_a_compile_that_works_is_kept_after_its_first_forward(monkeypatch):
    made = []
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: made.append(kw) or fn)
    seen = []
    gates, how = torch_fp8.compiled_gates("LSTM", seen.append)
    assert how == "torch.compile" and seen == [gates] and gates.__name__ == "lstm"
    assert made == [{"dynamic": False, "fullgraph": True}]


@pytest.mark.gpu
@pytest.mark.parametrize("cell", ["LSTM", "GRU", "RNN_TANH", "RNN_RELU"])
def test_the_peer_verifies_against_float64_and_times_graph_replays(cuda, cell):
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("needs PyTorch with a GPU of compute capability 8.9+ (E4M3 GEMMs)")
    got = torch_fp8.time_torch_fp8(cell, 8, 2, 256, 32, 256, True, reps=5, budget_s=0.05)
    assert "skipped" not in got, got
    assert got["gates"] == "torch.compile" and got["timed_as"] == "graph" and got["ms"] > 0
    assert 0 < max(got["errors"].values()) <= torch_fp8.BOUND
