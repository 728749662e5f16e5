"""How a command's cost reads in headlines and reports: one wording for policy calls.

Every policy call counts, also those that failed (a refused connection, an error answer):
they were made, and with a paid API they may be billed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def policy_calls_text(cost: Mapping[str, Any]) -> str:
    """``"12 policy calls"``, or ``"12 policy calls (+3 that failed)"`` when some failed."""
    calls = int(cost.get("llm_calls") or 0)
    failed = int(cost.get("failed_calls") or 0)
    text = f"{calls} policy call{'' if calls == 1 else 's'}"
    return f"{text} (+{failed} that failed)" if failed else text
