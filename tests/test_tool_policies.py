"""Python tool policies in real rollouts: a fresh state per rollout, side effects declared,
and the user's arguments passed whole, whatever they are called (issue 35, items 3 and 4).

Each test writes a tools module of its own (a fresh module state), builds the policies from
``otelcar.toml`` text, and resamples the first decision of a recorded run: the scripted
policy then calls a tool with arguments the recording lacks, so the tool policy runs.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import pickle
import sys
import tomllib
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from otelcar.errors import UserCodeError
from otelcar.messages import Message, ToolCall
from otelcar.policies import CallableLLMPolicy, PolicyError, PolicyRegistry, ToolRequest
from otelcar.policies.base import RolloutScope
from otelcar.policies.python import CallableToolPolicy, KeywordToolPolicy
from otelcar.project_config import ConfigError, ProjectConfig, parse_config
from otelcar.replay import Environment, Plan, Resample, load_run, run_plan
from otelcar.replay.engine import RolloutSet
from otelcar.report.notes import worded
from otelcar.testing import TRACE_ID, Turn, conversation_steps
from otelcar.usercode import call_user

TOOLS_SOURCE = """
import asyncio

CALLS = []    # every real invocation of a tool
MADE = []     # every state a factory made
JUDGED = []   # the options every outcome call got
FILES = {"draft.txt", "report.txt"}   # module state: what the issue's delete_file kept

def delete_file(path):
    CALLS.append(path)
    if path not in FILES:
        return f"no such file: {path}"
    FILES.discard(path)
    return f"deleted {path}"

async def slow_delete(path):
    CALLS.append(path)
    await asyncio.sleep(0.05)
    return f"deleted {path}"

class FileSystem:
    def __init__(self):
        self.files = {"draft.txt", "report.txt"}

    def delete_file(self, path):
        CALLS.append(path)
        if path not in self.files:
            return f"no such file: {path}"
        self.files.discard(path)
        return f"deleted {path}"

def make_object():
    MADE.append("object")
    return FileSystem()

def make_mapping():
    MADE.append("mapping")
    return {"delete_file": FileSystem().delete_file}

def make_closure():
    MADE.append("closure")
    files = FileSystem()
    return lambda path: files.delete_file(path)

def echo(role, function, request, steps, self, seed, args, kwargs):
    CALLS.append("echo")
    return {"role": role, "function": function, "request": request, "steps": steps,
            "self": self, "seed": seed, "args": args, "kwargs": kwargs}

def judge(table, /, **options):
    JUDGED.append(options)
    return table.height > 0
