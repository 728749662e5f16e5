"""Configuration in one place: every environment variable otelcar reads.

| variable | meaning | default |
|---|---|---|
| ``OTELCAR_HOME`` | directory of the local store | ``./.otelcar`` |
| ``OTELCAR_DEBUG`` | ``1`` shows tracebacks on errors in the CLI | unset |
| ``OTELCAR_DATA_DIR`` | user data (local model, its server logs) | ``~/.local/share/otelcar`` |
| ``OTELCAR_PLUGINS`` | which installed plugins load: names, comma-separated; empty: none | all |
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_HOME = "OTELCAR_HOME"
ENV_DEBUG = "OTELCAR_DEBUG"
ENV_DATA_DIR = "OTELCAR_DATA_DIR"
ENV_PLUGINS = "OTELCAR_PLUGINS"
DEFAULT_HOME = ".otelcar"


def default_store_path() -> Path:
    """The store directory: ``$OTELCAR_HOME`` if set, else ``./.otelcar``."""
    return Path(os.environ.get(ENV_HOME) or DEFAULT_HOME)


def debug_enabled() -> bool:
    """Whether ``OTELCAR_DEBUG`` asks for tracebacks."""
    return os.environ.get(ENV_DEBUG, "").strip().lower() in {"1", "true", "yes", "on"}


def enabled_plugins() -> frozenset[str] | None:
    """The installed plugins ``OTELCAR_PLUGINS`` lets load (by entry-point name; empty: none),
    or ``None`` when it is unset: all of them. The built-in plugin always loads."""
    value = os.environ.get(ENV_PLUGINS)
    if value is None:
        return None
    return frozenset(name.strip() for name in value.split(",") if name.strip())
