"""One failing trace's analyses, as triage runs them: ``attribute`` (and ``why`` on the
culprit) through :mod:`otelcar.analyses`, so a triaged result is the one ``otelcar
attribute`` gives with the same config and seed, within one shared budget."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from otelcar.analyses import attribute_run, why_run
from otelcar.errors import OtelcarError
from otelcar.report.prose import document, headline

if TYPE_CHECKING:
    from otelcar.attribution.steps.result import AttributionResult
    from otelcar.project_config import ProjectConfig
    from otelcar.replay import Budget, RecordedRun


def culprit_of(result: AttributionResult) -> dict[str, Any] | None:
    """The culprit in a state file's short form: ``{"step", "name", "agent", "delta"}``."""
    effect = result.culprit
    if effect is None:
        return None
    return {"step": effect.step, "name": effect.name, "agent": effect.agent, "delta": effect.delta}


async def analyse(
    run: RecordedRun, config: ProjectConfig, budget: Budget, *, why: bool = False
) -> dict[str, Any]:
    """``attribute`` of ``run`` with ``config`` spending from ``budget`` (whose ``calls``
    and ``tokens`` count what was spent, also when this raises), then, with ``why`` and a
    culprit, ``why`` on the culprit from the same budget. Returns the state-file fields
    ``attribution``, ``headline``, ``culprit``, ``why`` and ``reason`` (``None``, or why
    ``why`` could not finish: the attribution is kept). An attribution that fails raises
    :class:`~otelcar.errors.OtelcarError` as :func:`~otelcar.analyses.attribute_run` does."""
    result = await attribute_run(run, config, budget=budget)
    fields: dict[str, Any] = {
        "attribution": document(result),
        "headline": headline(result),
        "culprit": culprit_of(result),
        "why": None,
        "reason": None,
    }
    if why and result.culprit is not None:
        try:
            explained = await why_run(run, config, step=result.culprit.step, budget=budget)
        except OtelcarError as exc:
            fields["reason"] = f"why did not finish: {exc}"
        else:
            fields["why"] = document(explained)
    return fields
