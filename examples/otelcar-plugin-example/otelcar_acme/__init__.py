"""otelcar-plugin-example: every kind of thing a plugin can add to otelcar, small but real.

The hooks below are all this module does at import (it is imported when otelcar first needs
a plugin): each imports its own module only when called, so a plugin costs otelcar's start-up
nothing. ``docs/plugins.md`` walks through them.

- ``register_mappers``: the ``acme`` dialect (``acme.llm.*`` and ``acme.tool.*`` spans), for
  ``otelcar import`` of OTLP dumps and of ACME's own;
- ``register_formats``: ``acme-jsonl`` dumps, one span per line (``otelcar import``);
- ``register_policy_types``: ``[policies.llm] type = "acme-canned"``, seeded canned answers;
- ``register_outcomes``: ``[outcome] type = "answer_length"``, with ``min_chars``;
- ``register_executors``: ``--executor acme-counting`` (or ``[replay] executor``), the local
  executor counting what it runs;
- ``register_sources``: ``--source dumpdir://PATH`` (or ``[source] url``), a directory of dumps
  read without importing them;
- ``register_commands``: ``otelcar acme-info``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from otelcar.plugins import hookimpl

__version__ = "0.1.0"


@hookimpl
def register_mappers(register: Callable[[Any], None]) -> None:
    from otelcar_acme.mapper import AcmeMapper

    register(AcmeMapper())


@hookimpl
def register_formats(register: Callable[[Any], None]) -> None:
    from otelcar_acme.dump_format import ACME_JSONL

    register(ACME_JSONL)


@hookimpl
def register_policy_types(register: Callable[..., None]) -> None:
    from otelcar_acme.policy import canned_policy

    register("acme-canned", "llm", canned_policy)


@hookimpl
def register_outcomes(register: Callable[..., None]) -> None:
    from otelcar_acme.outcome import answer_length

    register("answer_length", answer_length)


@hookimpl
def register_executors(register: Callable[..., None]) -> None:
    from otelcar_acme.executor import counting_executor

    register("acme-counting", counting_executor)


@hookimpl
def register_sources(register: Callable[..., None]) -> None:
    from otelcar_acme.source import DumpDirectorySource

    register("dumpdir", DumpDirectorySource)


@hookimpl
def register_commands(cli: Any) -> None:
    from otelcar_acme.command import acme_info

    cli.add_command(acme_info)
