"""Policy calls spent by triage per UTC day: ``<store>/triage/ledger.json``
(``{"days": {"2026-12-05": 812}}``), so ``[triage] max_calls_per_day`` holds across
restarts. An analysis reserves its whole per-trace limit before it starts and settles to what
it spent when it ends: an analysis killed mid-way stays counted at its reservation, so a
crash can only make the count too high, never too low."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from otelcar.triage.files import read_json, write_json

#: Days kept in the ledger (older ones are dropped when it is written).
KEEP_DAYS = 31


def today() -> str:
    """Today's date in UTC (the ledger's day)."""
    return datetime.now(UTC).date().isoformat()


class Ledger:
    """The ledger of the store at ``store_root``; written by one engine at a time."""

    def __init__(self, store_root: str | Path) -> None:
        self.path = Path(store_root) / "triage" / "ledger.json"

    def days(self) -> dict[str, int]:
        """Day → calls counted (a missing or damaged ledger reads as empty)."""
        document = read_json(self.path)
        days = document.get("days") if isinstance(document, dict) else None
        if not isinstance(days, dict):
            return {}
        return {d: n for d, n in days.items() if isinstance(n, int)}

    def spent(self, day: str | None = None) -> int:
        """Calls counted on ``day`` (default: today, UTC)."""
        return self.days().get(day or today(), 0)

    def add(self, calls: int, day: str | None = None) -> int:
        """Count ``calls`` more (negative: settle a reservation down) on ``day`` (default:
        today); returns the day's new count (never below 0)."""
        days = self.days()
        key = day or today()
        days[key] = max(0, days.get(key, 0) + calls)
        kept = dict(sorted(days.items())[-KEEP_DAYS:])
        write_json(self.path, {"days": kept})
        return kept[key]
