"""Grammar-constrained sampling that checks the grammar only where a token can be drawn.

llama-cpp-python puts a grammar first in its sampler chain (penalties → grammar → top-k →
typical → top-p → min-p → temperature → draw), so at every generated token the grammar
decides for the whole vocabulary (262,144 tokens for Gemma 3) whether each token may come
next: most of the embedded model's time per call went there. :class:`GrammarPrefilter` is a
logits processor (the first link of the same chain) that asks the grammar about the tokens
near the top only, sets every other logit to −∞, and leaves the chain without a grammar:

1. *band*: the tokens whose (penalised) logit is within the margin of the best token;
2. the grammar checks them; if none is allowed, it checks all the other tokens (exact);
3. if the best allowed token is below the best token, the band is widened to the margin
   below the best allowed one and checked too.

The same tokens reach top-k, in the same positions, with the same logits, so the outputs are
token for token those of the grammar-first chain. With k allowed tokens in the band top-k
picks exactly them; otherwise a token left out is at least the margin below an allowed one:

- with top-p < 1 (the server's default 0.95) the margin is 17.4 nats, and such a token adds
  less than half a float32 ulp to top-p's normalisation, which sums the candidates in
  descending order, so no probability changes, and it lies beyond top-p's cut;
- with top-p = 1 and min-p > 0 it is −ln(min-p): min-p removes such a token before the
  temperature and the draw;
- with neither it is 20 · max(1, T) nats: it could only have been drawn with probability
  below e^−20.

``tests/test_local_model.py`` compares the two chains on the refund agent's requests.

The grammar's state follows the generated tokens: each call first accepts the tokens added
to ``input_ids`` since the previous call. Penalties (repeat, frequency, presence) are applied
by the chain after this processor; the band is chosen on logits penalised the same way, so
the tokens they lower are ranked where the chain will rank them.
"""

from __future__ import annotations

import ctypes
import importlib
import math
from collections import Counter
from typing import Any

import numpy as np

#: With top-p < 1, a token this many nats below the best candidate adds less than half an
#: ulp of float32 1.0 (2^-24 > e^-17.33) to top-p's normalisation: it changes nothing.
TOP_P_MARGIN = 17.4
#: Without top-p or min-p, a token left out is this many nats (times max(1, T)) below.
PLAIN_MARGIN = 20.0


def band_margin(*, temperature: float, top_p: float, min_p: float) -> float:
    """How far below the best allowed token the band reaches, for these sampling options:
    beyond it no token can change the draw (see the module docstring)."""
    if top_p < 1.0:
        return TOP_P_MARGIN
    if min_p > 0.0:  # min-p drops every token below best + ln(min_p) before anything else
        return -math.log(min_p) + 1e-3
    return PLAIN_MARGIN * max(1.0, float(temperature))


_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])


