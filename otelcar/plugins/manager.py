"""Finding plugins and calling their hooks, lazily and with each plugin's errors isolated.

A :class:`PluginHost` owns one pluggy ``PluginManager``. It is built the first time a hook is
needed (never at ``import otelcar``): the built-in plugin (:mod:`otelcar.builtin_plugin`)
is registered first, then every entry point of the ``otelcar`` group, in the order
:func:`importlib.metadata.entry_points` finds them. Each registry then asks for its own hook
(:meth:`PluginHost.ensure`) the first time it is consulted, so reading a dump does not import
the policies and ``otelcar --version`` loads no plugin at all. ``OTELCAR_PLUGINS`` (names,
comma-separated; empty: none) limits which installed plugins load.

Errors: a plugin whose import fails, that implements a hook otelcar does not have, or whose
hook raises, is reported as one ``error:`` line on stderr naming the plugin and its entry
point (the traceback too when ``--debug`` / ``OTELCAR_DEBUG=1``), and otelcar goes on with the
others. A hook that raises registers nothing: its ``register`` calls are kept aside and
applied only when it returns. Names are unique per hook; a later registration replaces an
earlier one with a ``note:`` line (see :mod:`otelcar.plugins.hookspecs`).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import sys
import threading
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pluggy

from otelcar.config import debug_enabled, enabled_plugins
from otelcar.plugins import hookspecs
from otelcar.plugins.hookspecs import ENTRY_POINT_GROUP, HOOKS, PROJECT, REGISTER_HOOKS

#: The name the built-in plugin is listed under.
BUILTIN_NAME = "otelcar"
BUILTIN_MODULE = "otelcar.builtin_plugin"

Report = Callable[[str, BaseException | None], None]


@dataclass
class PluginInfo:
    """What is known of one plugin: where it came from, which hooks it implements, what
    each of its hooks registered so far (hook → names), its errors (``"failed to load: …"``,
    ``"raised in HOOK: …"``) and its notes (names it replaced)."""

    name: str
    builtin: bool = False
    entry_point: str | None = None  # "NAME = module[:attr]"
    distribution: str | None = None
    version: str | None = None
    loaded: bool = False
    hooks: list[str] = field(default_factory=list)
    registered: dict[str, list[str]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        """``plugin 'NAME' (entry point 'NAME = module' of DIST VERSION)`` for messages."""
        if self.builtin:
            return f"the built-in plugin {self.name!r}"
        where = f"entry point {self.entry_point!r}" if self.entry_point else "no entry point"
        if self.distribution:
            where += f" of {self.distribution} {self.version or ''}".rstrip()
        return f"plugin {self.name!r} ({where})"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (the shape ``otelcar plugins --json`` prints)."""
        return {
            "name": self.name,
            "builtin": self.builtin,
            "distribution": self.distribution,
            "version": self.version,
            "entry_point": self.entry_point,
            "loaded": self.loaded,
            "hooks": list(self.hooks),
            "registered": {
                HOOKS[hook]: list(names) for hook, names in self.registered.items() if names
            },
            "errors": list(self.errors),
            "notes": list(self.notes),
        }


def print_report(message: str, error: BaseException | None) -> None:
    """The default report: ``message`` on stderr, the traceback of ``error`` below it when
    debugging is on (:func:`set_debug`, ``OTELCAR_DEBUG=1``)."""
    print(message, file=sys.stderr)
    if error is not None and (_DEBUG or debug_enabled()):
        traceback.print_exception(error, file=sys.stderr)


_DEBUG = False


def set_debug(on: bool) -> None:
    """Show tracebacks below plugin errors (the CLI's ``--debug``)."""
    global _DEBUG
    _DEBUG = on


