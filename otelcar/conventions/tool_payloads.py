"""Tool arguments and results out of the wrappers frameworks record them in.

The reading itself is :mod:`otelcar.conventions.normalize` (one normaliser for every
mapper); these names stay importable from here. :func:`unwrap_result` and
:func:`unwrap_arguments` return the inner value when the wrapper is a known one, and the
value unchanged otherwise; the raw value always stays in the span's attributes.
"""

from __future__ import annotations

from otelcar.conventions.normalize import (
    CALL_RECORD_KEYS,
    RESULT_KEYS,
    tool_arguments,
    tool_result,
    unwrap_arguments,
    unwrap_result,
)

__all__ = [
    "CALL_RECORD_KEYS",
    "RESULT_KEYS",
    "tool_arguments",
    "tool_result",
    "unwrap_arguments",
    "unwrap_result",
]
