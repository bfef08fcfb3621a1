"""8-bit RNNs built from cuBLASLt GEMMs: the quantization arithmetic (quant), the host-side
numpy definition of the INT8 and FP8 E4M3 conversions, scales and integer GEMM that the GPU
engine performs and is checked against."""
