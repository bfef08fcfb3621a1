"""Comparisons with the world outside cuDNN's RNN API: PyTorch's modules (:mod:`.pytorch`),
cuDNN's API log of a PyTorch run (:mod:`.apilog`), dense GEMM rates (:mod:`.gemm`) and the
ctypes-overhead measurement (:mod:`.overhead`). Their worker-side functions are jobs
(:mod:`cudnn_rnn.matrix.jobs`) looked up by name, so the worker imports none of them."""
