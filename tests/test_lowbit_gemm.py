"""The engine's GEMM descriptors on the real cuBLASLt (host-side calls, no GPU needed):
each precision's types and the row-major-as-TN layouts are what cuBLASLt holds."""
import numpy as np
import pytest

from cudnn_rnn.bindings.cublaslt.enums import MatmulDescAttribute, Operation
from cudnn_rnn.lowbit.gemm import PRECISIONS, Matmul, Shape


@pytest.mark.parametrize("precision", sorted(PRECISIONS))
def test_each_precision_s_descriptor_and_layouts_read_back_as_planned(precision):
    shape = Shape(M=50 * 256, N=4 * 4096, K=4096)  # the input GEMM, LSTM T 50 B 256
    types = PRECISIONS[precision]
    with Matmul(precision, shape) as mm:
        assert mm.get(MatmulDescAttribute.COMPUTE_TYPE) == types.compute
        assert mm.get(MatmulDescAttribute.SCALE_TYPE) == types.scale
        assert (mm.get(MatmulDescAttribute.TRANSA), mm.get(MatmulDescAttribute.TRANSB)) == (
            Operation.T, Operation.N)
        assert mm.layout("A") == {"type": types.operands, "rows": 4096, "cols": 4 * 4096, "ld": 4096}
        assert mm.layout("B") == {"type": types.operands, "rows": 4096, "cols": 50 * 256, "ld": 4096}
        assert mm.layout("D") == {"type": types.output, "rows": 4 * 4096, "cols": 50 * 256,
                                  "ld": 4 * 4096}
    assert not mm.layouts and not mm.desc  # destroyed, once


def test_the_tn_layouts_compute_the_row_major_product():
    """Column-major reading of the row-major buffers, as cuBLASLt reads them: op(A) @ op(B)
    with A = w^T (K x N, ld K) transposed and B = a^T (K x M) gives out^T, whose
    column-major buffer is the row-major out = a @ w.T."""
    rng = np.random.default_rng(0)
    M, N, K = 5, 7, 3
    a, w = rng.standard_normal((M, K)), rng.standard_normal((N, K))
    layouts = Shape(M, N, K).layouts()

    def col_major(buf, rows, cols, ld):
        return np.asarray(buf).ravel()[: ld * cols].reshape(cols, ld)[:, :rows].T

    A = col_major(w, *layouts["A"])
    B = col_major(a, *layouts["B"])
    D = A.T @ B  # TRANSA = T, TRANSB = N
    rows, cols, ld = layouts["D"]
    out = np.zeros(ld * cols)
    out.reshape(cols, ld)[:, :rows] = D.T
    np.testing.assert_allclose(out.reshape(M, N), a @ w.T, rtol=1e-12)


def test_an_unknown_precision_or_a_size_that_is_not_a_gemm_is_refused_before_any_call():
    with pytest.raises(ValueError, match="precision must be one of"):
        Matmul("int4", Shape(8, 8, 8))
    for bad in ((0, 8, 8), (8, -1, 8), (8, 8, 2 ** 63), (8, 8.0, 8)):
        with pytest.raises(ValueError, match="positive integers"):
            Shape(*bad)


def test_close_is_safe_twice_and_the_library_outlives_the_descriptors():
    mm = Matmul("int8", Shape(64, 2048, 512))
    lt = mm.lt
    mm.close()
    mm.close()
    assert mm.lt is lt and not mm.layouts


@pytest.mark.parametrize("precision", ["fp16", "bf16", "int8", "fp8"])
def test_the_dense_rates_multiply_random_codes_of_each_format_not_zeros(precision):
    """lowbit.rates.operand (numpy here, CuPy on the GPU): the GEMM rates are measured on
    random codes of the buffer's dtype, every one a finite value, both signs, many
    distinct codes (a rate on zeros would flatter the floor)."""
    import numpy as np
    from cudnn_rnn.lowbit import kernels, rates
    x = rates.operand(np, np.random.default_rng(0), (64, 48), precision)
    assert x.shape == (64, 48)
    assert x.dtype == np.dtype(kernels.FORMATS[kernels.OPERANDS[precision]][0])
    if precision == "fp16":
        values = x.astype(np.float32)
    elif precision == "bf16":
        values = (x.astype(np.uint32) << 16).view(np.float32)
    elif precision == "int8":
        values = x.astype(np.float32)
        assert values.min() >= -127
    else:
        assert not ((x & 0x7F) == 0x7F).any()  # E4M3's NaN codes
        values = np.where(x & 0x80, -1.0, 1.0) * (x & 0x7F)
    assert np.isfinite(values).all() and (values > 0).any() and (values < 0).any()
    assert len(np.unique(x)) > 100


def test_a_dense_rate_of_a_precision_without_an_operand_format_is_refused():
    import numpy as np
    from cudnn_rnn.lowbit import rates
    with pytest.raises(ValueError, match="no random operand for 'fp32'"):
        rates.operand(np, np.random.default_rng(0), (2, 2), "fp32")
