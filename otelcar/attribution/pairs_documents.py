"""The JSON lines of ``otelcar export pairs``, declared as types: one of three formats
(:data:`~otelcar.attribution.pairs.FORMATS`), each with its evidence;
``schemas/pairs.schema.json`` is generated from :data:`PairLine` (:mod:`otelcar.typeschema`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, Required, TypedDict, get_args

from otelcar.typeschema import Doc, Extra

PairsVersion = Literal[1]
PAIRS_VERSION: int = get_args(PairsVersion)[0]


class FunctionCall(TypedDict):
    """The function a tool call invokes, with its arguments as JSON text."""

    name: str | None
    arguments: Annotated[str, Doc("JSON text")]


class OpenAIToolCall(TypedDict):
    """A tool call of an OpenAI chat-completions message."""

    id: str
    type: Literal["function"]
    function: FunctionCall


class _MessageFields(TypedDict, total=False):
    """What an OpenAI chat-completions message may hold besides its role."""

    content: str | None
    tool_calls: list[OpenAIToolCall]
    tool_call_id: str
    name: str


class OpenAIMessage(_MessageFields):
    """An OpenAI chat-completions message."""

    role: Required[Literal["system", "user", "assistant", "tool", "developer"]]


class AssistantMessage(_MessageFields):
    """An OpenAI chat-completions message of the assistant: a pair's action."""

    role: Required[Literal["assistant"]]


class OpenAITool(TypedDict):
    """A tool as the OpenAI chat-completions API declares it."""

    type: Literal["function"]
    function: dict[str, Any]


class FixEvidence(TypedDict):
    """A pair from a fix that passed: the fix and its checks."""

    source: Literal["fix"]
    fix: str
    kind: str
    description: NotRequired[str | None]
    rule: NotRequired[str | None]
    decision: Annotated[
        dict[str, Any] | None, Doc("the fix's decision check (schemas/fix.schema.json)")
    ]
    forward: NotRequired[dict[str, Any] | None]
    confidence: NotRequired[float | None]
    alpha: NotRequired[float | None]


class RefutationSummary(TypedDict):
    """The attribution's refutation of the culprit."""

    passed: Annotated[bool | None, Doc("every refutation check passed (null: none was run)")]
    names: list[str | None]


class ArmCounts(TypedDict):
    """How often the run failed in one arm of the fresh rollouts."""

    failed: int
    n: int


class FreshEvidence(TypedDict):
    """The fresh rollouts a pair from an attribution was tested on."""

    seed_stage: Literal["pairs"]
    rollouts_per_plan: int
    rejected: ArmCounts
    chosen: ArmCounts
    p: float
    p_adjusted: NotRequired[float]
    alpha: NotRequired[float]
    alternatives_tested: NotRequired[int]


class AttributionEvidence(TypedDict):
    """The evidence of a pair from an attribution: its step's effect, refutation and the
    fresh rollouts the pair was tested on."""

    source: Literal["attribution"]
    step: int
    delta: NotRequired[float | None]
    delta_ci: NotRequired[list[float] | None]
    p_adjusted: NotRequired[float | None]
    confidence: NotRequired[float | None]
    refutation: NotRequired[RefutationSummary]
    policy_unfaithful: NotRequired[
        Annotated[
            bool | None,
            Doc(
                "the attribution's policy check found the resample policy rarely reproducing "
                "the recorded action at this step (null: not checked)"
            ),
        ]
    ]
    fresh: FreshEvidence


Evidence = FixEvidence | AttributionEvidence


class OtelcarLine(TypedDict):
    """--format otelcar"""

    format: Literal["otelcar"]
    version: PairsVersion
    trace_id: str
    step: int
    decision: str
    messages: list[OpenAIMessage]
    tools: list[OpenAITool]
    rejected: AssistantMessage
    chosen: AssistantMessage
    evidence: Evidence


class DpoLine(TypedDict):
    """--format dpo (TRL conversational preference)"""

    prompt: list[OpenAIMessage]
    chosen: Annotated[list[AssistantMessage], Extra(minItems=1)]
    rejected: Annotated[list[AssistantMessage], Extra(minItems=1)]
    tools: list[OpenAITool]
    evidence: Evidence


class ChatLine(TypedDict):
    """--format chat (supervised chat fine-tuning)"""

    messages: list[OpenAIMessage]
    tools: list[OpenAITool]
    evidence: Evidence


#: One line of ``otelcar export pairs`` in any format; a line's keys tell its format.
PairLine = (
    OtelcarLine
    | Annotated[DpoLine, Extra(**{"not": {"required": ["format"]}})]
    | Annotated[
        ChatLine, Extra(**{"not": {"anyOf": [{"required": ["format"]}, {"required": ["prompt"]}]}})
    ]
)
