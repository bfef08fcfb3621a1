"""Weight and input files as numpy arrays: ``.pt`` (PyTorch, when importable), ``.safetensors``
(read here, without the package), ``.npz`` and ``.npy``. Whatever a file is not gets
:class:`~cudnn_rnn.charlm.statedict.BadModel` with one line saying what to give instead.

safetensors is an 8-byte little-endian header length, a JSON header naming each tensor's
dtype, shape and byte range in the data that follows, then the data; only floating-point
tensors (F16, BF16, F32, F64) are taken.
"""
from __future__ import annotations

import json
import struct
import warnings
import zipfile
from pathlib import Path

import numpy as np

from cudnn_rnn.charlm.statedict import BadModel

WEIGHT_SUFFIXES = (".pt", ".pth", ".safetensors", ".npz")
_SAFE_DTYPES = {"F16": np.float16, "F32": np.float32, "F64": np.float64, "BF16": np.uint16}
_HEADER_MAX = 100 << 20


def _existing(path, what: str) -> Path:
    """``path`` as a file that is there; a folder or nothing is :class:`BadModel` saying
    what to give instead (``what``)."""
    p = Path(path)
    if p.is_dir():
        raise BadModel(f"{p} is a directory; give {what}")
    if not p.is_file():
        raise BadModel(f"{p}: no such file (give {what})")
    return p


def read_weights(path, keep: tuple = ()) -> dict:
    """The tensors of a weights file by name, as float32/float64 numpy arrays (entries
    named in ``keep`` are returned as stored, whatever their type)."""
    p = _existing(path, f"the file of a state_dict ({', '.join(WEIGHT_SUFFIXES)})")
    suffix = p.suffix.lower()
    if suffix not in WEIGHT_SUFFIXES:
        raise BadModel(f"{p}: give a state_dict as {', '.join(WEIGHT_SUFFIXES)}")
    if suffix == ".npz" and not zipfile.is_zipfile(p):
        raise BadModel(f"{p}: not a .npz archive (not a zip file); save with numpy.savez")
    try:
        if suffix == ".npz":
            with np.load(p, allow_pickle=False) as z:
                state = {k: z[k] for k in z.files}
        elif suffix == ".safetensors":
            state = _safetensors(p)
        else:
            state = _torch(p)
    except BadModel:
        raise
    except (OSError, ValueError, TypeError, zipfile.BadZipFile, EOFError, KeyError,
            struct.error, RecursionError) as exc:  # RecursionError: a header nested too deep
        raise BadModel(f"{p}: not a readable {suffix} file ({exc})") from None
    return {k: v if k in keep else _float(p, k, v) for k, v in state.items()}


def _float(p: Path, name: str, a) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype.kind != "f":
        raise BadModel(f"{p}: tensor {name!r} is {a.dtype}, not floating point")
    return a


def _safetensors(p: Path) -> dict:
    raw = p.read_bytes()
    if len(raw) < 8:
        raise BadModel(f"{p}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", raw[:8])
    if n > min(_HEADER_MAX, len(raw) - 8):
        raise BadModel(f"{p}: not a safetensors file (header length {n})")
    header = json.loads(raw[8:8 + n])
    if not isinstance(header, dict):
        raise BadModel(f"{p}: the safetensors header is not a JSON object")
    data, out = raw[8 + n:], {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _SAFE_DTYPES.get(info.get("dtype")) if isinstance(info, dict) else None
        if dtype is None:
            raise BadModel(f"{p}: tensor {name!r} has dtype {info.get('dtype') if isinstance(info, dict) else info!r}; "
                           f"give F16, BF16, F32 or F64 tensors")
        begin, end = info["data_offsets"]
        shape = tuple(int(s) for s in info["shape"])
        a = np.frombuffer(data[begin:end], dtype=dtype)
        if a.size != int(np.prod(shape)) or not 0 <= begin <= end <= len(data):
            raise BadModel(f"{p}: tensor {name!r} has {a.size} values for shape {shape}")
        if info["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[name] = a.reshape(shape)
    return out


def _torch(p: Path) -> dict:
    try:
        import torch  # optional and heavy: only a .pt file needs PyTorch
    except ImportError:
        raise BadModel(f"{p}: reading .pt needs PyTorch, which is not importable here; "
                       f"save the state_dict as .safetensors or .npz") from None
    try:
        with warnings.catch_warnings():  # torch's own warnings: this command says one line
            warnings.simplefilter("ignore")
            obj = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many kinds (UnpicklingError, RuntimeError)
        if str(exc).startswith("Weights only load failed"):  # torch's weights-only refusal
            raise BadModel(f"{p}: torch.load could not read it as tensors alone (not a "
                           "torch.save file, or one holding a whole module or other objects, "
                           "which this command does not unpickle); save module.state_dict() "
                           "with torch.save") from None
        raise BadModel(f"{p}: torch.load could not read it as weights "
                       f"({type(exc).__name__}: {str(exc).splitlines()[0][:120]})") from None
    if not isinstance(obj, dict) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise BadModel(f"{p}: holds a {type(obj).__name__}, not a state_dict of tensors "
                       f"(save module.state_dict())")
    return {k: v.detach().to(torch.float64 if v.dtype == torch.float64 else torch.float32).numpy()
            for k, v in obj.items() if v.is_floating_point()} | \
        {k: v.numpy() for k, v in obj.items() if not v.is_floating_point()}


def read_inputs(path) -> np.ndarray:
    """A ``.npy`` array of inputs, (T, B, input) float, finite."""
    p = _existing(path, "a .npy file of shape (seq, batch, input)")
    if p.suffix.lower() != ".npy":
        raise BadModel(f"{p}: give the input batch as a .npy array of shape (seq, batch, input)")
    with p.open("rb") as fh:
        if fh.read(6) != b"\x93NUMPY":
            raise BadModel(f"{p}: not a .npy file (no numpy header); save with numpy.save")
    try:
        a = np.load(p, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise BadModel(f"{p}: not a readable .npy file ({exc})") from None
    if a.ndim != 3 or 0 in a.shape:
        raise BadModel(f"{p}: has shape {a.shape}; give a (seq, batch, input) array")
    if a.dtype.kind != "f":
        raise BadModel(f"{p}: holds {a.dtype} values; give floating-point inputs")
    if not np.isfinite(a).all():
        raise BadModel(f"{p}: holds NaN or infinite values")
    return a
