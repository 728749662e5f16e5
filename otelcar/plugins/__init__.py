"""Plugins: the one door through which mappers, formats, policy types, outcomes, executors,
sources and commands come into otelcar, the built-in ones and third parties' alike.

A plugin is a module declared in the ``otelcar`` entry-point group of its distribution::

    [project.entry-points.otelcar]
    acme = "otelcar_acme"

whose functions marked ``@otelcar.plugins.hookimpl`` implement the hooks of
:mod:`otelcar.plugins.hookspecs` (``register_mappers(register)``, …, ``register_commands(cli)``).
The built-ins are the plugin :mod:`otelcar.builtin_plugin`, registered first. Plugins load
lazily (:mod:`otelcar.plugins.manager`): ``import otelcar`` loads none, and each registry runs
its hook the first time it is consulted (:mod:`otelcar.plugins.door`). ``otelcar plugins``
lists what is installed; ``docs/plugins.md`` is the guide to writing one.

This module imports nothing heavy: ``hookimpl`` (which needs pluggy) loads on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from otelcar.plugins.hookspecs import hookimpl

__all__ = ["hookimpl"]


def __getattr__(name: str) -> Any:
    if name == "hookimpl":
        from otelcar.plugins.hookspecs import hookimpl

        return hookimpl
    raise AttributeError(f"module 'otelcar.plugins' has no attribute {name!r}")
