"""IR → IR passes: each a pure ``Grammar -> Grammar`` function with its argument (why it keeps
the language) in its docstring; one home for every pass that is not an e-graph rewrite.

    cleanup/     the clean-ups users expect (``cleanup.PASSES``, run to a fixpoint by
                 ``cleanup.simplify``): equal rules merged, unproductive / unreachable rules
                 removed, ε, canonical repetitions, duplicates, class merging, fusion, factoring
    inline.py    inlining of non-start rules where the exact κ says it pays (post-extraction)
    reshape/     the shapes engines decide well (left recursion as a star, star rules, a root
                 that delegates, lookahead assertions; llama.cpp's empty-first repetitions and
                 widest-last alternatives), composed by the targets' fix-ups from
                 ``reshape.RESHAPINGS``
    fixpoint.py  the one loop that reruns a step until nothing changes (every caller's own cap)

    IR_PASSES[name] -> Pass(name, run)   every IR pass production runs, by stable name (the
                                         law tests iterate over it; the argument is ``run``'s docstring)

The e-graph rewrite families live in ``gramopt.rewrites``; which reshapings a target runs,
and in what order, in ``gramopt.targets``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import functools

from ..grammar import Grammar
from .cleanup import PASSES as CLEANUPS
from .reshape import RESHAPINGS


@dataclass(frozen=True)
class Pass:
    """A named IR pass; ``run``'s docstring (or its module's) is its argument: what it does
    and why the language is kept."""

    name: str
    run: Callable[[Grammar], Grammar]

    def __call__(self, grammar: Grammar) -> Grammar:
        return self.run(grammar)


def _inline(grammar: Grammar) -> Grammar:
    """Inline every rule whose inlining does not increase κ (``inline.inline_rules``)."""
    from .inline import inline_rules
    return inline_rules(grammar)[0]


def _grammar_only(step):
    """A reshaping ``step(g) -> (g, what changed)`` as a ``Grammar -> Grammar`` pass (same docstring)."""
    @functools.wraps(step)
    def run(grammar: Grammar) -> Grammar:
        return step(grammar)[0]
    return run


IR_PASSES: dict[str, Pass] = {
    **{f"cleanup-{n}": Pass(f"cleanup-{n}", fn) for n, fn in CLEANUPS.items()},
    "inline": Pass("inline", _inline),
    **{f"reshape-{n}": Pass(f"reshape-{n}", _grammar_only(fn)) for n, fn in RESHAPINGS.items()},
}

__all__ = ["CLEANUPS", "IR_PASSES", "Pass", "RESHAPINGS"]
