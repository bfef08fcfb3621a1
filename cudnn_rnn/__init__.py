"""cudnn-rnn: which cuDNN RNN configurations work on this GPU, how fast and how accurate.

Top-down: :mod:`.config` (what to run) → :mod:`.descriptors` (cuDNN objects that
always get destroyed) → :mod:`.flow` (NVIDIA's RNN_example, stage by stage) →
:mod:`.reference` (an independent float64 model to check the numbers) →
:mod:`.example` and :mod:`.probe` (the command lines).
"""
__version__ = "0.2.0"
