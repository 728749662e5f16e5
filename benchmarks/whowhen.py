"""Who&When benchmark: counterfactual attribution on the 184 annotated failure logs.

Each log of Who&When (ICML 2025; ``../shared/data/whowhen``) is imported with otelcar (one
history entry = one step; ``docs/dialects/whowhen.md``) and attributed with
:func:`otelcar.attribution.attribute_async` under a **surrogate policy**: the recorded agents
are gone, so every re-decided step is played by one OpenAI-compatible model, by default the
embedded gemma-3-270m (:class:`otelcar.model.server.ModelServer`). The prediction is compared
with the log's labels (``mistake_agent``, ``mistake_step``), next to two trivial baselines
computed in the same run on the same logs: always step 1 (and its speaker), and a uniformly
random step (seeded draw, and its expected accuracy computed exactly).

Pieces, all in this file:

* **Surrogate policy.** ``--config otelcar.toml`` (its ``[policies]``, and its ``[outcome]``
  when it has one), or ``--base-url URL --model NAME``, or by default the embedded local model.
  Requests are fitted to a small model by :class:`FittedPolicy`: a one-line role instruction
  ("you are <agent> ..."), the context trimmed to ``--max-context-chars`` (system prompt and
  task first, then the latest messages) and replies capped at ``--max-tokens``.
* **Environment simulator.** Who&When's code-execution terminal (``Computer_terminal``,
  ``ComputerTerminal``) is imported as ``tool`` steps that no tool call links to: in replay
  their outputs are literal messages of later contexts and are *not* regenerated when an
  earlier agent message changes. ``--terminal simulate`` (default) rewrites those rows of the
  imported steps table (this script only; otelcar is unchanged) into decisions of the terminal
  itself, with the shared conversation as context, and registers an LLM policy that plays the
  terminal (:data:`TERMINAL_INSTRUCTION`) under ``llm:<terminal name>``: once the timeline
  diverges, every later terminal output is re-simulated from the new conversation.
  ``--terminal literal`` keeps otelcar's mapping (terminal outputs stay as recorded).
  ``tool:*`` is a :class:`~otelcar.policies.SimulatedToolPolicy` for any tool call a
  surrogate might make (none do: the logs record no tools, so none are offered).
* **Outcome (the judge against the ground truth).** The run's answer is its last agent
  message with content (bare ``TERMINATE`` messages skipped; after ``FINAL ANSWER:`` when the
  message has one); the run fails unless the normalized ground truth is in it (``--match
  contains``, default, word-bounded) or equals it (``--match exact``). ``--judge`` asks the
  surrogate instead (yes/no, temperature 0, string match when the answer is neither). Logs
  whose recorded answer already matches are skipped and counted: attribution needs a failure.
* **Prediction.** The culprit's step and agent; for a ``locked-in`` verdict the
  ``harmful_step`` and its speaker; otherwise (undecided, or an error) "no prediction",
  scored as wrong. A second, clearly separate row scores the step with the largest positive
  Δ whether significant or not ("largest Δ, untested"): what the curve points at.

Run ``python benchmarks/whowhen.py --quick`` (3 short logs, 2 rollouts, the local model),
``--dry-run`` (import, outcome and fidelity checks and the baselines on every log, no model),
or see ``benchmarks/README.md`` for every option and measured output.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime
import json
import math
import platform
import random
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
from rich import box
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

import otelcar
from otelcar.attribution import AttributionResult, attribute_async
from otelcar.attribution.stats import wilson
from otelcar.conventions.whowhen import ENVIRONMENT, message_for, speaker_of, whowhen_labels
from otelcar.messages import Message
from otelcar.outcome import FunctionOutcome, Outcome
from otelcar.policies import (
    Decision,
    DecisionRequest,
    LLMPolicy,
    OpenAICompatiblePolicy,
    PolicyRegistry,
    SimulatedToolPolicy,
)
from otelcar.replay import Budget, RecordedRun, Rollout, check_fidelity_async, load_run

ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "whowhen"
SUBSETS = ("algorithm-generated", "hand-crafted")
SHORT = {"ag": "algorithm-generated", "hc": "hand-crafted"}
#: ``--quick``: three of the shortest logs (5 entries each): two algorithm-generated with a
#: terminal step, one hand-crafted, labelled at different steps (1, 0 and 4).
QUICK_IDS = ("algorithm-generated/12", "algorithm-generated/57", "hand-crafted/48")
TOLERANCES = (0, 1, 3)
#: Defaults that make the embedded 270M model answer within its 2048-token window, quickly.
LOCAL_MAX_CONTEXT_CHARS = 1500
LOCAL_MAX_TOKENS = 48
REMOTE_MAX_TOKENS = 512

AGENT_INSTRUCTION = (
    "You are {agent}, one of several agents solving a task together in a group chat. "
    "Write {agent}'s next message."
)
TERMINAL_INSTRUCTION = (
    "You are {agent}, the code-execution terminal of a group chat of agents. Execute the code "
    "blocks of the latest message and reply with exactly what the terminal prints, nothing "
    "else: 'exitcode: 0 (execution succeeded)' and 'Code output: ...' on success, "
    "'exitcode: 1 (execution failed)' and the error on failure. If the latest message has no "
    "code, reply: 'There is no code from the last 1 message for me to execute.'"
)
JUDGE_SYSTEM = "You grade answers to questions. Reply with one word: yes or no."
JUDGE_PROMPT = (
    "Question: {question}\nReference answer: {truth}\nSubmitted answer: {answer}\n\n"
    "Does the submitted answer give the reference answer? Reply yes or no."
)
LIMITATION_LITERAL = (
    "terminal steps are replayed as recorded (--terminal literal): after an earlier agent "
    "message changes, later contexts still show the recorded terminal outputs"
)
LIMITATION_SIMULATE = (
    "terminal steps are re-simulated by the surrogate (--terminal simulate): this script "
    "rewrites the imported terminal rows into decisions of the terminal, because otelcar's "
    "Who&When mapping gives them no tool call to re-run; they are then candidates for blame too"
)


# -- logs --------------------------------------------------------------------------------------
@dataclass(frozen=True, order=True)
class LogFile:
    """One Who&When log file: ``subset/id``."""

    subset: str
    id: int
    path: Path = field(compare=False)

    @property
    def key(self) -> str:
        return f"{self.subset}/{self.id}"

    @property
    def short(self) -> str:
        """``ag/12``, ``hc/24``: for tables."""
        return f"{'ag' if self.subset == SUBSETS[0] else 'hc'}/{self.id}"


@dataclass
class LoadedLog:
    """A log imported with otelcar: its steps (terminal rows possibly rewritten), labels and
    the recorded run."""

    file: LogFile
    steps: pl.DataFrame
    labels: dict[str, Any]
    run: RecordedRun
    speakers: list[str | None]  # agent_name of each step (None: the human's question)

    @property
    def n_steps(self) -> int:
        return self.steps.height


def discover(data_dir: Path) -> list[LogFile]:
    """Every ``<subset>/<n>.json`` under ``data_dir``, by subset and number."""
    found = []
    for subset in SUBSETS:
        for path in (data_dir / subset).glob("*.json"):
            if path.stem.isdigit():
                found.append(LogFile(subset, int(path.stem), path))
    return sorted(found)


def parse_ids(text: str) -> list[str]:
    """``ag:12,hc/24,algorithm-generated/53`` → canonical ``subset/id`` keys."""
    keys = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        match = re.fullmatch(r"([a-z-]+)[:/](\d+)", item)
        if match is None or SHORT.get(match[1], match[1]) not in SUBSETS:
            raise argparse.ArgumentTypeError(
                f"cannot read {item!r}; use ag:12, hc:24 or algorithm-generated/12"
            )
        keys.append(f"{SHORT.get(match[1], match[1])}/{int(match[2])}")
    return keys


def select(
    logs: Sequence[LogFile],
    *,
    subset: str | None,
    ids: Sequence[str] | None,
    limit: int | None,
    order: str,
    lengths: Callable[[LogFile], int],
) -> list[LogFile]:
    """The logs to run: by ``ids``, else the ``subset`` (or all), ordered, first ``limit``."""
    if ids:
        by_key = {log.key: log for log in logs}
        missing = [key for key in ids if key not in by_key]
        if missing:
            raise SystemExit(f"--ids: no such log(s): {', '.join(missing)}")
        chosen = [by_key[key] for key in ids]
    else:
        chosen = [log for log in logs if subset is None or log.subset == subset]
    if order == "length":
        chosen = sorted(chosen, key=lambda log: (lengths(log), log))
    return chosen[:limit] if limit is not None else chosen


def history_length(log: LogFile) -> int:
    """Number of history entries of a log file (read directly: only for ordering)."""
    return len(json.loads(log.path.read_text(encoding="utf-8"))["history"])


def is_environment(speaker: str | None) -> bool:
    """Whether a step's speaker is the code-execution environment (otelcar's rule)."""
    return speaker is not None and speaker_of(None, speaker).kind == ENVIRONMENT


def terminals_as_decisions(steps: pl.DataFrame, history: list[Any]) -> pl.DataFrame:
    """The steps with every unlinked terminal row turned into a decision of the terminal.

    The context of terminal step ``i`` is entries ``0..i-1`` seen from the terminal's seat
    (otelcar's :func:`~otelcar.conventions.whowhen.message_for`: its own outputs as
    ``assistant``, other speakers under their names), its action the recorded output. Later
    contexts already hold the output as a message of role ``<terminal name>``, which the
    replay template then resolves to this decision, so a re-simulated output propagates.
    """
    rows = steps.sort("step").to_dicts()
    for row in rows:
        if row["kind"] != "tool" or row["call_step"] is not None:
            continue
        if not is_environment(row["agent_name"]):
            continue
        index, viewer = row["step"], row["agent_name"]
        row.update(
            kind="llm",
            input_messages=[message_for(entry, viewer).to_row() for entry in history[:index]],
            output=Message("assistant", row["tool_result"], name=row["name"]).to_row(),
            tool_name=None,
            tool_result=None,
            content_captured=True,
        )
    return pl.DataFrame(rows, schema=otelcar.STEPS_SCHEMA)


def load_log(file: LogFile, terminal: str) -> LoadedLog:
    """Import one log with otelcar and build its recorded run."""
    steps = otelcar.read_traces(file.path).sort("step")
    labels = whowhen_labels(steps)
    if steps.height != labels["history_length"]:
        raise ValueError(
            f"{file.key}: {steps.height} steps for {labels['history_length']} history entries"
        )
    if terminal == "simulate":
        history = json.loads(file.path.read_text(encoding="utf-8"))["history"]
        steps = terminals_as_decisions(steps, history)
    trace_id = steps["trace_id"][0]
    return LoadedLog(file, steps, labels, load_run(trace_id, steps), steps["agent_name"].to_list())


# -- outcome -----------------------------------------------------------------------------------
_FINAL_ANSWER = re.compile(r"FINAL ANSWER:\s*(.*)", re.IGNORECASE)
_TERMINATE = re.compile(r"\bTERMINATE\b")


def run_answer(steps: pl.DataFrame) -> str | None:
    """The run's answer: the last agent message with content (``TERMINATE`` removed), or
    what follows its last ``FINAL ANSWER:``; ``None`` when no agent said anything.

    Works on a recorded steps table and on a rollout's (both have ``kind``, ``agent_name``,
    ``output``, ``step``); terminal outputs are not answers.
    """
    rows = steps.filter(pl.col("kind") == "llm").sort("step").to_dicts()
    for row in reversed(rows):
        if row["output"] is None or is_environment(row["agent_name"]):
            continue
        text = _TERMINATE.sub("", Message.from_row(row["output"]).content or "").strip()
        if not text:
            continue
        finals = _FINAL_ANSWER.findall(text)
        return finals[-1].strip() if finals else text
    return None


def normalize(text: str) -> str:
    """Lower case, digit-group commas dropped, punctuation (but ``.``) as spaces, one space."""
    text = re.sub(r"(?<=\d),(?=\d{3})", "", text.lower())
    return " ".join(re.sub(r"[^\w.%$]+", " ", text).split()).strip(" .")


def answer_matches(answer: str | None, truth: str, match: str) -> bool:
    """``contains``: the normalized truth occurs in the normalized answer, word-bounded;
    ``exact``: they are equal."""
    if answer is None:
        return False
    got, want = normalize(answer), normalize(truth)
    if not want:
        return False
    if match == "exact":
        return got == want
    return re.search(rf"(?<!\w){re.escape(want)}(?!\w|\.\d)", got) is not None


@dataclass
class JudgeStats:
    """What the LLM judge did over the whole run."""

    calls: int = 0
    cached: int = 0
    unparsed: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass
class GroundTruthCheck:
    """``steps -> failed``: the run's answer does not match the ground truth."""

    truth: str
    match: str = "contains"

    def __call__(self, steps: pl.DataFrame) -> bool:
        return not answer_matches(run_answer(steps), self.truth, self.match)


