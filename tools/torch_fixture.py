"""Regenerate tests/fixtures/torch-rnn/: real torch.nn modules' state_dicts and outputs.

    python3 tools/torch_fixture.py tests/fixtures/torch-rnn [NAME ...]

Needs PyTorch. For each module (a 2-layer bidirectional LSTM with a projection, a 1-layer
GRU, a 2-layer bidirectional tanh RNN, a 1-layer ReLU RNN; only those NAMEd, when given),
seeded: the state_dict as torch.save writes it (``NAME.pt``), as safetensors
(``NAME.safetensors``, by the safetensors package when importable) and as ``.npz``
(numpy arrays of the same tensors), an input batch ``NAME-inputs.npy`` (seq, batch,
input) and ``NAME-outputs.npz``: the module's own y, h_n (and c_n) in float64 from a zero
state, which the tests compare with the project's mapping of the weights into cuDNN's
layout run through the float64 reference.
"""
import json
import sys
from pathlib import Path

import numpy as np

try:
    import torch
except ImportError as _exc:  # one line, exit 2, as the project's commands say it
    print(f"torch_fixture.py: needs PyTorch ({_exc}): pip install 'cudnn-rnn[torch]'",
          file=sys.stderr)
    sys.exit(2)

MODULES = {
    "lstm": lambda: torch.nn.LSTM(12, 16, num_layers=2, bidirectional=True, proj_size=8),
    "gru": lambda: torch.nn.GRU(12, 16, num_layers=1),
    "rnn_tanh": lambda: torch.nn.RNN(12, 16, num_layers=2, bidirectional=True),
    "rnn_relu": lambda: torch.nn.RNN(12, 16, num_layers=1, nonlinearity="relu"),
}


def main(out: Path, names: list) -> None:
    out.mkdir(parents=True, exist_ok=True)
    readme = out / "README.json"
    notes = json.loads(readme.read_text()) if names and readme.exists() else {}
    mine = notes.setdefault("modules", {}) if names else notes
    for name, make in MODULES.items():
        if names and name not in names:
            continue
        if names:
            mine[name] = {"torch": torch.__version__}
        else:
            notes["torch"] = torch.__version__
        torch.manual_seed(7)
        module = make()
        state = module.state_dict()
        torch.save(state, out / f"{name}.pt")
        np.savez(out / f"{name}.npz", **{k: v.numpy() for k, v in state.items()})
        try:
            from safetensors.torch import save_file
            save_file({k: v.contiguous() for k, v in state.items()}, str(out / f"{name}.safetensors"))
            (mine[name] if names else notes)["safetensors"] = "safetensors.torch.save_file"
        except ImportError:
            (mine[name] if names else notes)["safetensors"] = \
                "not importable: no .safetensors written"
        x = torch.randn(5, 3, 12, dtype=torch.float64)
        np.save(out / f"{name}-inputs.npy", x.numpy().astype(np.float32))
        with torch.no_grad():
            y, state_out = module.double()(x.float().double())
        parts = {"y": y.numpy()}
        if isinstance(state_out, tuple):
            parts.update(h_n=state_out[0].numpy(), c_n=state_out[1].numpy())
        else:
            parts["h_n"] = state_out.numpy()
        np.savez(out / f"{name}-outputs.npz", **parts)
    readme.write_text(json.dumps(notes, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
