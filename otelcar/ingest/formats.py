"""Registry of non-OTLP dump formats (LangSmith runs, Langfuse exports, Who&When logs, …).

An :class:`ExportFormat` turns the bytes of one raw record into frames. Export formats map
their records onto :class:`~otelcar.ingest.frames.SpanFrame` objects whose attributes are
namespaced by the format (e.g. ``langsmith.run.*``), and a dialect mapper in
:mod:`otelcar.conventions` turns those spans into steps: the raw bytes stay verbatim in the
store, and ``otelcar reindex`` re-runs both halves.

File splitting stays in :mod:`otelcar.ingest.files`: a JSON file is either one document or
one JSON value per line; for each, the first value is shown to every registered format's
``detect`` (in registration order) and the first that claims it names the record format.
A binary format claims files by ``magic`` bytes and takes the whole file as one record.

The registry is filled through the ``register_formats`` plugin hook (:mod:`otelcar.plugins`),
the built-ins (:mod:`otelcar.ingest.exports`) first, the first time it is consulted;
:func:`register_format` is the door that hook's ``register`` goes through.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from otelcar.errors import FormatError
from otelcar.ingest.frames import Decoded
from otelcar.plugins.door import RegistryHook


@dataclass(frozen=True, slots=True)
class ExportFormat:
    """A dump format other than OTLP.

    ``detect(value)`` gets the first decoded JSON value of a file (a line's object, or the
    whole document) and says whether this format owns the file; ``decode(payload)`` turns one
    record's bytes into frames and raises :class:`FormatError` with a reason when it cannot.
    Files that are not JSON (Parquet, CSV) are claimed by ``magic`` (their first bytes) or by
    ``claims_head(head)`` (the first 64 KiB) and are taken whole, as one record.

    ``decode_value(value, replaced)``, optional for a JSON format, decodes a record from the
    value the file sniffer already parsed (with the count of surrogates
    :func:`otelcar.ingest.jsontext.loads` replaced in it), as ``decode`` would from its bytes:
    a sniffed file is then parsed once.
    """

    name: str
    description: str
    decode: Callable[[bytes], Decoded]
    detect: Callable[[Any], bool] | None = None
    magic: bytes | None = None
    claims_head: Callable[[bytes], bool] | None = None
    decode_value: Callable[[Any, int], Decoded] | None = None


_FORMATS: dict[str, ExportFormat] = {}


def _add(fmt: ExportFormat) -> None:
    if not isinstance(fmt, ExportFormat):
        raise TypeError(f"an export format must be an ExportFormat, not {type(fmt).__name__}")
    _FORMATS[fmt.name] = fmt


_PLUGINS = RegistryHook("register_formats", _add)


def _formats() -> dict[str, ExportFormat]:
    _PLUGINS.ensure()
    return _FORMATS


def register_format(fmt: ExportFormat) -> None:
    """Add (or replace, by name) an export format, after the plugins' formats."""
    _formats()
    _add(fmt)


def export_formats() -> list[ExportFormat]:
    """Registered export formats, in registration order."""
    return list(_formats().values())


def get_format(name: str) -> ExportFormat:
    formats = _formats()
    try:
        return formats[name]
    except KeyError:
        known = ", ".join(formats) or "none"
        raise FormatError(f"unknown export format {name!r}; registered: {known}") from None


def detect_json(value: Any) -> str | None:
    """The registered export format claiming this JSON value, else ``None``."""
    for fmt in _formats().values():
        if fmt.detect is None:
            continue
        try:
            if fmt.detect(value):
                return fmt.name
        except Exception:
            continue
    return None


def detect_magic(head: bytes) -> str | None:
    """The registered non-JSON export format claiming a file by its head, else ``None``."""
    for fmt in _formats().values():
        if fmt.magic and head.startswith(fmt.magic):
            return fmt.name
        try:
            if fmt.claims_head is not None and fmt.claims_head(head):
                return fmt.name
        except Exception:
            continue
    return None


def derived_id(original: str, *, size: int) -> str:
    """A stable ``size``-byte hex id for a non-OTLP id (a UUID, a run id, an index).

    UUIDs of 16 bytes become their own hex when ``size`` is 16; everything else is hashed,
    so the same source id always maps to the same span or trace id.
    """
    text = original.strip().lower().replace("-", "")
    if len(text) == 2 * size and all(c in "0123456789abcdef" for c in text):
        return text
    return hashlib.sha256(original.encode("utf-8")).hexdigest()[: 2 * size]