"""

#: Tool arguments (and outcome ``args``) named like otelcar's own parameters.
COLLIDING = {
    "role": "admin",
    "function": "f",
    "request": "r",
    "steps": 3,
    "self": "me",
    "seed": 7,
    "args": [1, 2],
    "kwargs": {"a": 1},
}


def recorded_run() -> Any:
    """A run that deleted ``report.txt`` and said so: resampling its first decision makes
    the scripted policy call tools the recording does not contain."""
    start = [Message("system", "You manage files."), Message("user", "Tidy up.")]
    delete = ToolCall("delete_file", {"path": "report.txt"}, "c1")
    turns = [
        Turn(Message("assistant", None, (delete,)), ["deleted report.txt"]),
        Turn(Message("assistant", "Done.")),
    ]
    return load_run(TRACE_ID, conversation_steps(TRACE_ID, start, turns))


Calls = Callable[[int], list[tuple[str, dict[str, Any]]]]


def scripted(calls: Calls) -> CallableLLMPolicy:
    """An LLM policy making the tool calls ``calls(seed)`` in turn (the seed of the rollout's
    first re-decision picks them; later decisions only count what they have seen), then
    answering with every result it saw."""

    def decide(request: Any) -> Message:
        seen = [m.content or "" for m in request.messages if m.role == "tool"]
        wanted = calls(request.seed)
        if len(seen) < len(wanted):
            name, arguments = wanted[len(seen)]
            return Message("assistant", None, (ToolCall(name, arguments, f"n{len(seen)}"),))
        return Message("assistant", "saw: " + " | ".join(seen))

    return CallableLLMPolicy(decide, name="scripted")


def twice(tool: str, path: str = "draft.txt") -> Calls:
    return lambda seed: [(tool, {"path": path}), (tool, {"path": path})]


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """A freshly imported tools module (its own name, so its module state is new)."""
    name = f"otelcar_test_tools_{uuid.uuid4().hex[:12]}"
    (tmp_path / f"{name}.py").write_text(TOOLS_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module(name)
    sys.modules.pop(name, None)


def configure(text: str, module: ModuleType) -> ProjectConfig:
    """``otelcar.toml`` text (``MOD`` standing for the tools module) parsed."""
    return parse_config(tomllib.loads(text.replace("MOD", module.__name__)))


def rollouts(
    registry: PolicyRegistry, calls: Calls, *, n: int = 8, outcome: Any = None
) -> RolloutSet:
    """``n`` rollouts resampling the first decision, eight at a time."""
    run = recorded_run()
    registry.register("llm", scripted(calls))
    result = run_plan(
        run,
        Plan((Resample(run.decisions[0].step),)),
        Environment(registry),
        rollouts=n,
        seed=3,
        concurrency=8,
        outcome=outcome,
    )
    assert not result.errors, result.errors
    assert all(r.status == "final" for r in result.rollouts)
    return result


def answers(result: RolloutSet) -> list[str]:
    return [r.decisions[-1].action.content or "" for r in result.rollouts]


def tool_policy(config: ProjectConfig, tool: str) -> Any:
    return config.registry.tool_for(tool)


# -- a fresh state per rollout ----------------------------------------------------------------


@pytest.mark.parametrize("factory", ["make_object", "make_mapping", "make_closure"])
def test_a_factory_gives_every_rollout_a_fresh_tool_state(tools: ModuleType, factory: str):
    config = configure(
        f"""
[policies."tool:delete_file"]
type = "python"
factory = "MOD:{factory}"
side_effects = "sandboxed"
""",
        tools,
    )
    result = rollouts(config.registry, twice("delete_file"))
    # Each rollout deletes the file in its own state, then finds it gone: never another's.
    assert answers(result) == ["saw: deleted draft.txt | no such file: draft.txt"] * 8
    made, files = tools.MADE, tools.FILES
    assert made == [factory.removeprefix("make_")] * 8  # one state per rollout
    assert len(tools.CALLS) == 16
    assert files == {"draft.txt", "report.txt"}  # module state untouched
    origins = {o.origin for r in result.rollouts for o in r.decisions[0].observations}
    assert origins == {f"tool:{tools.__name__}:{factory}"}


def test_module_state_with_side_effects_allowed_runs_every_call_and_is_shared(
    tools: ModuleType,
):
    """The issue's delete_file: with its effects allowed it runs every time, so the rollouts
    share its module state (one of sixteen calls deletes): what a factory avoids."""
    config = configure(
        """
