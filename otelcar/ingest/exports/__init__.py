"""Built-in export formats (non-OTLP dumps): each module's ``FORMATS``, registered in the
order of :data:`BUILTIN_FORMAT_MODULES` by the built-in plugin (:mod:`otelcar.plugins`)."""

#: The modules whose ``FORMATS`` are the built-in export formats, in detection order.
BUILTIN_FORMAT_MODULES = (
    "otelcar.ingest.exports.langfuse",  # Langfuse exports
    "otelcar.ingest.exports.langsmith",  # LangSmith runs
    "otelcar.ingest.exports.phoenix",  # Phoenix span exports
    "otelcar.ingest.exports.whowhen",  # Who&When logs
)
