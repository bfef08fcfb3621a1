"""The text the shipped models learn from and are judged on: Python's standard library.

Every ``.py`` file under the running interpreter's standard-library folder, test suites
and ``site-packages`` excluded, is read as UTF-8 and sorted by its path relative to that
folder. A file belongs to the *held-out* set when the CRC-32 of that relative path is
divisible by :data:`HELD_OUT_EVERY`, else to the training set, so the split is a property
of the name, the same on every Python version, and no file is in both.

Characters map to codes of a fixed vocabulary (:data:`VOCAB`): tab, newline and printable
ASCII; anything else becomes :data:`UNKNOWN`'s code. A *slice* is a stretch of such text
shipped with the model (``heldout.txt``, ``calibration.txt``), so the precision table and
its CPU test never depend on the local interpreter's sources.
"""
from __future__ import annotations

import hashlib
import sysconfig
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HELD_OUT_EVERY = 8
UNKNOWN = "\x00"  # stands for every character outside the printable ASCII set
VOCAB = UNKNOWN + "\t\n" + "".join(chr(c) for c in range(32, 127))
_CODE = np.full(0x110000, 0, dtype=np.uint8)
_CODE[[ord(ch) for ch in VOCAB]] = np.arange(len(VOCAB), dtype=np.uint8)
EXCLUDED_PARTS = {"test", "tests", "idle_test", "site-packages", "__pycache__"}


def encode(text: str) -> np.ndarray:
    """uint8 codes of ``text`` in :data:`VOCAB` (unknown characters -> 0)."""
    return _CODE[np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)]


def decode(codes) -> str:
    return "".join(VOCAB[int(c)] for c in codes)


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def held_out(rel: str) -> bool:
    """Whether the standard-library file ``rel`` (posix path) is in the held-out set."""
    return zlib.crc32(rel.encode()) % HELD_OUT_EVERY == 0


def source_files(root: Path | None = None) -> list[str]:
    """The relative posix paths of the corpus's files, sorted."""
    root = root or stdlib_root()
    out = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        if EXCLUDED_PARTS.isdisjoint(rel.parts[:-1]) and not rel.name.startswith("test_"):
            out.append(rel.as_posix())
    return sorted(out)


@dataclass
class Corpus:
    """The two sets' texts and the files they came from."""
    root: str
    train_files: list
    heldout_files: list
    train: str
    heldout: str

    def describe(self) -> dict:
        """Provenance: where the text came from, how much, and its digest."""
        return {"root": self.root, "train_files": len(self.train_files),
                "heldout_files": len(self.heldout_files), "train_chars": len(self.train),
                "heldout_chars": len(self.heldout),
                "train_sha256": hashlib.sha256(self.train.encode()).hexdigest(),
                "heldout_sha256": hashlib.sha256(self.heldout.encode()).hexdigest(),
                "split": f"crc32(relative path) % {HELD_OUT_EVERY} == 0 is held out"}


def _read(root: Path, rel: str) -> str:
    return (root / rel).read_text(encoding="utf-8", errors="replace")


def load(root: Path | None = None) -> Corpus:
    """The standard library's corpus; ValueError if it has no held-out or training text."""
    root = root or stdlib_root()
    files = source_files(root)
    train = [f for f in files if not held_out(f)]
    heldout = [f for f in files if held_out(f)]
    if not train or not heldout:
        raise ValueError(f"{root} has no Python sources to train on (found {len(files)} files)")
    return Corpus(str(root), train, heldout, "".join(_read(root, f) for f in train),
                  "".join(_read(root, f) for f in heldout))


def batch(codes: np.ndarray, seq: int, batch_size: int, start: int = 0):
    """``batch_size`` consecutive stretches of ``seq + 1`` codes from ``start``: the inputs
    (seq, batch) and the next-character targets (seq, batch). ValueError if too short."""
    need = start + batch_size * (seq + 1)
    if len(codes) < need:
        raise ValueError(f"{batch_size} sequences of {seq} + 1 characters need {need} "
                         f"characters, the text has {len(codes)}")
    block = np.asarray(codes[start:need]).reshape(batch_size, seq + 1).T
    return np.ascontiguousarray(block[:-1]), np.ascontiguousarray(block[1:])
