"""A character-level language model made and measured by the project: the corpus (Python's
standard library sources), the network (embedding, a cuDNN RNN, a linear decoder), training
through cuDNN's forward and backward calls, a user's own torch/safetensors/npz weights, and
the precision table's job."""
