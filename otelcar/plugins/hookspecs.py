"""The hooks an otelcar plugin implements: the one door for built-ins and third parties.

A plugin is a module (or any object) with functions marked ``@hookimpl`` whose names are the
hooks below; it is found through the ``otelcar`` entry-point group (``docs/plugins.md``). Each
``register_*`` hook gets a ``register`` callback and calls it once per thing it adds; what
``register`` takes is the contract of that hook. A hook is called once per process, the first
time otelcar needs that kind of thing (a mapper when spans are mapped, an outcome type when
``[outcome]`` is read, …), never at ``import otelcar``.

Names are unique per hook: a later registration of a name replaces the earlier one (the
built-ins register first, then plugins in entry-point order, then user code calling the
``register_*`` functions directly), and ``otelcar`` prints a ``note:`` line saying which
plugin replaced which. A hook that raises registers nothing at all (what it passed to
``register`` before raising is dropped) and is reported as one ``error:`` line on stderr.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

#: The pluggy project name and the setuptools entry-point group plugins are declared in.
PROJECT = "otelcar"
ENTRY_POINT_GROUP = "otelcar"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def register_mappers(register: Callable[[Any], None]) -> None:
    """Add dialect mappers: ``register(mapper)`` once per mapper.

    ``mapper`` follows :class:`otelcar.conventions.base.DialectMapper`: a ``name``,
    ``claim(span) -> int | None`` (a priority, lower wins; ``None`` passes) and
    ``map(span, logs) -> MappedSpan``. Built-in priorities are 10-50, the generic fallback
    1000. A mapper that raises on a span is isolated: that span falls back to the generic
    mapper with the error among its issues.
    """


@hookspec
def register_formats(register: Callable[[Any], None]) -> None:
    """Add dump formats for ``otelcar import``: ``register(fmt)`` once per format.

    ``fmt`` is an :class:`otelcar.ingest.formats.ExportFormat`: ``decode(payload) -> Decoded``
    and a way to claim files (``detect`` for JSON values, ``magic`` or ``claims_head`` for
    other files). Formats are asked in registration order, the built-ins first; ``--format
    NAME`` picks one by name.
    """


@hookspec
def register_policy_types(register: Callable[[str, str, Any], None]) -> None:
    """Add policy types for ``[policies.KEY] type = "NAME"``:
    ``register(name, kind, factory)``.

    ``kind`` is ``llm``, ``tool`` or ``both``; ``factory(options, registry, role)`` gets the
    table's other keys, the :class:`~otelcar.policies.PolicyRegistry` being built (LLM
    policies are built first) and the role (``llm`` or ``tool``), and returns a policy (an
    object with ``async decide(request)`` for LLM steps, ``async run(request)`` for tools).
    It raises :class:`~otelcar.policies.base.PolicyError` for bad options.
    """


@hookspec
def register_outcomes(register: Callable[[str, Any], None]) -> None:
    """Add outcome types for ``[outcome] type = "NAME"``: ``register(name, factory)``.

    ``factory(options, registry)`` gets the table's other keys and the policy registry
    (``None`` when there is none) and returns an :class:`otelcar.outcome.Outcome`:
    ``describe() -> str`` and ``async failed(steps) -> bool`` (true when the run failed).
    It raises :class:`~otelcar.outcome.OutcomeError` (or ``KeyError``/``TypeError``, shown
    as a bad option) for bad options. ``any``/``all`` combine outcomes of any type.
    """


@hookspec
def register_executors(register: Callable[[str, Any], None]) -> None:
    """Add rollout executors for ``--executor NAME`` and ``[replay] executor``:
    ``register(name, factory)``.

    ``factory(address=..., concurrency=...)`` returns an :class:`otelcar.executors.Executor`
    (see that module for the contract of ``run_rollouts``). ``address`` is ``--ray-address``
    / ``[replay] ray_address`` (given to the ``ray`` executor only; ``None`` for others),
    ``concurrency`` is ``[replay] concurrency``. It raises
    :class:`~otelcar.executors.ExecutorError` when it cannot run.
    """


@hookspec
def register_sources(register: Callable[[str, Any], None]) -> None:
    """Add trace sources for ``--source URL`` and ``[source] url``:
    ``register(scheme, factory)``.

    ``scheme`` is the URL's part before ``://``; ``factory(settings)`` gets the
    :class:`otelcar.sources.SourceSettings` (``url`` and the ``[source]`` table names) and
    returns an open :class:`otelcar.sources.TraceSource`. It raises
    :class:`~otelcar.errors.SourceError` when the source cannot be reached or read.
    """


@hookspec
def register_commands(cli: Any) -> None:
    """Add commands to the ``otelcar`` command line: ``cli`` is its root
    :class:`click.Group`; call ``cli.add_command(command)`` (or use ``@cli.command()``).

    Called the first time the command line needs a command it does not know, or lists its
    commands (``otelcar --help``); built-in commands are not registered here but looked up
    lazily by name, so that ``otelcar --version`` imports no command module.
    """


#: Every ``register_*`` hook that takes a ``register`` callback, with what it registers (as
#: ``otelcar plugins`` names it), in the order the listing shows them.
REGISTER_HOOKS: dict[str, str] = {
    "register_mappers": "mapper",
    "register_formats": "format",
    "register_policy_types": "policy type",
    "register_outcomes": "outcome",
    "register_executors": "executor",
    "register_sources": "source",
}
#: Every hook, the ``register_*`` ones then ``register_commands``.
HOOKS: dict[str, str] = {**REGISTER_HOOKS, "register_commands": "command"}
