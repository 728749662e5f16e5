"""Timestamps as the export formats write them, read as epoch nanoseconds.

One reading for every non-OTLP format (LangSmith, Langfuse, Phoenix): ISO 8601 / RFC 3339
text (``T`` or a space, seconds optional, ``.``/``,`` and any number of fractional digits —
those past nanoseconds dropped — ``Z``/``z``/``±HH``/``±HHMM``/``±HH:MM`` or no zone = UTC),
``datetime`` objects (naive = UTC), and epoch numbers or numeric text in s, ms, µs or ns,
told apart by magnitude.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from decimal import Decimal, InvalidOperation
from typing import Any

#: No epoch number at or past this is a time the store can hold, in any unit.
EPOCH_LIMIT = Decimal(10) ** 20
_ISO = re.compile(
    r"^(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d)(?::(\d\d))?(?:[.,](\d+))?\s*"
    r"(Z|z|[+-]\d\d(?::?\d\d)?)?$"
)


def time_ns(value: Any) -> int | None:
    """Epoch nanoseconds of ``value`` (see the module docstring); ``None`` when it is absent
    or not a time; ``ValueError`` for an epoch number that is not finite or too large to be
    one in any unit."""
    if value is None or isinstance(value, bool) or value == "":
        return None
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        seconds = calendar.timegm(value.utctimetuple())
        return seconds * 1_000_000_000 + value.microsecond * 1000
    if isinstance(value, int | float):
        return epoch_ns(Decimal(str(value)))  # str(): a float's shortest repr, no noise
    if not isinstance(value, str):
        return None
    text = value.strip()
    match = _ISO.match(text)
    if match is None:
        try:
            number = Decimal(text)
        except InvalidOperation:
            return None
        return epoch_ns(number)
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    try:
        moment = dt.datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second or 0)
        )
    except ValueError:  # month 13, hour 25 …
        return None
    seconds = calendar.timegm(moment.timetuple())
    if zone and zone not in ("Z", "z"):
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        offset = int(digits[:2]) * 3600 + (int(digits[2:4]) * 60 if len(digits) > 2 else 0)
        seconds -= sign * offset
    return seconds * 1_000_000_000 + int((fraction or "0")[:9].ljust(9, "0"))


def epoch_ns(number: Decimal) -> int:
    """Epoch nanoseconds of an epoch number in s, ms, µs or ns (by magnitude);
    ``ValueError`` for one that is not finite or too large to be a time in any unit
    (converting 1e999999999 to an integer would take forever)."""
    if not number.is_finite():
        raise ValueError(f"epoch time {number} is not a finite number")
    magnitude = number.copy_abs()  # abs() would round (and overflow) in the context
    if magnitude >= EPOCH_LIMIT:
        raise ValueError(f"epoch time {str(number)[:40]} is out of range")
    for threshold, factor in (
        (Decimal(10) ** 17, 1),
        (Decimal(10) ** 14, 1_000),
        (Decimal(10) ** 11, 1_000_000),
    ):
        if magnitude >= threshold:
            return int(number * factor)
    return int(number * 1_000_000_000)