[policies."tool:delete_file"]
type = "python"
function = "MOD:delete_file"
side_effects = "allowed"
""",
        tools,
    )
    result = rollouts(config.registry, twice("delete_file"))
    assert tools.CALLS == ["draft.txt"] * 16
    seen = " | ".join(answers(result))
    assert seen.count("deleted draft.txt") == 1 and seen.count("no such file") == 15
    assert tool_policy(config, "delete_file").notes() == []


# -- undeclared side effects: each distinct call runs once ------------------------------------


def test_an_undeclared_live_tool_runs_once_per_distinct_call(tools: ModuleType):
    config = configure(
        '[policies."tool:delete_file"]\ntype = "python"\nfunction = "MOD:delete_file"\n', tools
    )
    result = rollouts(config.registry, twice("delete_file"))
    assert tools.CALLS == ["draft.txt"]  # sixteen calls, one real run
    assert answers(result) == ["saw: deleted draft.txt | deleted draft.txt"] * 8
    policy = tool_policy(config, "delete_file")
    assert (policy.ran, policy.reused) == (1, 15)
    (note,) = policy.notes()
    assert worded(config.registry.notes()) == [note]  # what attribute and fix add to their notes
    assert "side effects undeclared" in note and "identical calls reuse its result" in note
    assert "side_effects = 'none' | 'sandboxed' | 'allowed'" in note


def test_distinct_calls_each_run_once_however_many_rollouts_make_them(tools: ModuleType):
    config = configure(
        '[policies."tool:delete_file"]\ntype = "python"\nfunction = "MOD:delete_file"\n', tools
    )
    result = rollouts(
        config.registry, lambda seed: [("delete_file", {"path": f"f{seed % 3}.txt"})], n=24
    )
    paths = {a.removeprefix("saw: no such file: ") for a in answers(result)}
    assert len(paths) >= 2  # the rollouts made different calls
    assert sorted(tools.CALLS) == sorted(paths)  # each of them ran once
    assert tool_policy(config, "delete_file").reused == 24 - len(paths)


def test_identical_calls_in_flight_at_once_wait_for_the_first(tools: ModuleType):
    config = configure(
        '[policies."tool:slow_delete"]\ntype = "python"\nfunction = "MOD:slow_delete"\n', tools
    )
    rollouts(config.registry, twice("slow_delete"))
    assert tools.CALLS == ["draft.txt"]

    policy = KeywordToolPolicy(tools.slow_delete, name="slow")
    request = ToolRequest("slow_delete", {"path": "x"}, None, None, 0)

    async def together(policy: KeywordToolPolicy, n: int) -> list[str]:
        return await asyncio.gather(*(policy.run(request) for _ in range(n)))

    assert asyncio.run(together(policy, 5)) == ["deleted x"] * 5
    assert tools.CALLS == ["draft.txt", "x"] and policy.reused == 4
    declared = KeywordToolPolicy(tools.slow_delete, side_effects="none")
    assert asyncio.run(together(declared, 3)) == ["deleted x"] * 3
    assert tools.CALLS == ["draft.txt", "x", "x", "x", "x"]


def test_an_undeclared_factory_still_runs_each_distinct_call_once(tools: ModuleType):
    """A factory makes the state per rollout but declares nothing about the real world."""
    config = configure(
        '[policies."tool:delete_file"]\ntype = "python"\nfactory = "MOD:make_object"\n', tools
    )
    result = rollouts(config.registry, twice("delete_file"))
    assert tools.CALLS == ["draft.txt"] and tools.MADE == ["object"]
    assert answers(result) == ["saw: deleted draft.txt | deleted draft.txt"] * 8


def test_an_error_is_reused_like_a_result_not_retried(tools: ModuleType):
    calls: list[str] = []

    def broken(path: str) -> str:
        calls.append(path)
        raise OSError("disk on fire")

    policy = KeywordToolPolicy(broken, name="broken")
    request = ToolRequest("delete_file", {"path": "x"}, None, None, 0)
    for _ in range(3):
        with pytest.raises(UserCodeError, match="disk on fire"):
            asyncio.run(policy.run(request))
    assert calls == ["x"]


def test_a_policy_sent_to_another_process_starts_with_no_state(tools: ModuleType):
    policy = CallableToolPolicy(factory=tools.make_object, name="fs")
    scope = RolloutScope(0)
    request = ToolRequest("delete_file", {"path": "draft.txt"}, None, None, 0, scope=scope)
    policy_keyword = KeywordToolPolicy(factory=tools.make_object, side_effects="sandboxed")
    assert asyncio.run(policy_keyword.run(request)) == "deleted draft.txt"
    assert asyncio.run(policy_keyword.run(request)) == "no such file: draft.txt"
    copy = pickle.loads(pickle.dumps(policy_keyword))
    assert copy.ran == 0 and asyncio.run(copy.run(request)) == "deleted draft.txt"
    del scope, request  # the rollout ends: its state goes with it
    assert len(policy_keyword._states) == 0
    assert pickle.loads(pickle.dumps(policy)).factory is tools.make_object


# -- arguments named like otelcar's own ------------------------------------------------------


def test_tool_arguments_named_like_otelcars_parameters_reach_the_tool(tools: ModuleType):
    config = configure(
        '[policies."tool:echo"]\ntype = "python"\nfunction = "MOD:echo"\nside_effects = "none"\n',
        tools,
    )
    result = rollouts(config.registry, lambda seed: [("echo", COLLIDING)], n=4)
    for answer in answers(result):
        assert json.loads(answer.removeprefix("saw: ")) == COLLIDING
    assert tools.CALLS == ["echo"] * 4


def test_outcome_args_named_like_otelcars_parameters_reach_the_function(tools: ModuleType):
    args = ", ".join(f"{k} = {json.dumps(v)}" for k, v in COLLIDING.items() if k != "kwargs")
    config = configure(
        f"""
