"""One way every front end opens traces and readies a run: :func:`prepare`.

A front end says where it reads with a :class:`Project` — the ``otelcar.toml``, the local
store, a source URL that replaces ``[source] url`` (the CLI's ``--source``) and the most
policy calls one run may spend (the MCP server's ``--max-calls``) — and :func:`prepare` of a
trace id (a full id or a unique prefix) and a request (:mod:`otelcar.analyses.requests`)
gives a :class:`Prepared`: the recorded run, the project configuration and the
:class:`~otelcar.replay.Environment` the analysis spends its budget in. The CLI
(:mod:`otelcar.cli.common`), the MCP server (:mod:`otelcar.mcp.runs`) and the web console
(:mod:`otelcar.ui.runs`) all call it, for the local store and every source alike, so the
same request on the same trace is readied the same way wherever it is made.

Errors are :class:`~otelcar.errors.OtelcarError` subclasses with the message a user reads:
an unknown or ambiguous trace id (:class:`~otelcar.errors.TraceNotFound`), a source that
cannot be read (:class:`~otelcar.errors.SourceError`), a broken ``otelcar.toml`` or a
missing outcome (:class:`~otelcar.project_config.ConfigError`), a config that does not fit
the trace (:class:`~otelcar.config_checks.ConfigMismatch`), a budget over the ceiling
(:class:`BudgetRefused`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from otelcar.errors import OtelcarError

if TYPE_CHECKING:
    import polars as pl

    from otelcar.analyses.options import Request
    from otelcar.project_config import ProjectConfig
    from otelcar.replay import Budget, Environment, RecordedRun
    from otelcar.sources import LoadedTrace, SourceSettings, TraceSource


class BudgetRefused(OtelcarError):
    """A run's policy-call budget is below 1 or over the ceiling of the front end that
    starts it (:attr:`Project.max_calls`)."""


@dataclass(frozen=True)
class Project:
    """Where a front end's analyses read. ``store_root``: the local store (traces when no
    source is set, and the live requests a passing live check keeps; ``None``: the default
    store, and no kept requests); ``config_path``: the ``otelcar.toml`` (``None``:
    ./otelcar.toml when present), read afresh by every :meth:`config`; ``source_url``: a
    source URL that replaces ``[source] url`` (the CLI's ``--source``, ``OTELCAR_SOURCE``);
    ``max_calls``: the most policy calls one run may spend (``None``: no ceiling beyond
    ``[replay] max_calls``); ``create_store``: make the local store when it is missing
    (else a missing store is a :class:`~otelcar.errors.StoreError`)."""

    store_root: Path | None = None
    config_path: Path | None = None
    source_url: str | None = None
    max_calls: int | None = None
    create_store: bool = False

    def config(self) -> ProjectConfig:
        """The project config, read now (edits to ``otelcar.toml`` apply to the next run),
        with the store's kept live requests (:mod:`otelcar.store.live_requests`)."""
        from otelcar.project_config import load_config
        from otelcar.store.live_requests import LiveRequestStore

        config = load_config(self.config_path)
        if self.store_root is not None:
            config.live_requests = LiveRequestStore(self.store_root)
        return config

    def source(self, configured: SourceSettings | None) -> SourceSettings | None:
        """The source in force: :attr:`source_url` (with the table names of
        ``configured``, the config's ``[source]``, when it has one), else ``configured``,
        else ``None`` (the local store)."""
        from otelcar.sources import SourceSettings

        if not self.source_url:
            return configured
        if configured is None:
            return SourceSettings(self.source_url)
        return replace(configured, url=self.source_url)

    def open_traces(self, configured: SourceSettings | None) -> TraceSource:
        """Where traces are read (use as a context manager): the source of :meth:`source`
        of ``configured`` when there is one, else the local store."""
        settings = self.source(configured)
        if settings is None:
            from otelcar.store import Store

            return Store(self.store_root, create=self.create_store)
        from otelcar.sources import open_source

        return open_source(settings)

    def load(self, trace_id: str, configured: SourceSettings | None) -> LoadedTrace:
        """One trace (a full id or a unique prefix) from :meth:`open_traces`."""
        with self.open_traces(configured) as source:
            return load_trace(source, trace_id)

    def budget(self, config: ProjectConfig, max_calls: int | None) -> Budget:
        """The budget of one run: ``max_calls`` policy calls, else ``[replay] max_calls``,
        else :attr:`max_calls`; a number below 1 or above :attr:`max_calls` is a
        :class:`BudgetRefused`."""
        calls = max_calls if max_calls is not None else config.replay.max_calls
        ceiling = self.max_calls
        if calls is not None and calls < 1:
            raise BudgetRefused(f"max_calls must be at least 1, not {calls}")
        if ceiling is not None and calls is not None and calls > ceiling:
            raise BudgetRefused(
                f"budget of {calls} policy calls is over this server's ceiling of {ceiling} "
                "(otelcar mcp --max-calls)"
            )
        return config.replay.budget(calls if calls is not None else ceiling)


@dataclass(frozen=True)
class Prepared:
    """A run ready for an analysis: the recorded ``run``, the project ``config`` it runs
    with, the ``env`` whose budget it spends (and whose accounting a progress display
    reads), and the trace's ``steps`` and index ``summary`` as the source read them."""

    run: RecordedRun
    config: ProjectConfig
    env: Environment
    steps: pl.DataFrame
    summary: Mapping[str, Any]


def load_trace(source: TraceSource, trace_id: str) -> LoadedTrace:
    """One trace of ``source`` (a full id or a unique prefix); a
    :class:`~otelcar.errors.TraceNotFound` for no trace or several."""
    return source.load(source.resolve(trace_id))


def configured(
    config: ProjectConfig,
    *,
    agent: str | None = None,
    outcome: Mapping[str, Any] | None = None,
    require_outcome: bool = False,
) -> ProjectConfig:
    """``config`` with ``agent``, a command line that replaces ``[agent] command`` (the
    CLI's ``--agent CMD``, the MCP tools' ``agent``;
    :func:`~otelcar.project_config.with_agent_command`), and ``outcome``, an ``[outcome]``
    table that replaces the config's (the CLI's ``--fail-if`` rules). With
    ``require_outcome``, a config left without an outcome is a
    :class:`~otelcar.project_config.ConfigError`. Changes and returns ``config``."""
    from otelcar.project_config import with_agent_command

    if agent is not None:
        with_agent_command(config, agent)
    if outcome is not None:
        from otelcar.outcome import outcome_from_config

        config.outcome = outcome_from_config(dict(outcome), config.registry)
    if require_outcome:
        has_outcome(config)
    return config


def has_outcome(config: ProjectConfig) -> None:
    """Refuse ``config`` without an outcome (what counts as failure), with a
    :class:`~otelcar.project_config.ConfigError` that says where to add one."""
    from otelcar.project_config import ConfigError

    if config.outcome is None:
        raise ConfigError(
            f"no outcome: add [outcome] to {config.path or 'otelcar.toml'} (what counts as "
            "failure; on the command line --fail-if gives one too)"
        )


def prepare(
    project: Project,
    trace_id: str,
    request: Request | None = None,
    *,
    source: TraceSource | None = None,
    agent: str | None = None,
    outcome: Mapping[str, Any] | None = None,
) -> Prepared:
    """``trace_id`` (a full id or a unique prefix) ready for ``request``: the project's
    config read now (:meth:`Project.config`) with ``agent`` and ``outcome`` applied
    (:func:`configured`); the trace read from ``source`` (an open
    :class:`~otelcar.sources.TraceSource` the caller closes; default: the project's,
    :meth:`Project.open_traces` of the config's ``[source]``); the recorded run
    (:func:`~otelcar.replay.load_run` with ``[agent]``; ``attribute`` needs an outcome,
    :func:`has_outcome`), checked to fit the config before anything runs
    (:func:`~otelcar.config_checks.check_config_fits`); and an environment with the budget
    of the request's ``budget`` (:meth:`Project.budget`, checked before the trace is read;
    no request, or one without a budget: ``[replay] max_calls``)."""
    from otelcar.config_checks import check_config_fits
    from otelcar.replay import Environment, load_run

    config = configured(project.config(), agent=agent, outcome=outcome)
    budget = project.budget(config, getattr(request, "budget", None))
    loaded = (
        project.load(trace_id, config.source) if source is None else load_trace(source, trace_id)
    )
    run = load_run(loaded.trace_id, loaded.steps, config.agent)
    if request is not None and request.kind == "attribute":
        has_outcome(config)
    check_config_fits(run, config)
    return Prepared(run, config, Environment(config.registry, budget), loaded.steps, loaded.summary)
