"""Built-in export formats (non-OTLP dumps). Each module registers one
:class:`~otelcar.ingest.formats.ExportFormat` when imported; import it here."""

from otelcar.ingest.exports import (
    langfuse,  # noqa: F401 - Langfuse exports
    langsmith,  # noqa: F401 - LangSmith runs
    phoenix,  # noqa: F401 - Phoenix span exports
    whowhen,  # noqa: F401 - Who&When logs
)