@dataclass
class LLMJudgeCheck:
    """``steps -> failed`` by asking an LLM whether the run's answer gives the ground truth
    (string match when it answers neither yes nor no). Cached by answer text."""

    policy: LLMPolicy
    question: str
    truth: str
    stats: JudgeStats
    fallback: GroundTruthCheck
    max_chars: int = 800
    cache: dict[str, bool] = field(default_factory=dict)

    async def __call__(self, steps: pl.DataFrame) -> bool:
        answer = run_answer(steps)
        if answer is None:
            return True
        if answer in self.cache:
            self.stats.cached += 1
            return self.cache[answer]
        prompt = JUDGE_PROMPT.format(
            question=_clip(self.question, self.max_chars),
            truth=self.truth,
            answer=_clip(answer, self.max_chars),
        )
        request = DecisionRequest(
            messages=(Message("system", JUDGE_SYSTEM), Message("user", prompt)),
            tools=None,
            params={"temperature": 0, "max_tokens": 4},
            model=None,
            seed=0,
            step=None,
        )
        decision = await self.policy.decide(request)
        self.stats.calls += 1
        self.stats.input_tokens += decision.input_tokens
        self.stats.output_tokens += decision.output_tokens
        word = (decision.message.content or "").strip().lower()
        if word.startswith("yes"):
            failed = False
        elif word.startswith("no"):
            failed = True
        else:
            self.stats.unparsed += 1
            failed = self.fallback(steps)
        self.cache[answer] = failed
        return failed


