"""The fallback mapper: spans no dialect claims (HTTP, DB, framework internals, new libraries).

A span no dialect mapper claims is first given to the shape reader (:mod:`.shapes`): when its
values hold clearly LLM- or tool-shaped payloads (message lists, model API requests and
replies, tool calls and results), whatever the attributes are called, it becomes that step.
Otherwise it is an ``other`` step with every attribute kept, so nothing is dropped; and if its
values carry content (long text, message-shaped JSON), the step says so with a *content
unread* issue naming them: never silent, whatever the names.
"""

from __future__ import annotations

from collections.abc import Sequence

from otelcar.conventions.base import MappedSpan
from otelcar.conventions.shapes import UNREAD, content_keys, read_span, unread_keys
from otelcar.ingest.frames import LogFrame, SpanFrame

NAME = "generic"
PRIORITY = 1000


class GenericMapper:
    """Maps any span the shape reader cannot read to an ``other`` step; claims everything,
    with the weakest priority."""

    name = NAME

    def claim(self, span: SpanFrame) -> int | None:
        return PRIORITY

    def map(self, span: SpanFrame, logs: Sequence[LogFrame]) -> MappedSpan:
        mapped = read_span(span, logs)
        if mapped is not None:
            unread = unread_keys(mapped, span, logs)
            if unread:
                mapped.issues.append(unread_issue(unread, "the shape reader did not read"))
        else:
            mapped = MappedSpan(kind="other", name=span.name, source=NAME)
            keys = content_keys(span, logs)
            if keys:
                mapped.issues.append(
                    unread_issue(keys, "neither a dialect mapper nor the shape reader read")
                    + "; kept as an 'other' step (raw values in attributes)"
                )
        error = span.attributes.get("error.type")
        mapped.error = error if isinstance(error, str) else mapped.error
        return mapped


def unread_issue(keys: list[str], why: str) -> str:
    """The *content unread* issue naming ``keys`` (the first six), then ``why``."""
    shown = ", ".join(keys[:6]) + (f" … {len(keys) - 6} more" if len(keys) > 6 else "")
    return f"{UNREAD}{shown} carry content {why}"
