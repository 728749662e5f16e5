"""Load the local model in-process (for the ``llama-cpp`` policy), without a server.

:func:`load_llama` returns a ``llama_cpp.Llama`` on the prepared GGUF with the same chat
format, context size, seed and thread count the server uses, so a policy gets the same
behaviour in-process as through ``otelcar model serve`` (on the same portable CPU kernels,
:mod:`otelcar.model.kernels`). A ``Llama`` is not thread-safe: use
one per thread (or a lock), and pass ``seed`` on every call for reproducible samples.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from otelcar.model.chat_format import register
from otelcar.model.errors import INSTALL_HINT, ModelNotInstalled
from otelcar.model.kernels import use_portable_kernels
from otelcar.model.prepare import prepare_model
from otelcar.model.server import (
    DEFAULT_CHAT_FORMAT,
    DEFAULT_N_BATCH,
    DEFAULT_N_CTX,
    DEFAULT_SEED,
    default_batch_threads,
    default_threads,
)


def load_llama(
    model_path: Path | None = None,
    *,
    chat_format: str | None = DEFAULT_CHAT_FORMAT,
    n_ctx: int = DEFAULT_N_CTX,
    seed: int = DEFAULT_SEED,
    n_threads: int | None = None,
    n_threads_batch: int | None = None,
    verbose: bool = False,
    **kwargs: Any,
) -> Any:
    """A ``llama_cpp.Llama`` for ``model_path`` (default: the embedded model, prepared first).

    Extra keyword arguments go to ``llama_cpp.Llama`` unchanged. Raises
    :class:`~otelcar.model.errors.ModelNotInstalled` when llama-cpp-python is missing.
    """
    try:
        llama_cpp = importlib.import_module("llama_cpp")
    except ImportError as exc:
        raise ModelNotInstalled(f"llama-cpp-python is not installed: {INSTALL_HINT}") from exc
    register()
    use_portable_kernels()
    path = prepare_model() if model_path is None else Path(model_path)
    threads = n_threads or default_threads()
    kwargs.setdefault("n_batch", DEFAULT_N_BATCH)
    return llama_cpp.Llama(
        model_path=str(path),
        chat_format=chat_format,
        n_ctx=n_ctx,
        seed=seed,
        n_threads=threads,
        n_threads_batch=n_threads_batch or default_batch_threads(),
        verbose=verbose,
        **kwargs,
    )
