"""``python -m otelcar.model.llama_server``: llama-cpp-python's server, plus otelcar's format.

Exactly ``python -m llama_cpp.server`` (same arguments, same OpenAI-compatible API) after
registering the ``otelcar-gemma`` chat format (:mod:`otelcar.model.chat_format`) in the
server process, so ``--chat_format otelcar-gemma`` resolves. Built-in formats work unchanged.
"""

from __future__ import annotations

from otelcar.model.chat_format import register


def main() -> None:
    """Register the format, then hand over to llama-cpp-python's server ``main``."""
    register()
    from llama_cpp.server.__main__ import main as serve

    serve()


if __name__ == "__main__":
    main()
