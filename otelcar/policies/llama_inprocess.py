"""The ``llama-cpp`` policy: the embedded local model in-process, no server.

It builds the same chat-completions request as the OpenAI-compatible policy (messages, tools,
seed, the recorded sampling parameters with the same temperature rules) and sends it to a
``llama_cpp.Llama`` loaded by :func:`otelcar.model.load_llama` with otelcar's chat format
(tool calls constrained by grammar, seeds honoured). One model instance serves all
rollouts, one request at a time (a ``Llama`` is not thread-safe).
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from otelcar.policies.base import Decision, DecisionRequest, PolicyError
from otelcar.policies.openai_compat import OpenAICompatiblePolicy, from_openai_message


class LlamaCppPolicy(OpenAICompatiblePolicy):
    """In-process llama.cpp policy (``type = "llama-cpp"`` in otelcar.toml)."""

    def __init__(
        self, *, model_path: str | Path | None = None, name: str | None = None, **options: Any
    ) -> None:
        super().__init__(name=name or "llama-cpp", **options)
        self.model_path = Path(model_path) if model_path is not None else None
        self.max_concurrency = 1
        self._llama: Any = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        """Picklable (for Ray workers): each process loads its own model on first use."""
        state = super().__getstate__()
        state["_llama"] = None
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _load(self) -> Any:
        if self._llama is None:
            from otelcar.model import load_llama

            try:
                self._llama = load_llama(self.model_path)
            except Exception as exc:
                raise PolicyError(f"{self.name}: cannot load the local model: {exc}") from None
        return self._llama

    def _complete(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            llama = self._load()
            arguments = {k: v for k, v in body.items() if k != "model"}
            return llama.create_chat_completion(**arguments)

    async def decide(self, request: DecisionRequest) -> Decision:
        response = await asyncio.to_thread(self._complete, self.request_body(request))
        choices = response.get("choices") or []
        if not choices:
            raise PolicyError(f"{self.name} returned no choices")
        usage = response.get("usage") or {}
        return Decision(
            from_openai_message(choices[0]["message"]),
            input_tokens=usage.get("prompt_tokens", 0) or 0,
            output_tokens=usage.get("completion_tokens", 0) or 0,
            policy=self.name,
        )
