"""One error hierarchy for otelcar.

The library raises these; the CLI turns them into messages in one place
(:func:`otelcar.cli.main`). Nothing returns ``None`` or an empty result to mean failure.
"""

from __future__ import annotations


class OtelcarError(Exception):
    """Base class of every error otelcar raises on purpose."""


class FormatError(OtelcarError):
    """Input bytes are not in the format they claim (or were sniffed) to be."""


class StoreError(OtelcarError):
    """The local store is missing, locked, corrupt or of an unknown layout."""


class StoreBusy(StoreError):
    """Another writer holds the store's lock for longer than the caller would wait."""


class TraceNotFound(OtelcarError):
    """No trace (or more than one trace) matches the given id or prefix."""


class SourceError(OtelcarError):
    """A trace source (a ClickHouse server, an embedded chDB path) cannot be reached or read,
    or is not shaped as expected (a table or column missing)."""


class UserCodeError(OtelcarError):
    """A function the user configured (an outcome, a python policy, a tool function) raised;
    the message names the function and the exception, the original is its ``__cause__``."""


class BudgetTooSmall(OtelcarError):
    """A policy-call budget too small for an analysis to reach any verdict, refused before a
    call is spent; ``budget`` is the calls it had left, ``needed`` the fewest that can reach
    one (the message names it)."""

    def __init__(self, message: str, *, budget: int, needed: int) -> None:
        super().__init__(message)
        self.budget = budget
        self.needed = needed
