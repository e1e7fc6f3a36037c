"""Remove rules the start rule cannot reach.

    # S ::= "a" A ;  A ::= "b" ;  U ::= "c"   -->   S ::= "a" A ;  A ::= "b"

Why it preserves the language: L(G) is the set of strings derived from the start rule; a
derivation from the start only ever expands rules it reaches through references, so a rule
it cannot reach contributes to no derivation and dropping it changes no derivation.

Roots are the start rule, rules named in a lookahead assertion of a reachable rule (kept
so that the grammar stays well formed) and rules named by a dialect directive (Lark
``%ignore`` and friends name terminals, but a rule named there is kept, to be safe).
Terminals (Lark) are not touched. κ never increases: only whole rules are removed.
"""

from __future__ import annotations

from ...grammar import Grammar, refs


def reachable(grammar: Grammar) -> set[str]:
    """Names of the rules reachable from the start rule (and the other roots above)."""
    rules = grammar.rule_map
    roots = [grammar.start] + [a for d in grammar.directives for a in d.args if a in rules]
    seen: set[str] = set()
    stack = [n for n in roots if n in rules]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        rule = rules[name]
        found = refs(rule.body) + (refs(rule.lookahead) if rule.lookahead is not None else [])
        stack.extend(n for n in found if n in rules and n not in seen)
    return seen


def remove_unreachable(grammar: Grammar) -> Grammar:
    """The grammar without the rules unreachable from its start rule (order kept)."""
    keep = reachable(grammar)
    if len(keep) == len(grammar.rules):
        return grammar
    return grammar.replace_rules(r for r in grammar.rules if r.name in keep)
