"""The registries' side of the plugin door: one :class:`RegistryHook` per registry.

Light on purpose: the registries of the lower layers (mappers, formats, policy types,
outcomes, executors, sources) import this module at their own import, and it imports neither
pluggy nor the plugin manager until the first lookup needs them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class RegistryHook:
    """Fills one registry through the plugin hook ``hook``, the first time it is needed.

    ``add`` is the registry's own, plain registration function (the one its public
    ``register_*`` function calls too): the hook's ``register`` callback ends up calling it
    once per thing a plugin registers. :meth:`ensure` runs the hook of every plugin once per
    process (see :meth:`otelcar.plugins.manager.PluginHost.ensure`); ``done`` is true after,
    so a hot path can test it without a call.
    """

    __slots__ = ("_add", "done", "hook")

    def __init__(self, hook: str, add: Callable[..., Any]) -> None:
        self.hook = hook
        self._add = add
        self.done = False

    def ensure(self) -> None:
        """Run the hook (once; at once when done, or when called while it runs)."""
        if self.done:
            return
        from otelcar.plugins.manager import ensure_hook

        ensure_hook(self.hook, self._add)
        self.done = True
