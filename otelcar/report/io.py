"""Reading result JSON files back for ``otelcar report``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from otelcar.attribution.aggregate_documents import AGGREGATE_VERSION
from otelcar.attribution.steps.documents import RESULT_VERSION
from otelcar.errors import OtelcarError
from otelcar.replay.timeline_documents import DIFF_VERSION

# kind → the version this otelcar writes and reads; kinds not listed (why, fix, …) are read
# whatever their version, as optional parts of a report.
KNOWN_VERSIONS = {
    "attribution": RESULT_VERSION,
    "aggregate": AGGREGATE_VERSION,
    "diff": DIFF_VERSION,
}


class ReportError(OtelcarError):
    """A result file that cannot be reported: unreadable, not JSON, unknown kind or version."""


def read_result(path: str | Path) -> dict[str, Any]:
    """A result JSON file (``attribute --json``, ``aggregate --json``, ``why``/``fix``),
    checked for its ``kind`` and ``version``."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReportError(f"{path}: no such file") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReportError(f"{path}: not a JSON result ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("kind"), str):
        raise ReportError(f"{path}: not an otelcar result (no 'kind')")
    kind, version = data["kind"], data.get("version")
    if kind in KNOWN_VERSIONS and version != KNOWN_VERSIONS[kind]:
        raise ReportError(
            f"{path}: {kind} result version {version!r}; this otelcar reads version "
            f"{KNOWN_VERSIONS[kind]}"
        )
    return data
