"""otelcar: which step of a failed LLM-agent run caused the failure, from its OTel trace.

The public API::

    import otelcar
    store = otelcar.Store()                       # ./.otelcar or $OTELCAR_HOME
    otelcar.import_files(["dump.jsonl"], store=store)
    steps = store.steps("4bf92f")                 # a Polars DataFrame (otelcar.STEPS_SCHEMA)
    steps = otelcar.read_otlp("dump.jsonl")       # the same, in memory, no store

The names load on first use (PEP 562): ``import otelcar`` alone loads neither polars nor the
readers, so the command line starts fast and a library user pays for what they touch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from otelcar.errors import FormatError, OtelcarError, StoreError, TraceNotFound

if TYPE_CHECKING:
    from otelcar.importer import import_files, read_otlp
    from otelcar.messages import Message, ToolCall
    from otelcar.schema import STEPS_SCHEMA, TRACES_SCHEMA
    from otelcar.store import ImportReport, Store

__version__ = "0.1.0"

#: Public name → the module that defines it.
_LAZY = {
    "import_files": "otelcar.importer",
    "read_otlp": "otelcar.importer",
    "Message": "otelcar.messages",
    "ToolCall": "otelcar.messages",
    "STEPS_SCHEMA": "otelcar.schema",
    "TRACES_SCHEMA": "otelcar.schema",
    "ImportReport": "otelcar.store",
    "Store": "otelcar.store",
}

__all__ = [
    "STEPS_SCHEMA",
    "TRACES_SCHEMA",
    "FormatError",
    "ImportReport",
    "Message",
    "OtelcarError",
    "Store",
    "StoreError",
    "ToolCall",
    "TraceNotFound",
    "__version__",
    "import_files",
    "read_otlp",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'otelcar' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next access is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
