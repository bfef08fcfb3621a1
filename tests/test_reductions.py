"""engine.gpu.plain_reductions: CuPy's own setting of its reduction accelerators (the real
CuPy; it is read and set without a GPU), CUB's block reductions left out inside and the
setting before restored after, on an error too; routines keep their accelerators."""
import pytest

cupy = pytest.importorskip("cupy")

from cudnn_rnn.engine import gpu  # noqa: E402

core = cupy._core


@pytest.fixture
def with_cub():
    before = gpu._accelerator_names(core, core.get_reduction_accelerators())
    routines = gpu._accelerator_names(core, core.get_routine_accelerators())
    core.set_reduction_accelerators(["cub"])
    yield
    core.set_reduction_accelerators(before)
    core.set_routine_accelerators(routines)


def test_inside_no_cub_block_reduction_and_the_routines_keep_theirs(with_cub):
    routines = core.get_routine_accelerators()
    with gpu.plain_reductions(cupy):
        assert core._accelerator.ACCELERATOR_CUB not in core.get_reduction_accelerators()
        assert core.get_routine_accelerators() == routines
    assert core.get_reduction_accelerators() == [core._accelerator.ACCELERATOR_CUB]


def test_an_error_inside_restores_the_setting(with_cub):
    with pytest.raises(KeyError):
        with gpu.plain_reductions(cupy):
            raise KeyError("inside")
    assert core.get_reduction_accelerators() == [core._accelerator.ACCELERATOR_CUB]


def test_nested_uses_restore_in_turn(with_cub):
    with gpu.plain_reductions(cupy):
        with gpu.plain_reductions(cupy):
            pass
        assert core.get_reduction_accelerators() == []
    assert core.get_reduction_accelerators() == [core._accelerator.ACCELERATOR_CUB]


def test_for_a_process_without_a_gpu_nothing_changes(with_cub, monkeypatch):
    monkeypatch.setenv("CUDNN_RNN_NO_GPU", "1")
    gpu._probe.cache_clear()
    try:
        gpu.plain_reductions_here()
        assert core.get_reduction_accelerators() == [core._accelerator.ACCELERATOR_CUB]
    finally:
        monkeypatch.delenv("CUDNN_RNN_NO_GPU")
        gpu._probe.cache_clear()
