"""What triage refuses to run, whatever the limits: live replay (an ``[agent] command`` runs
the user's agent, with its real tools), and a python tool policy whose side effects are
undeclared or not safe to repeat (``side_effects`` other than ``none`` or ``sandboxed``;
:data:`otelcar.policies.python.SIDE_EFFECTS`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from otelcar.policies.python import CallableToolPolicy

if TYPE_CHECKING:
    from otelcar.policies.registry import PolicyRegistry
    from otelcar.project_config import ProjectConfig

#: Declared side effects that triage runs unattended: a pure function, or effects isolated
#: per rollout.
SAFE_SIDE_EFFECTS = ("none", "sandboxed")


def unsafe_tools(registry: PolicyRegistry) -> list[str]:
    """The tool-policy keys of ``registry`` (``tool:NAME``, ``tool:*``) that are python tools
    without a side-effect declaration safe to repeat, each with its declaration."""
    out = []
    for key in registry.keys():  # noqa: SIM118 (a registry, not a dict)
        if not key.startswith("tool:"):
            continue
        policy = registry.tool_for(key.partition(":")[2])
        if isinstance(policy, CallableToolPolicy):
            declared = policy.side_effects
            if declared not in SAFE_SIDE_EFFECTS:
                said = "undeclared" if declared is None else f"= {declared!r}"
                out.append(f"{key} (side_effects {said})")
    return out


def refusal(config: ProjectConfig) -> str | None:
    """Why triage may not analyse a trace with ``config`` (``None``: it may)."""
    if config.agent_command is not None:
        return "[agent] command is set: triage never runs live replay (run `otelcar attribute`)"
    unsafe = unsafe_tools(config.registry)
    if unsafe:
        return (
            "python tool policies not declared safe to repeat: "
            + ", ".join(unsafe)
            + f" (declare side_effects = {' | '.join(repr(s) for s in SAFE_SIDE_EFFECTS)})"
        )
    return None
