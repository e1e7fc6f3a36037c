"""gramopt's own runtime (``gramopt.runtime``) behind the engine interface, so benchmarks
and calibration drive it like the external engines.

Compile time is what it takes until the first mask can be computed: the automata plus the
token classes of every root state (``TokenTable.precompute``). ``run`` also returns the
per-step ``Counters`` — the calibration features.
"""

from __future__ import annotations

import time

import numpy as np

from ..grammar import Grammar
from .base import Engine, EngineError


class GramoptRuntime(Engine):
    name = "gramopt"
    target = "earley"

    def compile(self, grammar: Grammar):
        from ..runtime import RuntimeGrammarError, compile_grammar  # numba: on first use
        from ..runtime.tokens import TokenTable
        try:
            table = TokenTable(compile_grammar(grammar), self.env.vocab)
        except RuntimeGrammarError as e:
            raise EngineError(str(e).splitlines()[0]) from None
        table.precompute()
        return table

    def matcher(self, table):
        from ..runtime import Matcher
        from ..decoding.loop import GramoptEngine  # imports torch: only when decoding
        return GramoptEngine(Matcher(table))

    def run(self, table, tokens, counters: list | None = None) -> list[float]:
        """Seconds per mask; ``counters`` (when given) gets one ``Counters`` per step: the
        work of accepting the previous token plus that of the mask walk — the chart
        advance an engine like xgrammar does in its own step."""
        from ..runtime import Counters, Matcher
        m = Matcher(table)
        out = np.zeros(self.env.vocab.n_words, np.int32)
        times = []
        advance = Counters()
        for t in tokens:
            s = time.perf_counter()
            c = m.fill_next_token_bitmask(out)
            times.append(time.perf_counter() - s)
            ok = bool((out[t >> 5] >> (t & 31)) & 1) and m.accept_token(t)
            if counters is not None:
                a, b = advance.as_dict(), c.as_dict()
                counters.append(Counters(**{k: a[k] + b[k] for k in a}))
                advance = m.last_counters
            if not ok:
                raise EngineError(f"gramopt rejects token {t} at step {len(times) - 1}")
        return times


class GramoptValiant(Engine):
    """gramopt's matrix (Valiant/CYK) runtime, ``Matcher(grammar, vocab, backend="valiant")``:
    the runtime for grammars that stay ambiguous. Compile time is the binarised normal
    form (``runtime.matrix.build_cnf``). Measured when named (``--engines gramopt-valiant``),
    not by default."""

    name = "gramopt-valiant"
    target = "generic"
    default = False

    def compile(self, grammar: Grammar):
        from ..runtime import RuntimeGrammarError
        from ..runtime.matrix import build_cnf
        try:
            return build_cnf(grammar)
        except RuntimeGrammarError as e:
            raise EngineError(str(e).splitlines()[0]) from None

    def matcher(self, cnf):
        from ..decoding.loop import GramoptEngine
        from ..runtime.matrix import ValiantMatcher
        return GramoptEngine(ValiantMatcher(cnf, self.env.vocab))


__all__ = ["GramoptRuntime", "GramoptValiant"]
