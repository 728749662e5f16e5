"""JSON Schema of one line of ``otelcar export pairs`` (``schemas/pairs.schema.json``): one
of the three formats of :mod:`otelcar.attribution.pairs`, each with its evidence."""

from __future__ import annotations

from typing import Any

from otelcar.attribution.pairs import PAIRS_VERSION


def pairs_schema_document() -> dict[str, Any]:
    """JSON Schema of a line of ``otelcar export pairs`` in any ``--format``."""
    message = _message()
    assistant = {**message, "properties": {**message["properties"], "role": {"const": "assistant"}}}
    tools = {
        "type": "array",
        "items": {
            "type": "object",
            "required": ["type", "function"],
            "properties": {"type": {"const": "function"}, "function": {"type": "object"}},
        },
    }
    from_fix = {
        "type": "object",
        "required": ["source", "fix", "kind", "decision"],
        "properties": {
            "source": {"const": "fix"},
            "fix": {"type": "string"},
            "kind": {"type": "string"},
            "description": {"type": ["string", "null"]},
            "rule": {"type": ["string", "null"]},
            "decision": {
                "type": ["object", "null"],
                "description": "the fix's decision check (schemas/fix.schema.json)",
            },
            "forward": {"type": ["object", "null"]},
            "confidence": {"type": ["number", "null"]},
            "alpha": {"type": ["number", "null"]},
        },
    }
    from_attribution = _attribution_evidence()
    evidence = {"oneOf": [from_fix, from_attribution]}
    messages = {"type": "array", "items": message}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "otelcar/pairs.schema.json",
        "title": "otelcar preference pair (one JSONL line of `otelcar export pairs`)",
        "oneOf": [
            {
                "title": "--format otelcar",
                "type": "object",
                "required": [
                    "format",
                    "version",
                    "trace_id",
                    "step",
                    "decision",
                    "messages",
                    "tools",
                    "rejected",
                    "chosen",
                    "evidence",
                ],
                "properties": {
                    "format": {"const": "otelcar"},
                    "version": {"const": PAIRS_VERSION},
                    "trace_id": {"type": "string"},
                    "step": {"type": "integer"},
                    "decision": {"type": "string"},
                    "messages": messages,
                    "tools": tools,
                    "rejected": assistant,
                    "chosen": assistant,
                    "evidence": evidence,
                },
            },
            {
                "title": "--format dpo (TRL conversational preference)",
                "type": "object",
                "required": ["prompt", "chosen", "rejected", "tools", "evidence"],
                "properties": {
                    "prompt": messages,
                    "chosen": {"type": "array", "items": assistant, "minItems": 1},
                    "rejected": {"type": "array", "items": assistant, "minItems": 1},
                    "tools": tools,
                    "evidence": evidence,
                },
                "not": {"required": ["format"]},
            },
            {
                "title": "--format chat (supervised chat fine-tuning)",
                "type": "object",
                "required": ["messages", "tools", "evidence"],
                "properties": {"messages": messages, "tools": tools, "evidence": evidence},
                "not": {"anyOf": [{"required": ["format"]}, {"required": ["prompt"]}]},
            },
        ],
    }


def _message() -> dict[str, Any]:
    """An OpenAI chat-completions message, as a pair's lines hold them."""
    return {
        "type": "object",
        "required": ["role"],
        "properties": {
            "role": {"enum": ["system", "user", "assistant", "tool", "developer"]},
            "content": {"type": ["string", "null"]},
            "tool_calls": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["id", "type", "function"],
                    "properties": {
                        "id": {"type": "string"},
                        "type": {"const": "function"},
                        "function": {
                            "type": "object",
                            "required": ["name", "arguments"],
                            "properties": {
                                "name": {"type": ["string", "null"]},
                                "arguments": {"type": "string", "description": "JSON text"},
                            },
                        },
                    },
                },
            },
            "tool_call_id": {"type": "string"},
            "name": {"type": "string"},
        },
        "description": "an OpenAI chat-completions message",
    }


def _attribution_evidence() -> dict[str, Any]:
    """The evidence of a pair from an attribution: its step's effect, refutation and the
    fresh rollouts the pair was tested on."""
    counts = {
        "type": "object",
        "required": ["failed", "n"],
        "properties": {"failed": {"type": "integer"}, "n": {"type": "integer"}},
    }
    return {
        "type": "object",
        "required": ["source", "step", "fresh"],
        "properties": {
            "source": {"const": "attribution"},
            "step": {"type": "integer"},
            "delta": {"type": ["number", "null"]},
            "delta_ci": {"type": ["array", "null"], "items": {"type": "number"}},
            "p_adjusted": {"type": ["number", "null"]},
            "confidence": {"type": ["number", "null"]},
            "refutation": {
                "type": "object",
                "required": ["passed", "names"],
                "properties": {
                    "passed": {
                        "type": ["boolean", "null"],
                        "description": "every refutation check passed (null: none was run)",
                    },
                    "names": {"type": "array", "items": {"type": ["string", "null"]}},
                },
            },
            "policy_unfaithful": {
                "type": ["boolean", "null"],
                "description": "the attribution's policy check found the resample policy "
                "rarely reproducing the recorded action at this step (null: not checked)",
            },
            "fresh": {
                "type": "object",
                "required": ["seed_stage", "rollouts_per_plan", "rejected", "chosen", "p"],
                "properties": {
                    "seed_stage": {"const": "pairs"},
                    "rollouts_per_plan": {"type": "integer"},
                    "rejected": counts,
                    "chosen": counts,
                    "p": {"type": "number"},
                    "p_adjusted": {"type": "number"},
                    "alpha": {"type": "number"},
                    "alternatives_tested": {"type": "integer"},
                },
            },
        },
    }