def ground_truth_outcome(
    log: LoadedLog, *, match: str, judge: LLMPolicy | None, stats: JudgeStats
) -> Outcome:
    """The outcome of one log: its answer against its own ground truth."""
    truth = str(log.labels["ground_truth"])
    check = GroundTruthCheck(truth, match)
    if judge is None:
        return FunctionOutcome(check, f"the answer does not {match} {truth!r}")
    judged = LLMJudgeCheck(judge, str(log.labels["question"] or ""), truth, stats, check)
    return FunctionOutcome(judged, f"judge {judge.name}: the answer is not {truth!r}")


# -- policies ----------------------------------------------------------------------------------
def _clip(text: str, cap: int) -> str:
    """``text`` cut to about ``cap`` characters, keeping its head and its tail."""
    if len(text) <= cap:
        return text
    half = max(cap // 2 - 3, 1)
    return f"{text[:half]} […] {text[-half:]}"


def _with_content(message: Message, content: str) -> Message:
    return dataclasses.replace(message, content=content)


def trim_context(messages: Sequence[Message], limit: int) -> list[Message]:
    """Fit a context into about ``limit`` characters of message text.

    Unchanged when it fits. Otherwise kept: the leading system messages (each clipped to a
    quarter of the limit), the first other message, the task (a fifth), the latest message
    (a third), and as many of the messages just before it as fit in what is left (a fifth
    each), with a note of how many were left out. Long messages keep their head and tail.
    """
    if sum(len(m.content or "") for m in messages) <= limit:
        return list(messages)

    def clipped(message: Message, share: int) -> Message:
        return _with_content(message, _clip(message.content or "", limit // share))

    rest = list(messages)
    head: list[Message] = []
    while rest and rest[0].role == "system":
        head.append(clipped(rest.pop(0), 4))
    if not rest:
        return head
    latest = clipped(rest.pop(), 3)
    if rest:
        head.append(clipped(rest.pop(0), 5))
    room = limit - sum(len(m.content or "") for m in [*head, latest])
    middle: list[Message] = []
    for message in reversed(rest):
        candidate = clipped(message, 5)
        if len(candidate.content or "") > room:
            break
        middle.insert(0, candidate)
        room -= len(candidate.content or "")
    omitted = len(rest) - len(middle)
    note = [Message("user", f"[{omitted} earlier messages left out]")] if omitted else []
    return [*head, *note, *middle, latest]


class FittedPolicy:
    """An LLM policy that fits each request to a small surrogate model, then delegates.

    Trims the recorded context to ``max_context_chars`` (:func:`trim_context`; ``None``: as
    is), then adds ``instruction`` (formatted with the deciding agent) before the first system
    message (or as one), and caps ``max_tokens``. Deterministic, so otelcar's request cache
    and seeds behave exactly as with the inner policy.
    """

    def __init__(
        self,
        inner: LLMPolicy,
        *,
        instruction: str | None,
        max_context_chars: int | None,
        max_tokens: int | None,
        name: str | None = None,
    ) -> None:
        self.inner = inner
        self.instruction = instruction
        self.max_context_chars = max_context_chars
        self.max_tokens = max_tokens
        self.name = name or f"{inner.name}+fitted"
        self.max_concurrency = inner.max_concurrency

    def fit(self, request: DecisionRequest) -> DecisionRequest:
        """The request actually sent to the inner policy."""
        messages = list(request.messages)
        if self.max_context_chars:
            messages = trim_context(messages, self.max_context_chars)
        if self.instruction:
            line = self.instruction.format(agent=request.agent or "an agent")
            if messages and messages[0].role == "system":
                messages[0] = _with_content(messages[0], f"{line}\n\n{messages[0].content or ''}")
            else:
                messages.insert(0, Message("system", line))
        params = dict(request.params)
        if self.max_tokens:
            params["max_tokens"] = min(params.get("max_tokens") or self.max_tokens, self.max_tokens)
        return dataclasses.replace(request, messages=tuple(messages), params=params)

    async def decide(self, request: DecisionRequest) -> Decision:
        return await self.inner.decide(self.fit(request))


@dataclass
class Surrogate:
    """The policies of the run and a description for the report."""

    registry: PolicyRegistry
    judge: LLMPolicy | None
    outcome: Outcome | None  # from --config's [outcome], when it has one
    description: str
    terminal_names: list[str]


def build_surrogate(
    args: argparse.Namespace,
    base_url: str | None,
    model: str | None,
    terminal_names: Iterable[str],
    *,
    local: bool,
) -> Surrogate:
    """The registry: ``llm`` (fitted surrogate), ``llm:<terminal>`` (terminal simulator, with
    ``--terminal simulate``), ``tool:*`` (simulated tools); plus the judge's policy."""
    max_chars = args.max_context_chars
    if max_chars is None:
        max_chars = LOCAL_MAX_CONTEXT_CHARS if local else 0
    max_tokens = args.max_tokens or (LOCAL_MAX_TOKENS if local else REMOTE_MAX_TOKENS)
    terminals = sorted(set(terminal_names)) if args.terminal == "simulate" else []
    config_outcome = None
    inner: dict[str, LLMPolicy] = {}
    tools: dict[str, Any] = {}
    judge: LLMPolicy | None = None
    if args.config:
        from otelcar.project_config import load_config

        config = load_config(args.config)
        config_outcome = config.outcome
        registered = config.registry.keys()  # PolicyRegistry is not iterable
        for key in registered:
            if key.startswith("llm"):
                inner[key] = config.registry.llm(key)
            else:
                tools[key] = config.registry.tool_for(key.partition(":")[2])
        if "llm" not in inner:
            raise SystemExit(f"{args.config}: no [policies.llm]: the surrogate needs one")
        judge = inner.get("llm:judge", inner["llm"]) if args.judge else None
        description = f"config {args.config}: " + ", ".join(
            f"{key}={getattr(policy, 'name', '?')}" for key, policy in inner.items()
        )
    else:
        concurrency = 1 if local else args.policy_concurrency
        timeout = 600.0 if local else 120.0
        inner["llm"] = OpenAICompatiblePolicy(
            base_url=base_url, model=model, max_concurrency=concurrency, timeout_s=timeout
        )
        if args.judge:  # an explicit temperature: a request's 0 would be replaced by 1.0
            judge = OpenAICompatiblePolicy(
                base_url=base_url,
                model=model,
                temperature=0.0,
                max_concurrency=concurrency,
                timeout_s=timeout,
                name=f"judge:{model}",
            )
        description = f"{'embedded ' if local else ''}{model} at {base_url}"
    registry = PolicyRegistry()
    for key, policy in inner.items():
        if key == "llm:judge":
            continue
        registry.register(
            key,
            FittedPolicy(
                policy,
                instruction=TERMINAL_INSTRUCTION
                if is_environment(key.partition(":")[2] or None)
                else AGENT_INSTRUCTION,
                max_context_chars=max_chars or None,
                max_tokens=max_tokens,
            ),
        )
    for name in terminals:
        if f"llm:{name}" not in inner:
            registry.register(
                f"llm:{name}",
                FittedPolicy(
                    inner["llm"],
                    instruction=TERMINAL_INSTRUCTION,
                    max_context_chars=max_chars or None,
                    max_tokens=max_tokens,
                    name=f"terminal-simulator:{inner['llm'].name}",
                ),
            )
    for key, tool in tools.items():
        registry.register(key, tool)
    if "tool:*" not in tools:
        registry.register("tool:*", SimulatedToolPolicy(inner["llm"]))
    description += (
        f"; context ≤ {max_chars} chars" if max_chars else "; context as recorded"
    ) + f"; replies ≤ {max_tokens} tokens"
    return Surrogate(registry, judge, config_outcome, description, terminals)


# -- scoring -----------------------------------------------------------------------------------
@dataclass
class Prediction:
    """A predicted (step, agent); ``step is None``: no prediction."""

    step: int | None
    agent: str | None
    source: str  # culprit | harmful_step | none | error | baseline

    def scores(self, labels: dict[str, Any]) -> dict[str, bool]:
        truth = labels["mistake_step"]
        off = None if self.step is None or truth is None else abs(self.step - truth)
        hit = {f"step_{tol}": off is not None and off <= tol for tol in TOLERANCES}
        return {"agent": self.agent is not None and self.agent == labels["mistake_agent"], **hit}


def baseline_step1(log: LoadedLog) -> Prediction:
    """Always step 1 (0-based index 1, the paper's reference) and its speaker."""
    step = min(1, log.n_steps - 1)
    return Prediction(step, log.speakers[step], "baseline")


def baseline_random(log: LoadedLog, seed: int) -> Prediction:
    """A uniformly random step (seeded by the run's seed and the log) and its speaker."""
    step = random.Random(f"{seed}:{log.file.key}").randrange(log.n_steps)
    return Prediction(step, log.speakers[step], "baseline")


def random_expected(log: LoadedLog) -> dict[str, float]:
    """Exact expected accuracy of the random baseline on one log."""
    n, truth = log.n_steps, log.labels["mistake_step"]
    out = {"agent": sum(s == log.labels["mistake_agent"] for s in log.speakers) / n}
    for tol in TOLERANCES:
        out[f"step_{tol}"] = (
            0.0
            if truth is None
            else len(range(max(0, truth - tol), min(n - 1, truth + tol) + 1)) / n
        )
    return out


def largest_effect(result: AttributionResult) -> Prediction:
    """The step with the largest positive Δ (earliest on ties), significant or not: what the
    commitment curve points at when the test cannot decide. Not otelcar's verdict."""
    best = max((e for e in result.steps if e.delta > 0), key=lambda e: e.delta, default=None)
    if best is None:
        return Prediction(None, None, "none")
    return Prediction(best.step, best.agent, "largest_delta")


def predict(log: LoadedLog, result: AttributionResult) -> Prediction:
    """otelcar's answer: the culprit; for locked-in, the harmful step; else nothing."""
    if result.verdict == "culprit" and result.culprit is not None:
        return Prediction(result.culprit.step, result.culprit.agent, "culprit")
    if result.verdict == "locked-in" and result.harmful_step is not None:
        step = result.harmful_step
        return Prediction(step, log.speakers[step], "harmful_step")
    return Prediction(None, None, "none")


# -- the run -----------------------------------------------------------------------------------
@dataclass
class Totals:
    """Cost over the whole run."""

    llm_calls: int = 0
    cache_hits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    tool_calls: int = 0
    rollouts: int = 0
    rollouts_failed: int = 0
    attribution_wall_s: float = 0.0

    def add(self, cost: dict[str, Any]) -> None:
        for key in ("llm_calls", "cache_hits", "input_tokens", "output_tokens", "tool_calls"):
            setattr(self, key, getattr(self, key) + int(cost.get(key, 0)))
        self.rollouts += int(cost.get("rollouts", 0))
        self.attribution_wall_s += float(cost.get("wall_s", 0.0))


def _number(value: float) -> float | None:
    """Rounded, and ``None`` for NaN (a plan without judged rollouts): JSON has no NaN."""
    return None if math.isnan(value) else round(value, 3)


def _curve(result: AttributionResult) -> list[dict[str, Any]]:
    return [
        {
            "step": e.step,
            "agent": e.agent,
            "q": _number(e.q),
            "delta": _number(e.delta),
            "n": e.n,
            "significant": e.significant,
        }
        for e in result.steps
    ]


async def attribute_log(
    log: LoadedLog,
    outcome: Outcome,
    surrogate: Surrogate,
    args: argparse.Namespace,
    on_rollout: Callable[[Rollout], None],
    totals: Totals,
) -> dict[str, Any]:
    """Attribute one failing log; the per-log record (never raises for otelcar errors)."""
    record: dict[str, Any] = {"n_decisions": log.run.horizon}
    started = time.perf_counter()
    try:
        result = await attribute_async(
            log.run,
            registry=surrogate.registry,
            outcome=outcome,
            rollouts=args.rollouts,
            budget=Budget(max_calls=args.budget),
            seed=args.seed,
            concurrency=args.concurrency,
            on_rollout=on_rollout,
        )
    except Exception as exc:  # counted and reported; the run goes on
        record.update(
            status="error",
            error=f"{type(exc).__name__}: {exc}",
            prediction=dataclasses.asdict(Prediction(None, None, "error")),
            prediction_largest_delta=dataclasses.asdict(Prediction(None, None, "error")),
        )
        record["wall_s"] = round(time.perf_counter() - started, 2)
        return record
    totals.add(result.cost)
    totals.rollouts_failed += len(result.rollout_errors)
    prediction = predict(log, result)
    record.update(
        status="attributed",
        verdict=result.verdict,
        mode=result.mode,
        culprit=None if result.culprit is None else result.culprit.step,
        culprit_agent=None if result.culprit is None else result.culprit.agent,
        ties=result.ties,
        harmful_step=result.harmful_step,
        q_start=_number(result.baseline.q),
        prediction=dataclasses.asdict(prediction),
        prediction_largest_delta=dataclasses.asdict(largest_effect(result)),
        curve=_curve(result),
        cost=result.cost,
        notes=result.notes,
        rollout_errors=result.rollout_errors[:5],
        wall_s=round(time.perf_counter() - started, 2),
    )
    return record


class RolloutTicker:
    """A progress line for one log that counts its finished rollouts."""

    def __init__(self, progress: Progress, key: str) -> None:
        self.progress, self.key, self.seen = progress, key, 0
        self.task = progress.add_task(self._text(), total=None)

    def _text(self) -> str:
        return f"  {self.key}: {self.seen} rollouts"

    def __call__(self, rollout: Rollout) -> None:
        self.seen += 1
        self.progress.update(self.task, description=self._text())

    def close(self) -> None:
        self.progress.remove_task(self.task)


def _local_server(stack: contextlib.ExitStack, console: Console) -> tuple[str, str]:
    from otelcar.model.server import ModelServer

    console.print("starting the embedded local model (otelcar.model.server.ModelServer) …")
    server = stack.enter_context(ModelServer())
    console.print(f"local model {server.model} at {server.base_url} ({server.n_threads} threads)")
    return server.base_url, server.model


def _git_commit() -> str | None:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "otelcar"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return None
    return f"{head}{' + uncommitted otelcar/ changes' if dirty else ''}" if head else None


async def run(args: argparse.Namespace, console: Console) -> dict[str, Any]:
    """Load, check, attribute and score; returns the JSON report."""
    started = time.perf_counter()
    files = select(
        discover(args.data),
        subset=args.subset,
        ids=args.ids,
        limit=args.logs,
        order=args.order,
        lengths=history_length,
    )
    if not files:
        raise SystemExit("no log selected")
    logs: list[LoadedLog] = []
    per_log: list[dict[str, Any]] = []
    pairs: list[tuple[LoadedLog, dict[str, Any]]] = []
    for file in files:
        try:
            logs.append(load_log(file, args.terminal))
        except Exception as exc:
            per_log.append(
                {"log": file.key, "status": "import-error", "error": f"{type(exc).__name__}: {exc}"}
            )
    console.print(
        f"imported {len(logs)} of {len(files)} logs with otelcar "
        f"({sum(log.n_steps for log in logs)} steps, "
        f"{sum(log.run.horizon for log in logs)} decisions, --terminal {args.terminal})"
    )
    terminal_names = {s for log in logs for s in log.speakers if is_environment(s)}
    stack = contextlib.ExitStack()
    with stack:
        surrogate: Surrogate | None = None
        if not args.dry_run:
            base_url, model = args.base_url, args.model
            local = not args.config and base_url is None
            if local:
                base_url, model = _local_server(stack, console)
            surrogate = build_surrogate(args, base_url, model, terminal_names, local=local)
            console.print(f"surrogate: {surrogate.description}")
        judge_stats = JudgeStats()
        totals = Totals()
        progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        with progress:
            overall = progress.add_task("logs", total=len(logs))
            for log in logs:
                record = {
                    "log": log.file.key,
                    "trace_id": log.run.trace_id,
                    "n_steps": log.n_steps,
                    "mistake_step": log.labels["mistake_step"],
                    "mistake_agent": log.labels["mistake_agent"],
                    "ground_truth": log.labels["ground_truth"],
                }
                per_log.append(record)
                pairs.append((log, record))
                if log.labels["ground_truth"] in (None, ""):
                    record["status"] = "skipped-no-ground-truth"
                    progress.advance(overall)
                    continue
                judge = surrogate.judge if surrogate is not None else None
                outcome = (
                    surrogate.outcome
                    if surrogate is not None and surrogate.outcome is not None
                    else ground_truth_outcome(log, match=args.match, judge=judge, stats=judge_stats)
                )
                record["answer"] = run_answer(log.steps)
                try:
                    recorded_failed = await outcome.failed(log.steps)
                except Exception as exc:
                    record.update(status="error", error=f"outcome: {exc}")
                    progress.advance(overall)
                    continue
                record["recorded_failed"] = recorded_failed
                if not recorded_failed:
                    record["status"] = "skipped-passes"
                    progress.advance(overall)
                    continue
                if surrogate is None:  # --dry-run: the fidelity check alone, no policy
                    report = await check_fidelity_async(log.run, outcome=outcome)
                    record.update(
                        status="dry-run",
                        reproducible=report.reproducible,
                        held_only=sum(s.verdict == "held-only" for s in report.steps),
                    )
                    progress.advance(overall)
                    continue
                ticker = RolloutTicker(progress, log.file.short)
                record.update(await attribute_log(log, outcome, surrogate, args, ticker, totals))
                ticker.close()
                progress.advance(overall)
                _log_line(console, record)
    scored = [
        (log, rec) for log, rec in pairs if rec.get("status") in ("attributed", "error", "dry-run")
    ]
    for log, rec in scored:
        rec["baselines"] = {
            "step1": dataclasses.asdict(baseline_step1(log)),
            "random": dataclasses.asdict(baseline_random(log, args.seed)),
        }
    report = {
        "benchmark": "whowhen",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "otelcar": f"{otelcar.__version__} ({_git_commit() or 'no git'})",
        "python": platform.python_version(),
        "machine": f"{platform.system()} {platform.machine()}",
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "surrogate": surrogate.description if surrogate is not None else None,
        "terminals_simulated": surrogate.terminal_names if surrogate is not None else [],
        "terminal_limitation": (
            LIMITATION_SIMULATE if args.terminal == "simulate" else LIMITATION_LITERAL
        ),
        "counts": _counts(per_log),
        "notes": design_notes(args, per_log) if surrogate is not None else [],
        "scores": score_table(scored, args.seed) if scored else [],
        "cost": {
            **dataclasses.asdict(totals),
            "judge": dataclasses.asdict(judge_stats),
            "policy_calls_total": totals.llm_calls + judge_stats.calls,
            "tokens_total": totals.input_tokens
            + totals.output_tokens
            + judge_stats.input_tokens
            + judge_stats.output_tokens,
            "wall_s": round(time.perf_counter() - started, 1),
        },
        "per_log": per_log,
    }
    return report


def design_notes(args: argparse.Namespace, per_log: list[dict[str, Any]]) -> list[str]:
    """What the design itself allows, stated in the output so low scores are read right."""
    notes = []
    r, alpha = args.rollouts, 0.05
    if 0.5**r > alpha:
        notes.append(
            f"with {r} rollouts per plan no step can be significant: the smallest one-sided "
            f"exact McNemar p-value is 0.5^{r} = {0.5**r:.3g} > {alpha} (before Holm)"
        )
    if wilson(r, r).low < 0.5:
        notes.append(
            f"with {r} rollouts per plan even {r}/{r} failures give q_start a 95 % interval "
            f"reaching below 0.5 ({wilson(r, r).low:.2f}), so no verdict can be locked-in"
        )
    if any(rec.get("verdict") == "locked-in" for rec in per_log):
        notes.append(
            "locked-in predictions use otelcar's harmful_step: the first decision whose "
            "recorded prefix already fails; under an answer-based outcome a prefix fails as "
            "soon as its last agent message lacks the ground truth, so this is the first "
            "decision of almost every log"
        )
    return notes


def _short(key: str) -> str:
    """``algorithm-generated/12`` → ``ag/12`` (also for scope names)."""
    return key.replace(SUBSETS[0], "ag").replace(SUBSETS[1], "hc")


def _log_line(console: Console, record: dict[str, Any]) -> None:
    prediction = record.get("prediction") or {}
    if record["status"] == "error":
        console.print(f"[red]{_short(record['log'])}[/]: error: {record['error']}")
        return
    cost = record.get("cost", {})
    console.print(
        f"{_short(record['log'])}: {record['verdict']}, predicted step {prediction.get('step')} "
        f"({prediction.get('agent')}, via {prediction.get('source')}); labelled step "
        f"{record['mistake_step']} ({record['mistake_agent']}); {cost.get('llm_calls', 0)} "
        f"policy calls, {record['wall_s']:.0f} s"
    )


def _counts(per_log: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {"selected": len(per_log)}
    for record in per_log:
        counts[record["status"]] = counts.get(record["status"], 0) + 1
    counts["failing_under_outcome"] = sum(r.get("recorded_failed") is True for r in per_log)
    if counts.get("dry-run"):
        counts["reproducible"] = sum(r.get("reproducible") is True for r in per_log)
    counts["no_prediction"] = sum(
        (r.get("prediction") or {}).get("step") is None
        for r in per_log
        if r["status"] in ("attributed", "error")
    )
    return counts


def score_table(scored: list[tuple[LoadedLog, dict[str, Any]]], seed: int) -> list[dict[str, Any]]:
    """Accuracy rows (otelcar, step 1, random drawn, random expected) per scope."""
    scopes: dict[str, list[tuple[LoadedLog, dict[str, Any]]]] = {"all": scored}
    subsets = sorted({log.file.subset for log, _ in scored})
    if len(subsets) > 1:
        scopes.update({s: [(lg, r) for lg, r in scored if lg.file.subset == s] for s in subsets})
    rows = []
    keys = ["agent", *(f"step_{tol}" for tol in TOLERANCES)]
    for scope, items in scopes.items():
        n = len(items)
        methods: dict[str, list[dict[str, float]]] = {
            "random step (expected)": [random_expected(log) for log, _ in items],
            "always step 1": [baseline_step1(log).scores(log.labels) for log, _ in items],
            f"random step (seed {seed})": [
                baseline_random(log, seed).scores(log.labels) for log, _ in items
            ],
        }
        if any(rec["status"] != "dry-run" for _, rec in items):
            methods = {
                "otelcar attribute": [
                    Prediction(**rec["prediction"]).scores(log.labels) for log, rec in items
                ],
                "largest Δ, untested": [
                    Prediction(**rec["prediction_largest_delta"]).scores(log.labels)
                    for log, rec in items
                ],
                **methods,
            }
        for method, hits in methods.items():
            row: dict[str, Any] = {"scope": scope, "method": method, "logs": n}
            for key in keys:
                row[key] = round(sum(float(h[key]) for h in hits) / n, 4) if n else None
            if method in ("otelcar attribute", "largest Δ, untested"):
                field_name = (
                    "prediction" if method == "otelcar attribute" else ("prediction_largest_delta")
                )
                row["no_prediction"] = sum(rec[field_name]["step"] is None for _, rec in items)
            rows.append(row)
    return rows


# -- printing ----------------------------------------------------------------------------------
def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def print_report(report: dict[str, Any], console: Console, per_log: bool) -> None:
    """The per-log table (small runs or ``--per-log``), the score table and the cost."""
    records = [r for r in report["per_log"] if r.get("status") == "attributed"]
    if records and (per_log or len(records) <= 25):
        table = Table(title="per log", box=box.MARKDOWN)
        for column in (
            "log",
            "steps",
            "decisions",
            "label (step, agent)",
            "verdict",
            "predicted (step, agent, via)",
            "q_start",
            "calls",
            "wall s",
        ):
            table.add_column(column)
        for r in records:
            p = r["prediction"]
            table.add_row(
                _short(r["log"]),
                str(r["n_steps"]),
                str(r["n_decisions"]),
                f"{r['mistake_step']}, {r['mistake_agent']}",
                r["verdict"],
                f"{p['step']}, {p['agent']}, {p['source']}",
                "-" if r["q_start"] is None else f"{r['q_start']:.2f}",
                str(r["cost"].get("llm_calls", 0)),
                f"{r['wall_s']:.0f}",
            )
        console.print(table)
    table = Table(title="accuracy (same logs, same run)", box=box.MARKDOWN)
    for column in ("scope", "method", "logs", "agent", "step exact", "step ±1", "step ±3", "none"):
        table.add_column(column)
    for row in report["scores"]:
        table.add_row(
            _short(row["scope"]),
            row["method"],
            str(row["logs"]),
            _pct(row["agent"]),
            _pct(row["step_0"]),
            _pct(row["step_1"]),
            _pct(row["step_3"]),
            str(row.get("no_prediction", "-")),
        )
    console.print(table)
    counts, cost = report["counts"], report["cost"]
    console.print(
        "logs: "
        + ", ".join(f"{k} {v}" for k, v in counts.items())
        + "\n(skipped-passes: the recorded answer already matches the ground truth under the "
        "outcome; errors and undecided verdicts count as wrong)"
    )
    judge = cost["judge"]
    console.print(
        f"cost: {cost['policy_calls_total']} policy calls ({cost['llm_calls']} attribution, "
        f"{judge['calls']} judge; {cost['cache_hits']} cache hits), "
        f"{cost['tokens_total']} tokens, {cost['tool_calls']} tool-policy calls, "
        f"{cost['rollouts']} rollouts ({cost['rollouts_failed']} failed), "
        f"wall {cost['wall_s']:.0f} s"
    )
    if report["surrogate"]:
        console.print(f"surrogate: {report['surrogate']}")
    for note in [report["terminal_limitation"], *report["notes"]]:
        console.print(f"note: {note}")


# -- command line ------------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Counterfactual attribution on the Who&When logs, with trivial baselines.",
    )
    parser.add_argument("--data", type=Path, default=DATA_DIR, help="Who&When folder")
    parser.add_argument("--subset", choices=SUBSETS, help="one subset only")
    parser.add_argument("--ids", type=parse_ids, help="logs, e.g. ag:12,hc:24")
    parser.add_argument("--logs", type=int, help="the first N selected logs")
    parser.add_argument(
        "--order", choices=("id", "length"), default="id", help="order before --logs"
    )
    parser.add_argument("--quick", action="store_true", help="3 short logs, 2 rollouts")
    parser.add_argument("--config", type=Path, help="otelcar.toml: policies (and outcome)")
    parser.add_argument("--base-url", help="OpenAI-compatible server (with --model)")
    parser.add_argument("--model", help="model name for --base-url")
    parser.add_argument("--policy-concurrency", type=int, default=4, help="for --base-url")
    parser.add_argument(
        "--terminal",
        choices=("simulate", "literal"),
        default="simulate",
        help="re-simulate terminal outputs with the surrogate, or keep them as recorded",
    )
    parser.add_argument(
        "--max-context-chars",
        type=int,
        help=f"trim contexts (default {LOCAL_MAX_CONTEXT_CHARS} for the local model, else 0 = off)",
    )
    parser.add_argument(
        "--max-tokens",
        type=int,
        help=f"cap replies (default {LOCAL_MAX_TOKENS} local, {REMOTE_MAX_TOKENS} otherwise)",
    )
    parser.add_argument("--match", choices=("contains", "exact"), default="contains")
    parser.add_argument("--judge", action="store_true", help="an LLM judge (the surrogate)")
    parser.add_argument("--rollouts", type=int, default=4, help="rollouts per plan (fixed R)")
    parser.add_argument("--budget", type=int, default=400, help="policy calls per log")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=8, help="rollouts in flight")
    parser.add_argument("--dry-run", action="store_true", help="import and check, no policy")
    parser.add_argument("--json", type=Path, help="write the report (per-log results) here")
    parser.add_argument("--per-log", action="store_true", help="print every log's row")
    args = parser.parse_args(argv)
    if args.quick:
        args.ids = args.ids or list(QUICK_IDS)
        args.rollouts = 2
        args.budget = min(args.budget, 40)
    if (args.base_url is None) != (args.model is None):
        parser.error("--base-url and --model go together")
    if args.config and args.base_url:
        parser.error("--config or --base-url, not both")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    console = Console(stderr=True)
    if not args.data.is_dir():
        console.print(
            f"SKIPPED: the Who&When logs are not at {args.data} (expected "
            "../shared/data/whowhen next to the repository; --data DIR to point elsewhere)"
        )
        return 0
    report = asyncio.run(run(args, console))
    print_report(report, Console(width=max(Console().width, 132)), args.per_log)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
        console.print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
