"""The engine: NVIDIA's RNN_example flow over cuDNN, and nothing that judges its results.

:mod:`.config` (what one run is) → :mod:`.descriptors` (cuDNN objects that always get
destroyed) → :mod:`.flow` (the sample's stages and compute calls), with :mod:`.weights`
(where cuDNN puts each matrix and bias), :mod:`.values` (the inputs and weights a flow
draws, and the cache that shares them), :mod:`.readback` (device buffers back as float64),
:mod:`.dtypes` (host encodings of cuDNN's data types), :mod:`.gpu` (CuPy, the device and
CUDA's errors) and :mod:`.timing` (CUDA-event medians and the TFLOPS formula).
Imports only :mod:`cudnn_rnn.bindings`.
"""
