"""Write ``tests/golden/local_model.json``: short seeded generations of the embedded model,
token for token, for this machine's architecture.

    .venv/bin/python tests/golden/make_local_model_golden.py

``tests/test_local_model.py`` regenerates the same requests and compares. The tokens are a
function of (model, prompt, options, seed) and of the llama.cpp build; the build is the
portable one (``scripts/llama-wheel.sh``), so every machine of one architecture must give
these tokens. Rewrite the file only on purpose (a new llama-cpp-python pin, a new model), and
say so in the commit. Each architecture has its own entry: the kernels differ between them.
"""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "local_model.json"
sys.path.insert(0, str(HERE.parents[1]))

#: The requests: a plain seeded completion, and a grammar-constrained tool decision of the
#: refund agent (the path every replayed decision of the demo takes).
PLAIN = {"prompt": "Write one sentence about a cat:", "max_tokens": 24, "temperature": 0.9}
SEEDS = (1, 2)


def tool_request() -> dict[str, Any]:
    """The refunds agent's decision after the lookup, as in examples/refund_agent/agent.py."""
    from examples.refund_agent.agent import SYSTEM_PROMPT, USER_PROMPT
    from examples.refund_agent.tools import TOOLS, lookup_order

    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "lookup_order", "arguments": json.dumps({"order_id": "A-1001"})},
    }
    return {
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": USER_PROMPT},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": lookup_order("A-1001")},
        ],
        "tools": TOOLS,
        "tool_choice": "auto",
        "temperature": 1.0,
        "max_tokens": 48,
    }


def generate(n_threads: int = 1) -> dict[str, Any]:
    """The generations of this build, with the tokens of each."""
    from otelcar.model import load_llama

    llama = load_llama(n_ctx=1024, n_threads=n_threads)
    try:
        plain = []
        for seed in SEEDS:
            out = llama.create_completion(**PLAIN, seed=seed)
            text = out["choices"][0]["text"]
            plain.append({"seed": seed, "text": text, "tokens": _tokens(llama, text)})
        decisions = []
        for seed in SEEDS:
            llama.reset()
            out = llama.create_chat_completion(**tool_request(), seed=seed)
            decisions.append({"seed": seed, "message": out["choices"][0]["message"]})
    finally:
        llama.close()
    return {"plain": plain, "decisions": decisions}


def _tokens(llama: Any, text: str) -> list[int]:
    return [int(t) for t in llama.tokenize(text.encode("utf-8"), add_bos=False, special=True)]


def main() -> None:
    from otelcar.model.kernels import build_features

    golden = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    golden[platform.machine()] = {"build": build_features(), **generate()}
    GOLDEN.write_text(json.dumps(golden, indent=2, ensure_ascii=False, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN} for {platform.machine()}")


if __name__ == "__main__":
    main()
