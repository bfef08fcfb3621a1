"""Weights drawn on the GPU (marker ``gpu``): what the weight space holds is what the
reference is given, entry by entry, and a second draw with the same seed is the same."""
import numpy as np
import pytest

from cudnn_rnn.bindings.enums import DataType, RNNMode
from cudnn_rnn.engine import dtypes, values
from cudnn_rnn.engine.flow import RNNFlow

from .test_gpu_flow import SMALL

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dt", [DataType.FLOAT, DataType.HALF, DataType.BFLOAT16,
                                DataType.DOUBLE], ids=lambda d: d.name)
def test_the_weight_space_holds_what_the_reference_is_given(lib, cuda, dt):
    cfg = SMALL.replace(mode=RNNMode.LSTM, data_type=dt,
                        math_prec=DataType.DOUBLE if dt == DataType.DOUBLE else DataType.FLOAT)
    with RNNFlow(cfg, lib, device=True, init="random", seed=5) as flow:
        assert flow.run(until="weights").failure is None
        flow.stream.synchronize()  # the draw and the copy ran on the flow's own stream
        space = flow.buf["w"][:flow.sizes["weight_space"]].get()
        item = dtypes.itemsize(dt)
        scale = 1.0 / np.sqrt(cfg.hidden_size)
        for e in flow.entries:
            held = dtypes.decode(space[e.offset:e.offset + e.size * item]
                                 .view(dtypes.storage_dtype(dt)), dt).reshape(e.shape)
            given = flow.drawn["weights"][(e.pseudo_layer, e.lin_id, e.kind)]
            assert type(given).__module__.startswith("cupy")  # drawn and kept on the GPU
            np.testing.assert_array_equal(held, cuda.asnumpy(given))
            assert np.abs(held).max() <= scale * (1 + 1e-2) and np.abs(held).max() > scale / 2
        again = values.draw(cfg, flow.entries, flow.sizes["weight_space"], "random", 5, cuda)
        cuda.cuda.Device().synchronize()
        np.testing.assert_array_equal(cuda.asnumpy(again["image"]), space)
