"""JSON files replaced atomically: a reader sees the old document or the new one, never a
part, and a crash leaves one of them whole."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_json(path: Path, document: Any) -> None:
    """Write ``document`` to ``path``: a temporary file in the same folder, ``fsync``-ed,
    renamed over ``path``, then the folder ``fsync``-ed (the rename survives a crash)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(partial, "w", encoding="utf-8") as handle:
        json.dump(document, handle, ensure_ascii=False, default=str)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(partial, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def read_json(path: Path) -> Any:
    """The document at ``path``; ``None`` when it is missing or not JSON (a damaged file is
    read as absent, never raised)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
