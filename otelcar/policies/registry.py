"""The policy registry: which policy re-decides which step, from Python or ``otelcar.toml``.

Keys: ``llm`` (every decision), ``llm:<agent or step name>`` (more specific, wins),
``tool:<name>``, ``tool:*``. Unregistered tools fall back to the recorded-only policy, which
refuses calls the recording cannot serve (the rollout then fails with that reason).

Policy *types* (for configuration) are a registry too, filled through the
``register_policy_types`` plugin hook (:mod:`otelcar.plugins`) the first time it is consulted:
the built-ins (:data:`BUILTIN_POLICY_TYPES`) register through :func:`register_policy_type`
exactly as third-party ones do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from otelcar.notes import Note, note
from otelcar.plugins.door import RegistryHook
from otelcar.policies.base import LLMPolicy, PolicyError, ToolPolicy
from otelcar.policies.mocks import RecordedOnlyToolPolicy, StaticLLMPolicy, StaticToolPolicy
from otelcar.policies.openai_compat import OpenAICompatiblePolicy
from otelcar.policies.python import (
    CallableLLMPolicy,
    CallableToolPolicy,
    KeywordToolPolicy,
    load_callable,
)
from otelcar.policies.simulated import SimulatedToolPolicy

Factory = Callable[[dict[str, Any], "PolicyRegistry", str], Any]
KINDS = ("llm", "tool", "both")
_TYPES: dict[str, tuple[str, Factory]] = {}


def _add(name: str, kind: str, factory: Factory) -> None:
    if kind not in KINDS:
        raise PolicyError(f"policy type {name!r}: kind {kind!r} is not one of {', '.join(KINDS)}")
    if not callable(factory):
        raise PolicyError(f"policy type {name!r}: the factory is not callable")
    _TYPES[name] = (kind, factory)


_PLUGINS = RegistryHook("register_policy_types", _add)


def _types() -> dict[str, tuple[str, Factory]]:
    _PLUGINS.ensure()
    return _TYPES


def register_policy_type(name: str, kind: str, factory: Factory) -> None:
    """Make ``type = "<name>"`` usable in configuration; ``kind`` is ``llm``, ``tool`` or
    ``both``; ``factory(options, registry, role)`` builds the policy for ``role`` (``llm`` or
    ``tool``: the kind of key it is registered under). Replaces a type of the same name
    (the plugins' types are registered first)."""
    _types()
    _add(name, kind, factory)


def policy_types() -> dict[str, str]:
    """Registered policy type → its kind."""
    return {name: kind for name, (kind, _) in _types().items()}


class PolicyRegistry:
    """Policies by key (see the module docstring)."""

    def __init__(self) -> None:
        self._llm: dict[str, LLMPolicy] = {}
        self._tool: dict[str, ToolPolicy] = {}
        self.default_tool: ToolPolicy = RecordedOnlyToolPolicy()

    def register(self, key: str, policy: Any) -> PolicyRegistry:
        kind, _, name = key.partition(":")
        if kind == "llm":
            if not hasattr(policy, "decide"):
                raise PolicyError(f"{key}: an LLM policy needs an async decide(request)")
            self._llm[key] = policy
        elif kind == "tool" and name:
            if not hasattr(policy, "run"):
                raise PolicyError(f"{key}: a tool policy needs an async run(request)")
            self._tool[key] = policy
        else:
            raise PolicyError(
                f"invalid policy key {key!r}: use llm, llm:<name>, tool:<name> or tool:*"
            )
        return self

    def keys(self) -> list[str]:
        return [*self._llm, *self._tool]

    def describe(self) -> dict[str, str]:
        """Each registered key → what answers it: the policy's class, with its model,
        base URL or temperature when it has them (for records of what a rollout ran on)."""
        out: dict[str, str] = {}
        for key, policy in [*self._llm.items(), *self._tool.items()]:
            facts = [
                f"{name}={value}"
                for name in ("model", "base_url", "temperature")
                if (value := getattr(policy, name, None)) is not None
            ]
            out[key] = type(policy).__name__ + (f" ({', '.join(facts)})" if facts else "")
        return out

    def notes(self) -> list[Note]:
        """What the registered policies have to tell the user about the calls so far (a
        python tool policy with undeclared side effects that reused results, say): each line
        of each policy's ``notes()`` (the policy's own words) as a ``policy`` note, for the
        notes of the result that made the calls."""
        out: list[Note] = []
        for policy in [*self._llm.values(), *self._tool.values()]:
            notes = getattr(policy, "notes", None)
            if not callable(notes):
                continue
            for line in notes():
                made = note("policy", text=line)
                if made not in out:
                    out.append(made)
        return out

    def llm(self, key: str) -> LLMPolicy:
        if key not in self._llm:
            raise PolicyError(
                f"no LLM policy {key!r}; registered: {', '.join(self._llm) or 'none'}"
            )
        return self._llm[key]

    def llm_for(self, *, agent: str | None, name: str | None) -> LLMPolicy:
        """The most specific LLM policy for a decision of ``agent`` / step ``name``."""
        for key in (f"llm:{agent}" if agent else None, f"llm:{name}" if name else None, "llm"):
            if key and key in self._llm:
                return self._llm[key]
        raise PolicyError(
            "no LLM policy registered for this decision (agent "
            f"{agent!r}, step {name!r}); register 'llm' (or 'llm:<agent>') in otelcar.toml "
            "or with PolicyRegistry.register"
        )

    def tool_for(self, name: str) -> ToolPolicy:
        return self._tool.get(f"tool:{name}") or self._tool.get("tool:*") or self.default_tool

    @classmethod
    def from_config(cls, config: Mapping[str, Mapping[str, Any]]) -> PolicyRegistry:
        """Build from ``{key: {type: ..., options...}}`` (the ``[policies]`` table)."""
        registry = cls()
        # LLM policies first: simulated tools refer to them.
        ordered = sorted(config.items(), key=lambda kv: not kv[0].startswith("llm"))
        for key, options in ordered:
            type_name = options.get("type")
            types = _types()
            if type_name not in types:
                known = ", ".join(sorted(types))
                raise PolicyError(f"policy {key!r}: unknown type {type_name!r}; known: {known}")
            kind, factory = types[type_name]
            wanted = key.partition(":")[0]
            if kind not in (wanted, "both"):
                raise PolicyError(f"policy {key!r}: type {type_name!r} is a {kind} policy")
            rest = {k: v for k, v in options.items() if k != "type"}
            registry.register(key, factory(rest, registry, wanted))
        return registry


def _options(options: dict[str, Any], allowed: set[str], type_name: str) -> dict[str, Any]:
    unknown = set(options) - allowed
    if unknown:
        raise PolicyError(
            f"{type_name} policy: unknown option(s) {', '.join(sorted(unknown))}; "
            f"allowed: {', '.join(sorted(allowed))}"
        )
    return options


def _openai(options: dict[str, Any], _: PolicyRegistry, __: str) -> Any:
    allowed = {
        "base_url",
        "model",
        "api_key_env",
        "temperature",
        "sampling_temperature",
        "timeout_s",
        "connect_timeout_s",
        "max_retries",
        "first_call_retries",
        "max_concurrency",
        "tool_choice",
        "extra_body",
        "max_tokens",
        "name",
    }
    return OpenAICompatiblePolicy(**_options(options, allowed, "openai"))


def _llama_cpp(options: dict[str, Any], _: PolicyRegistry, __: str) -> Any:
    from otelcar.policies.llama_inprocess import LlamaCppPolicy

    allowed = {
        "model_path",
        "temperature",
        "sampling_temperature",
        "max_tokens",
        "tool_choice",
        "name",
    }
    return LlamaCppPolicy(**_options(options, allowed, "llama-cpp"))


def _anthropic(options: dict[str, Any], _: PolicyRegistry, __: str) -> Any:
    from otelcar.policies.anthropic import AnthropicPolicy

    allowed = {
        "model",
        "base_url",
        "api_key_env",
        "temperature",
        "sampling_temperature",
        "max_tokens",
        "timeout_s",
        "connect_timeout_s",
        "max_retries",
        "first_call_retries",
        "max_concurrency",
        "name",
    }
    if "model" not in options:
        raise PolicyError("anthropic policy: 'model' is required")
    return AnthropicPolicy(**_options(options, allowed, "anthropic"))


def _python(options: dict[str, Any], _: PolicyRegistry, role: str) -> Any:
    """``type = "python"``. LLM: ``function`` (required), ``max_concurrency``. Tool:
    ``function`` or ``factory`` (exactly one; ``module:callable``), ``keywords`` (default
    true: the call's arguments as keywords, else the request), ``side_effects``
    (``none`` | ``sandboxed`` | ``allowed``; undeclared: each distinct call runs once and its
    result is reused) and ``max_concurrency`` (see :class:`CallableToolPolicy`)."""
    tool_only = {"factory", "side_effects"}
    if role != "tool" and tool_only & set(options):
        raise PolicyError(
            f"python policy: {', '.join(sorted(tool_only & set(options)))} only apply to "
            "tool policies (tool:<name> or tool:*)"
        )
    allowed = {"function", "keywords", "max_concurrency"} | (tool_only if role == "tool" else set())
    _options(options, allowed, "python")
    keywords = options.get("keywords", True)
    if not isinstance(keywords, bool):
        raise PolicyError(f"python policy: keywords = {keywords!r} is not true or false")
    concurrency = _positive_int(options.get("max_concurrency", 64), "python", "max_concurrency")
    if role != "tool":
        if "function" not in options:
            raise PolicyError("python policy: 'function' (module:function) is required")
        function = load_callable(options["function"])
        return CallableLLMPolicy(function, name=options["function"], max_concurrency=concurrency)
    if ("function" in options) == ("factory" in options):
        raise PolicyError(
            "python tool policy: give exactly one of 'function' (module:function, the tool) "
            "and 'factory' (module:callable, called once per rollout for a fresh tool state)"
        )
    spec = options.get("function") or options["factory"]
    loaded = load_callable(spec)
    cls = KeywordToolPolicy if keywords else CallableToolPolicy
    return cls(
        loaded if "function" in options else None,
        factory=loaded if "factory" in options else None,
        side_effects=options.get("side_effects"),
        name=spec,
        max_concurrency=concurrency,
    )


def _positive_int(value: Any, type_name: str, option: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PolicyError(f"{type_name} policy: {option} = {value!r} is not a positive integer")
    return value


def _static(options: dict[str, Any], _: PolicyRegistry, __: str) -> Any:
    """``type = "static"`` (LLM): ``responses``, assistant texts answered in turn (cycling),
    whatever the context; ``name``."""
    _options(options, {"responses", "name"}, "static")
    responses = options.get("responses") or []
    if not isinstance(responses, list) or not all(isinstance(r, str) for r in responses):
        raise PolicyError(f"static policy: responses = {responses!r} is not a list of texts")
    return StaticLLMPolicy(responses, name=options.get("name", "static"))


def _mock(options: dict[str, Any], _: PolicyRegistry, __: str) -> Any:
    """``type = "mock"`` (tool): ``results``, a table tool name → the observation text
    (``"*"``: any other tool; a tool in neither fails its rollout); ``name``."""
    _options(options, {"results", "name"}, "mock")
    results = options.get("results") or {}
    if not isinstance(results, Mapping) or not all(isinstance(r, str) for r in results.values()):
        raise PolicyError(
            f'mock policy: results = {results!r} is not a table of tool name = "text"'
        )
    return StaticToolPolicy(results, name=options.get("name", "mock"))


def _recorded(options: dict[str, Any], _: PolicyRegistry, __: str) -> Any:
    """``type = "recorded"`` (tool, the default): no options; a call the recording cannot
    serve fails its rollout with the reason."""
    _options(options, set(), "recorded")
    return RecordedOnlyToolPolicy()


def _simulated(options: dict[str, Any], registry: PolicyRegistry, _: str) -> Any:
    """``type = "simulated"`` (tool): ``llm``, the key of the LLM policy that plays the tool
    (default ``"llm"``); ``max_examples``, recorded calls of the tool shown to it (default 5)."""
    _options(options, {"llm", "max_examples"}, "simulated")
    examples = options.get("max_examples", 5)
    if isinstance(examples, bool) or not isinstance(examples, int) or examples < 0:
        raise PolicyError(f"simulated policy: max_examples = {examples!r} is not an integer ≥ 0")
    return SimulatedToolPolicy(registry.llm(options.get("llm", "llm")), max_examples=examples)


#: The built-in policy types ``(name, kind, factory)``, registered by the built-in plugin.
BUILTIN_POLICY_TYPES: tuple[tuple[str, str, Factory], ...] = (
    ("openai", "llm", _openai),
    ("llama-cpp", "llm", _llama_cpp),
    ("anthropic", "llm", _anthropic),
    ("python", "both", _python),
    ("static", "llm", _static),
    ("mock", "tool", _mock),
    ("recorded", "tool", _recorded),
    ("simulated", "tool", _simulated),
)
