"""Built-in export formats (non-OTLP dumps). Each module registers one
:class:`~otelcar.ingest.formats.ExportFormat` when imported; import it here."""
