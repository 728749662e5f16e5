"""The embedded store (raw segments, derived Parquet tables, trace index)."""

from otelcar.store.report import ImportReport, RecordProblem
from otelcar.store.store import Store, scan_store

__all__ = ["ImportReport", "RecordProblem", "Store", "scan_store"]
