"""Rule names every GBNF reader takes: ``[A-Za-z0-9-]`` (llama.cpp's rule-name characters).

    gbnf_rule_names(grammar) -> (grammar, renamed names)

llama.cpp's parser reads a rule name as a run of letters, digits and ``-`` and refuses
``select_statement`` ("expecting newline or end"); xgrammar and llguidance read both. Each
name with another character gets that character as ``-``, made fresh against every name of
the grammar (``a_b`` beside ``a-b`` becomes ``a-b2``), in rule order: deterministic.
Argument: a consistent renaming of nonterminals (the start included, every reference and
lookahead with it) is a grammar isomorphism, so the language is unchanged.
"""

from __future__ import annotations

import re
from dataclasses import replace

from ...grammar import Grammar, rename_refs
from .common import _fresh

_BAD = re.compile(r"[^A-Za-z0-9-]")


def gbnf_rule_names(g: Grammar) -> tuple[Grammar, list[str]]:
    """``g`` with every rule name in ``[A-Za-z0-9-]`` (module docstring); returns the grammar
    and the names that changed (empty: ``g`` itself)."""
    bad = [r.name for r in g.rules if _BAD.search(r.name)]
    if not bad:
        return g, []
    taken = set(g.names)
    mapping = {n: _fresh(_BAD.sub("-", n) or "rule", taken) for n in bad}
    rules = [replace(r, name=mapping.get(r.name, r.name), body=rename_refs(r.body, mapping),
                     lookahead=None if r.lookahead is None else rename_refs(r.lookahead, mapping))
             for r in g.rules]
    return replace(g.replace_rules(rules), start=mapping.get(g.start, g.start)), bad