[policies."tool:echo"]
type = "python"
function = "MOD:echo"

[outcome]
type = "function"
function = "MOD:judge"
args = {{ {args}, kwargs = {{ a = 1 }} }}
""",
        tools,
    )
    result = rollouts(
        config.registry, lambda seed: [("echo", COLLIDING)], n=4, outcome=config.outcome
    )
    assert result.n_failed_outcome == 4
    assert tools.JUDGED == [COLLIDING] * 4


def test_call_user_keeps_the_users_keywords_apart_from_its_own():
    def user(*args: Any, **kwargs: Any) -> tuple[Any, Any]:
        return args, kwargs

    got = asyncio.run(call_user(user, "tool function", args=("a",), kwargs=COLLIDING))
    assert got == (("a",), COLLIDING)


# -- configuration ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            'function = "MOD:delete_file"\nside_effects = "sometimes"',
            "side_effects = 'sometimes' is not one of none, sandboxed, allowed",
        ),
        (
            'function = "MOD:delete_file"\nfactory = "MOD:make_object"',
            "exactly one of 'function'",
        ),
        ('side_effects = "none"', "exactly one of 'function'"),
        ('function = "MOD:delete_file"\nkeywords = "yes"', "keywords = 'yes' is not true"),
        ('function = "MOD:delete_file"\nmax_concurrency = 0', "max_concurrency = 0"),
        ('function = "MOD:delete_file"\nsandbox = true', "unknown option(s) sandbox"),
    ],
)
def test_bad_python_tool_options_are_clear_errors(tools: ModuleType, table: str, message: str):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        configure(f'[policies."tool:delete_file"]\ntype = "python"\n{table}\n', tools)


def test_factory_and_side_effects_are_for_tool_policies_only(tools: ModuleType):
    with pytest.raises(ConfigError, match="only apply to tool policies"):
        configure('[policies.llm]\ntype = "python"\nfactory = "MOD:make_object"\n', tools)


def test_a_factory_without_the_tool_fails_the_call_with_what_it_has(tools: ModuleType):
    policy = KeywordToolPolicy(factory=tools.make_mapping, side_effects="sandboxed")
    request = ToolRequest("rename_file", {"path": "x"}, None, None, 0, scope=RolloutScope(0))
    with pytest.raises(PolicyError, match="no callable 'rename_file'; it has: delete_file"):
        asyncio.run(policy.run(request))
    with pytest.raises(PolicyError, match="not a JSON object"):
        asyncio.run(
            KeywordToolPolicy(tools.delete_file, side_effects="none").run(
                ToolRequest("delete_file", "{path: x", None, None, 0)
            )
        )


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('type = "mock"\nresults = "ok"', "mock policy: results = 'ok' is not a table"),
        ('type = "mock"\nresults = { x = 1 }', "is not a table"),
        ('type = "simulated"\nmax_examples = -1', "max_examples = -1"),
    ],
)
def test_bad_mock_and_simulated_options_are_clear_errors(table: str, message: str):
    data = tomllib.loads(
        f'[policies.llm]\ntype = "static"\nresponses = ["x"]\n[policies."tool:x"]\n{table}\n'
    )
    with pytest.raises(ConfigError, match=message):
        parse_config(data)
