"""A report's files written once every one of them is made (a report that fails to render
leaves nothing half-written)."""
from __future__ import annotations

from pathlib import Path


def write_files(folder: Path, files: dict) -> list[Path]:
    """Each ``name: content`` of ``files`` into ``folder``: text, bytes, or None for a file
    an earlier rendering wrote that this one no longer has (a chart: removed). Returns the
    paths written."""
    written = []
    for name, content in files.items():
        path = Path(folder) / name
        if content is None:
            path.unlink(missing_ok=True)
            continue
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        written.append(path)
    return written
