"""Every generated contract file of ``schemas/``, in one place.

``otelcar schema --write schemas`` writes them; a test checks the committed files match.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from otelcar.project_config import config_schema_document
from otelcar.report.schemas import (
    aggregate_schema_document,
    attribution_schema_document,
    fix_schema_document,
    pairs_schema_document,
    why_schema_document,
)
from otelcar.report.timeline_schemas import (
    diff_schema_document,
    timeline_schema_document,
    timelines_list_schema_document,
)
from otelcar.schema import (
    message_schema_document,
    show_schema_document,
    steps_schema_document,
    traces_list_schema_document,
)

SCHEMA_FILES: dict[str, Callable[[], dict[str, Any]]] = {
    "steps.schema.json": steps_schema_document,
    "message.schema.json": message_schema_document,
    "traces-list.schema.json": traces_list_schema_document,
    "show.schema.json": show_schema_document,
    "config.schema.json": config_schema_document,
    "attribution.schema.json": attribution_schema_document,
    "why.schema.json": why_schema_document,
    "fix.schema.json": fix_schema_document,
    "aggregate.schema.json": aggregate_schema_document,
    "timelines-list.schema.json": timelines_list_schema_document,
    "timeline.schema.json": timeline_schema_document,
    "diff.schema.json": diff_schema_document,
    "pairs.schema.json": pairs_schema_document,
}


def render_schema_files() -> dict[str, str]:
    """File name → exact text of every generated schema file."""
    return {
        name: json.dumps(build(), indent=2, ensure_ascii=False) + "\n"
        for name, build in SCHEMA_FILES.items()
    }
