"""Rule names every GBNF reader takes: ``[A-Za-z0-9-]`` (llama.cpp's rule-name characters).

    gbnf_rule_names(grammar) -> (grammar, renamed names)

The portable target's pass form of the GBNF writer's renaming (``formats.ebnf.llamacpp_names``,
its one home): applied to the output whatever dialect it is written in, and reported.
llama.cpp's parser reads a rule name as a run of letters, digits and ``-`` and refuses
``select_statement`` ("expecting newline or end"); xgrammar and llguidance read both.
Argument: a consistent renaming of nonterminals is a grammar isomorphism (``Grammar.renamed``).
"""

from __future__ import annotations

from ...formats.ebnf import llamacpp_names
from ...grammar import Grammar


def gbnf_rule_names(g: Grammar) -> tuple[Grammar, list[str]]:
    """``g`` with every rule name in ``[A-Za-z0-9-]``; returns the grammar and the names that
    changed (empty: ``g`` itself)."""
    mapping = llamacpp_names(g)
    return g.renamed(mapping), list(mapping)