class PluginHost:
    """One set of plugins: the built-ins (``builtins``: name → module or object) and the
    entry points of ``group`` (``None``: none), reporting problems through ``report``."""

    def __init__(
        self,
        *,
        builtins: Sequence[tuple[str, Any]] = ((BUILTIN_NAME, BUILTIN_MODULE),),
        group: str | None = ENTRY_POINT_GROUP,
        plugins: Sequence[tuple[str, Any]] = (),
        report: Report = print_report,
    ) -> None:
        self._builtins = list(builtins)
        self._extra = list(plugins)  # third-party plugins given as objects (tests, embedding)
        self._group = group
        self._report = report
        self._lock = threading.RLock()
        self._manager: pluggy.PluginManager | None = None
        self._infos: dict[str, PluginInfo] = {}
        self._done: set[str] = set()
        self._owners: dict[str, dict[str, str]] = {}  # hook → registered name → plugin

    # -- loading -----------------------------------------------------------------------------
    def manager(self) -> pluggy.PluginManager:
        """The pluggy manager, built on first use (built-ins, then entry points)."""
        with self._lock:
            if self._manager is None:
                manager = pluggy.PluginManager(PROJECT)
                manager.add_hookspecs(hookspecs)
                self._manager = manager
                for name, plugin in self._builtins:
                    info = PluginInfo(name, builtin=True, distribution="otelcar")
                    info.version = _version()
                    self._add(info, lambda p=plugin: _resolve(p))
                for name, plugin in self._extra:
                    self._add(PluginInfo(name), lambda p=plugin: _resolve(p))
                if self._group is not None:
                    wanted = enabled_plugins()
                    for info, entry_point in _entry_points(self._group):
                        if wanted is not None and info.name not in wanted:
                            continue  # OTELCAR_PLUGINS leaves it out
                        if info.name in self._infos:
                            other = self._infos[info.name]
                            if other.distribution == info.distribution:
                                continue  # the same distribution seen twice on sys.path
                            self._fail(
                                info, f"is not loaded: its name is taken by {other.label}", None
                            )
                            self._infos.setdefault(f"{info.name} ({info.distribution})", info)
                            continue
                        self._add(info, entry_point.load)
            return self._manager

    def _add(self, info: PluginInfo, load: Callable[[], Any]) -> None:
        self._infos[info.name] = info
        assert self._manager is not None
        try:
            plugin = load()
            unknown = sorted(
                attr
                for attr in dir(plugin)
                if attr not in HOOKS and self._manager.parse_hookimpl_opts(plugin, attr)
            )
            if unknown:
                raise pluggy.PluginValidationError(
                    plugin,
                    f"unknown hook(s) {', '.join(unknown)}; otelcar's hooks: {', '.join(HOOKS)}",
                )
            self._manager.register(plugin, name=info.name)
        except Exception as exc:
            self._fail(info, f"failed to load: {_one_line(exc)}", exc)
            return
        info.loaded = True
        info.hooks = [
            caller.name
            for caller in self._manager.get_hookcallers(plugin) or ()
            if caller.name in HOOKS
        ]
        info.hooks.sort(key=list(HOOKS).index)

    def _fail(self, info: PluginInfo, what: str, error: BaseException | None) -> None:
        info.errors.append(what)
        self._report(f"error: {info.label} {what}; otelcar goes on without it", error)

    def _note(self, info: PluginInfo, message: str) -> None:
        info.notes.append(message)
        self._report(f"note: {message}", None)

    def _impls(self, hook: str) -> list[tuple[PluginInfo, Any]]:
        """``(plugin info, hookimpl)`` of ``hook`` in plugin order (built-ins first)."""
        manager = self.manager()
        order = {name: index for index, name in enumerate(self._infos)}
        impls = getattr(manager.hook, hook).get_hookimpls()
        impls.sort(key=lambda impl: order.get(impl.plugin_name, len(order)))
        return [(self._infos[impl.plugin_name], impl) for impl in impls]

    # -- calling -----------------------------------------------------------------------------
    def ensure(self, hook: str, register: Callable[..., Any]) -> None:
        """Call every plugin's ``hook`` with ``register`` — once per host: later calls return
        at once (a call made while the hook runs, from ``register`` itself, too)."""
        if hook not in REGISTER_HOOKS:
            raise ValueError(f"{hook!r} is not a register hook; known: {', '.join(REGISTER_HOOKS)}")
        with self._lock:
            if hook in self._done:
                return
            self._done.add(hook)
            for info, impl in self._impls(hook):
                calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

                def keep(*args: Any, _calls: list = calls, **kwargs: Any) -> None:
                    _calls.append((args, kwargs))

                try:
                    impl.function(**{name: keep for name in impl.argnames})
                except Exception as exc:
                    self._fail(info, f"raised in {hook}: {_one_line(exc)}", exc)
                    continue
                for args, kwargs in calls:
                    self._apply(info, hook, register, args, kwargs)

    def _apply(
        self,
        info: PluginInfo,
        hook: str,
        register: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> None:
        name = _registered_name(args, kwargs)
        what = REGISTER_HOOKS[hook]
        try:
            register(*args, **kwargs)
        except Exception as exc:
            message = f"could not register the {what} {name!r}: {_one_line(exc)}"
            self._fail(info, message, exc)
            return
        owners = self._owners.setdefault(hook, {})
        previous = owners.get(name)
        if previous is not None:
            by = "itself" if previous == info.name else self._infos[previous].label
            self._note(info, f"{info.label} replaces the {what} {name!r} registered by {by}")
            if previous != info.name:
                self._infos[previous].registered[hook].remove(name)
        owners[name] = info.name
        names = info.registered.setdefault(hook, [])
        if name not in names:
            names.append(name)

    def ensure_commands(self, cli: Any, *, reserved: Iterable[str] = ()) -> None:
        """Call every plugin's ``register_commands(cli)`` once per host. A command named as
        one of ``reserved`` (the built-in commands, looked up lazily) is refused with an
        error, as is every command of a hook that raised."""
        reserved = set(reserved)
        with self._lock:
            if "register_commands" in self._done:
                return
            self._done.add("register_commands")
            for info, impl in self._impls("register_commands"):
                before = dict(cli.commands)
                try:
                    impl.function(**{name: cli for name in impl.argnames})
                except Exception as exc:
                    _restore(cli, before)
                    self._fail(info, f"raised in register_commands: {_one_line(exc)}", exc)
                    continue
                added = [n for n, c in cli.commands.items() if before.get(n) is not c]
                for name in added:
                    if name in reserved:
                        del cli.commands[name]
                        if name in before:
                            cli.commands[name] = before[name]
                        message = f"may not replace the built-in command {name!r}"
                        self._fail(info, message, None)
                        continue
                    owners = self._owners.setdefault("register_commands", {})
                    if name in owners:
                        by = self._infos[owners[name]].label
                        self._note(info, f"{info.label} replaces the command {name!r} of {by}")
                        self._infos[owners[name]].registered["register_commands"].remove(name)
                    owners[name] = info.name
                    info.registered.setdefault("register_commands", []).append(name)

    # -- listing -----------------------------------------------------------------------------
    def plugins(self) -> list[PluginInfo]:
        """Every plugin seen (loaded or not), built-ins first; what each registered covers
        the hooks called so far."""
        self.manager()
        with self._lock:
            return list(self._infos.values())

    def hooks_called(self) -> set[str]:
        """The hooks called so far."""
        with self._lock:
            return set(self._done)


def _version() -> str:
    from otelcar.version import __version__

    return __version__


def _resolve(plugin: Any) -> Any:
    """A module name is imported; anything else is the plugin itself."""
    return importlib.import_module(plugin) if isinstance(plugin, str) else plugin


def _entry_points(group: str) -> list[tuple[PluginInfo, importlib.metadata.EntryPoint]]:
    """Every entry point of ``group`` with the distribution declaring it (a distribution
    found twice on ``sys.path`` counts once: the first one found)."""
    found = []
    for entry_point in importlib.metadata.entry_points(group=group):
        dist = entry_point.dist
        info = PluginInfo(
            entry_point.name,
            entry_point=f"{entry_point.name} = {entry_point.value}",
            distribution=dist.metadata["Name"] if dist is not None else None,
            version=dist.version if dist is not None else None,
        )
        found.append((info, entry_point))
    return found


def _registered_name(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """The name a ``register`` call registers: its first argument (or its ``name=`` /
    ``scheme=``) when that is text, else that argument's ``name`` (a mapper, a format)."""
    if args:
        first = args[0]
    else:
        keyed = [kwargs[k] for k in ("name", "scheme") if k in kwargs]
        first = keyed[0] if keyed else next(iter(kwargs.values()), None)
    if isinstance(first, str):
        return first
    return str(getattr(first, "name", None) or repr(first))


def _restore(cli: Any, before: dict[str, Any]) -> None:
    cli.commands.clear()
    cli.commands.update(before)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


_HOST: PluginHost | None = None
_HOST_LOCK = threading.Lock()


def default_host() -> PluginHost:
    """The process's plugins: the built-ins and the ``otelcar`` entry points."""
    global _HOST
    with _HOST_LOCK:
        if _HOST is None:
            _HOST = PluginHost()
        return _HOST


def ensure_hook(hook: str, register: Callable[..., Any]) -> None:
    """Call ``hook`` of every plugin of :func:`default_host` with ``register``, once."""
    default_host().ensure(hook, register)
