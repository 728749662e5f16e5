"""``python -m otelcar.model.llama_server``: llama-cpp-python's server, plus otelcar's format.

Exactly ``python -m llama_cpp.server`` (same arguments, same OpenAI-compatible API) after
registering the ``otelcar-gemma`` chat format (:mod:`otelcar.model.chat_format`) in the
server process, so ``--chat_format otelcar-gemma`` resolves, and keeping the model on the
portable CPU kernels (:func:`otelcar.model.kernels.use_portable_kernels`). Built-in formats
work unchanged.
"""

from __future__ import annotations

from otelcar.model.chat_format import register
from otelcar.model.kernels import use_portable_kernels


def main() -> None:
    """Register the format, keep to the portable kernels, then hand over to llama-cpp-python's
    server ``main``."""
    register()
    use_portable_kernels()
    from llama_cpp.server.__main__ import main as serve

    serve()


if __name__ == "__main__":
    main()
