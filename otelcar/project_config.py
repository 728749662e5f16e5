"""``otelcar.toml``: the policies, the outcome and the replay settings of a project.

```toml
[policies.llm]                 # key: llm | "llm:<agent or step name>" | "tool:<name>" | "tool:*"
type = "openai"                # openai | python | static | mock | recorded | simulated | …
base_url = "http://127.0.0.1:8080/v1"
model = "gemma-3-270m"

[policies."tool:lookup_order"]
type = "python"
function = "tools:lookup_order"   # module:function, importable from the config's folder

[outcome]                      # what counts as failure (see otelcar.outcome)
type = "tool_called"
tool = "issue_refund"
args = { amount = "re:(?!129\\.99$).*" }

[replay]
seed = 0
rollouts = 20
concurrency = 8
max_calls = 2000               # budget (policy calls); max_tokens too
```

The schema is ``schemas/config.schema.json``; unknown keys are errors, not silently ignored.
"""

from __future__ import annotations

import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from otelcar.errors import OtelcarError
from otelcar.outcome import Outcome, outcome_from_config
from otelcar.policies.registry import PolicyRegistry

DEFAULT_CONFIG = "otelcar.toml"
TOP_LEVEL = {"policies", "outcome", "replay"}
REPLAY_KEYS = {
    "seed": int,
    "rollouts": int,
    "concurrency": int,
    "slack": int,
    "max_calls": int,
    "max_tokens": int,
}


class ConfigError(OtelcarError):
    """``otelcar.toml`` is missing, malformed or inconsistent."""


@dataclass(frozen=True)
class ReplaySettings:
    seed: int = 0
    rollouts: int = 20
    concurrency: int = 8
    slack: int = 4
    max_calls: int | None = None
    max_tokens: int | None = None


@dataclass
class ProjectConfig:
    registry: PolicyRegistry = field(default_factory=PolicyRegistry)
    outcome: Outcome | None = None
    replay: ReplaySettings = field(default_factory=ReplaySettings)
    path: Path | None = None


def parse_config(
    data: dict[str, Any], *, base_dir: Path | None = None, path: Path | None = None
) -> ProjectConfig:
    """Build a :class:`ProjectConfig` from the decoded TOML document."""
    unknown = set(data) - TOP_LEVEL
    if unknown:
        raise ConfigError(
            f"{path or 'config'}: unknown section(s) {', '.join(sorted(unknown))}; "
            f"known: {', '.join(sorted(TOP_LEVEL))}"
        )
    if base_dir is not None and str(base_dir) not in sys.path:
        sys.path.insert(0, str(base_dir))  # module:function paths relative to the config
    try:
        registry = PolicyRegistry.from_config(data.get("policies", {}))
        outcome = outcome_from_config(data["outcome"], registry) if "outcome" in data else None
    except OtelcarError as exc:
        raise ConfigError(f"{path or 'config'}: {exc}") from None
    replay = data.get("replay", {})
    for key, value in replay.items():
        if key not in REPLAY_KEYS or not isinstance(value, REPLAY_KEYS[key]):
            raise ConfigError(
                f"{path or 'config'}: [replay] {key} = {value!r} is not valid; "
                f"keys: {', '.join(REPLAY_KEYS)} (integers)"
            )
    return ProjectConfig(registry, outcome, ReplaySettings(**replay), path)


def load_config(path: str | Path | None = None) -> ProjectConfig:
    """Read ``path`` (default ``./otelcar.toml``; an empty config when that is absent)."""
    if path is None:
        default = Path(DEFAULT_CONFIG)
        if not default.exists():
            return ProjectConfig()
        path = default
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    return parse_config(data, base_dir=path.resolve().parent, path=path)


def config_schema_document() -> dict[str, Any]:
    """JSON Schema of ``otelcar.toml`` (``schemas/config.schema.json``)."""
    policy = {
        "type": "object",
        "required": ["type"],
        "properties": {
            "type": {
                "type": "string",
                "description": "openai | python | static | mock | recorded | simulated, or a "
                "type registered with register_policy_type",
            }
        },
        "additionalProperties": True,
    }
    rule: dict[str, Any] = {
        "type": "object",
        "properties": {
            "type": {
                "enum": ["tool_called", "tool_not_called", "final_answer", "judge", "function"]
            },
            "tool": {"type": "string"},
            "args": {"type": "object"},
            "pattern": {"type": "string"},
            "contains": {"type": "string"},
            "negate": {"type": "boolean"},
            "policy": {"type": "string"},
            "question": {"type": "string"},
            "function": {"type": "string"},
            "any": {"type": "array", "items": {"$ref": "#/$defs/rule"}},
            "all": {"type": "array", "items": {"$ref": "#/$defs/rule"}},
        },
        "additionalProperties": False,
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "otelcar/config.schema.json",
        "title": "otelcar.toml",
        "type": "object",
        "additionalProperties": False,
        "$defs": {"rule": rule},
        "properties": {
            "policies": {
                "type": "object",
                "propertyNames": {"pattern": "^(llm(:.+)?|tool:.+)$"},
                "additionalProperties": policy,
            },
            "outcome": {"$ref": "#/$defs/rule"},
            "replay": {
                "type": "object",
                "additionalProperties": False,
                "properties": {key: {"type": "integer"} for key in REPLAY_KEYS},
            },
        },
    }
