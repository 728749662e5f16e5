"""otelcar: which step of a failed LLM-agent run caused the failure, from its OTel trace.

The public API::

    import otelcar
    store = otelcar.Store()                       # ./.otelcar or $OTELCAR_HOME
    otelcar.import_files(["dump.jsonl"], store=store)
    steps = store.steps("4bf92f")                 # a Polars DataFrame (otelcar.STEPS_SCHEMA)
    steps = otelcar.read_otlp("dump.jsonl")       # the same, in memory, no store
"""

from otelcar.errors import FormatError, OtelcarError, StoreError, TraceNotFound
from otelcar.importer import import_files, read_otlp
from otelcar.messages import Message, ToolCall
from otelcar.schema import STEPS_SCHEMA, TRACES_SCHEMA
from otelcar.store import ImportReport, Store

__version__ = "0.1.0"

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
