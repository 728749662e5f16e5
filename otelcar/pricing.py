"""What a trace's model calls cost in money: a price table of common models, which the user
extends or overrides with ``[prices]`` in ``otelcar.toml``.

Prices are US dollars per million tokens, ``(input, output)``, the providers' published list
prices for standard (non-batch, non-cached) use at the time of writing — check them against
your contract, and override them in ``[prices]``::

    [prices]
    "gpt-4o-mini" = { input = 0.15, output = 0.60 }
    "my-finetune" = { input = 0.30, output = 1.20 }

A step's model (its response model, else its request model) is matched to the **longest key
that begins it**, case-insensitively, after any provider prefix (``openai/``, ``anthropic.``,
``models/``): ``gpt-4o-mini-2024-07-18`` is priced as ``gpt-4o-mini``, never as ``gpt-4o``.
A model no key begins is **unpriced**: its tokens are counted and named, never priced at 0.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from otelcar.errors import OtelcarError

#: US dollars per million tokens, (input, output).
PRICES: dict[str, tuple[float, float]] = {
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4-turbo": (10.00, 30.00),
    "gpt-3.5-turbo": (0.50, 1.50),
    "o1": (15.00, 60.00),
    "o1-mini": (1.10, 4.40),
    "o3": (2.00, 8.00),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
    "claude-opus-4": (15.00, 75.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-3-7-sonnet": (3.00, 15.00),
    "claude-3-5-sonnet": (3.00, 15.00),
    "claude-3-5-haiku": (0.80, 4.00),
    "claude-3-opus": (15.00, 75.00),
    "claude-3-haiku": (0.25, 1.25),
    "gemini-2.5-pro": (1.25, 10.00),
    "gemini-2.5-flash": (0.30, 2.50),
    "gemini-2.0-flash": (0.10, 0.40),
    "gemini-1.5-pro": (1.25, 5.00),
    "gemini-1.5-flash": (0.075, 0.30),
}

_PROVIDER = re.compile(r"^(?:[a-z0-9_-]+/|anthropic\.|models/)", re.IGNORECASE)


class PriceError(OtelcarError):
    """A ``[prices]`` entry that is not ``{input = N, output = N}`` with N ≥ 0."""


def prices_from_config(table: Any) -> dict[str, tuple[float, float]]:
    """``[prices]`` of ``otelcar.toml`` as ``model → (input, output)`` per million tokens."""
    if table is None:
        return {}
    if not isinstance(table, Mapping):
        raise PriceError("[prices] must be a table of models")
    out: dict[str, tuple[float, float]] = {}
    for model, entry in table.items():
        if not isinstance(entry, Mapping) or set(entry) != {"input", "output"}:
            raise PriceError(
                f"[prices] {model!r}: write {{ input = N, output = N }} (dollars per million "
                "tokens)"
            )
        values = (entry["input"], entry["output"])
        numbers = (isinstance(v, int | float) and not isinstance(v, bool) for v in values)
        if not all(numbers) or min(values) < 0:
            raise PriceError(f"[prices] {model!r}: prices must be numbers ≥ 0")
        out[str(model).lower()] = (float(values[0]), float(values[1]))
    return out


def price_of(
    model: str | None, extra: Mapping[str, tuple[float, float]] | None = None
) -> tuple[float, float] | None:
    """The ``(input, output)`` price of ``model``: the longest key of ``extra`` (the user's)
    or :data:`PRICES` that begins it (module docstring); ``None`` when none does."""
    if not model:
        return None
    name = _PROVIDER.sub("", model.strip().lower())
    table = {**PRICES, **(extra or {})}
    best = max((key for key in table if name.startswith(key)), key=len, default=None)
    return None if best is None else table[best]


@dataclass
class Cost:
    """Tokens and their price over some steps: ``dollars`` covers the priced models only;
    ``unpriced`` names the models whose tokens could not be priced (with their tokens)."""

    input_tokens: int = 0
    output_tokens: int = 0
    dollars: float = 0.0
    priced_tokens: int = 0
    unpriced: dict[str, int] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Whether every counted token was priced."""
        return not self.unpriced

    def add(self, other: Cost) -> Cost:
        """This cost with ``other``'s tokens, dollars and unpriced models added (in place)."""
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.dollars += other.dollars
        self.priced_tokens += other.priced_tokens
        for model, tokens in other.unpriced.items():
            self.unpriced[model] = self.unpriced.get(model, 0) + tokens
        return self


def cost_of(steps: pl.DataFrame, extra: Mapping[str, tuple[float, float]] | None = None) -> Cost:
    """The cost of the LLM steps of ``steps`` (any steps table), by each step's model."""
    llm = steps.filter(pl.col("kind") == "llm").select(
        pl.coalesce("response_model", "request_model").alias("model"),
        pl.col("usage").struct.field("input_tokens").fill_null(0).alias("input"),
        pl.col("usage").struct.field("output_tokens").fill_null(0).alias("output"),
    )
    by_model = llm.group_by("model").agg(pl.col("input").sum(), pl.col("output").sum())
    cost = Cost()
    for model, tokens_in, tokens_out in by_model.iter_rows():
        cost.input_tokens += tokens_in
        cost.output_tokens += tokens_out
        if tokens_in + tokens_out == 0:
            continue
        price = price_of(model, extra)
        if price is None:
            name = model or "(no model recorded)"
            cost.unpriced[name] = cost.unpriced.get(name, 0) + tokens_in + tokens_out
            continue
        cost.dollars += (tokens_in * price[0] + tokens_out * price[1]) / 1e6
        cost.priced_tokens += tokens_in + tokens_out
    return cost