class GrammarPrefilter:
    """A llama-cpp-python logits processor enforcing ``grammar`` (GBNF text, root ``root``)
    for one completion of ``llama``; use a new one per completion and :meth:`close` it.

    ``top_k``, ``temperature`` and the penalties are the completion's own sampling options
    (they choose the band). :attr:`checked` counts the tokens the grammar was asked about and
    :attr:`full_scans` the steps at which it had to look at the whole vocabulary.
    """

    def __init__(
        self,
        llama: Any,
        grammar: str,
        *,
        root: str = "root",
        top_k: int = 40,
        top_p: float = 0.95,
        min_p: float = 0.05,
        temperature: float = 0.8,
        repeat_penalty: float = 1.0,
        frequency_penalty: float = 0.0,
        presence_penalty: float = 0.0,
        penalty_last_n: int | None = None,
    ) -> None:
        self._bindings = importlib.import_module("llama_cpp.llama_cpp")
        self._sampler = self._bindings.llama_sampler_init_grammar(
            llama._model.vocab, grammar.encode("utf-8"), root.encode("utf-8")
        )
        if not self._sampler:
            raise ValueError("llama.cpp could not parse the grammar")
        self.top_k = top_k
        self.margin = band_margin(temperature=temperature, top_p=top_p, min_p=min_p)
        self.repeat_penalty = float(repeat_penalty)
        self.frequency_penalty = float(frequency_penalty)
        self.presence_penalty = float(presence_penalty)
        self.penalty_last_n = llama.last_n_tokens_size if penalty_last_n is None else penalty_last_n
        self._prompt_len: int | None = None
        self._seen = 0
        self.steps = 0
        self.checked = 0
        self.full_scans = 0

    # -- the processor ------------------------------------------------------------------------

    def __call__(self, input_ids: Any, scores: Any) -> np.ndarray:
        """The logits with every token the grammar does not allow next (or that cannot be
        drawn) set to −∞."""
        n = len(input_ids)
        if self._prompt_len is None:
            self._prompt_len = self._seen = n
        for token in input_ids[self._seen : n]:
            self._bindings.llama_sampler_accept(self._sampler, int(token))
        self._seen = n
        self.steps += 1
        logits = np.asarray(scores, dtype=np.float32)
        ranked = self._penalised(logits, input_ids[self._prompt_len : n])
        best = float(ranked.max())
        band = np.flatnonzero(ranked >= best - self.margin)
        allowed = band[self._allowed(band)]
        if allowed.size == 0:
            self.full_scans += 1
            rest = np.flatnonzero(ranked < best - self.margin)
            allowed = rest[self._allowed(rest)]
        else:
            best_allowed = float(ranked[allowed].max())
            if best_allowed < best and allowed.size < self._k(logits.size):
                lower = best_allowed - self.margin
                wider = np.flatnonzero((ranked >= lower) & (ranked < best - self.margin))
                allowed = np.concatenate([allowed, wider[self._allowed(wider)]])
        out = np.full(logits.shape, -np.inf, dtype=np.float32)
        out[allowed] = logits[allowed]
        return out

    def close(self) -> None:
        """Free the grammar (idempotent)."""
        if self._sampler:
            self._bindings.llama_sampler_free(self._sampler)
            self._sampler = None

    def __del__(self) -> None:  # pragma: no cover - garbage collection
        self.close()

    # -- internals ----------------------------------------------------------------------------

    def _k(self, n_vocab: int) -> int:
        return self.top_k if self.top_k > 0 else n_vocab

    def _allowed(self, tokens: np.ndarray) -> np.ndarray:
        """A mask over ``tokens``: which the grammar allows next (llama.cpp's own check)."""
        if tokens.size == 0:
            return np.zeros(0, dtype=bool)
        self.checked += int(tokens.size)
        data = (self._bindings.llama_token_data * int(tokens.size))()
        view = np.frombuffer(memoryview(data).cast("B"), dtype=_TOKEN_DATA)
        view["id"] = tokens
        view["logit"] = 0.0  # finite: the grammar sets what it rejects to -inf
        candidates = self._bindings.llama_token_data_array(
            data=data, size=tokens.size, selected=-1, sorted=False
        )
        self._bindings.llama_sampler_apply(self._sampler, ctypes.byref(candidates))
        return np.isfinite(view["logit"])

    def _penalised(self, logits: np.ndarray, generated: Any) -> np.ndarray:
        """``logits`` as llama.cpp's penalties sampler will leave them (the last
        ``penalty_last_n`` generated tokens)."""
        inactive = (
            self.repeat_penalty == 1.0
            and self.frequency_penalty == 0.0
            and self.presence_penalty == 0.0
        )
        if inactive or self.penalty_last_n == 0 or len(generated) == 0:
            return logits
        window = list(generated)[-self.penalty_last_n :] if self.penalty_last_n > 0 else []
        ranked = logits.copy()
        for token, count in Counter(int(t) for t in window).items():
            value = ranked[token]
            value = value / self.repeat_penalty if value > 0 else value * self.repeat_penalty
            ranked[token] = value - count * self.frequency_penalty - self.presence_penalty
        return ranked
