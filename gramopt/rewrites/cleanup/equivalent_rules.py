"""Merge rules equal up to renaming, and pass-through rules, before anything reshapes them.

    # A ::= "x" A | "y" ;  B ::= "x" B | "y" ;  S ::= A B      -->   A ::= "x" A | "y" ;  S ::= A A
    # D ::= E ;  E ::= "e" ;  S ::= D                           -->   E ::= "e" ;  S ::= E

Why here and not only in the e-graph (``rewrites/delegation.py`` proves the same merges
there): the later clean-ups rewrite each rule on its own — factoring ``X " " P | X " " P Q``
needs both alternatives to name the same rule — so two copies of one rule that refer to
each other under different names (a duplicated recursive rule) are factored differently
and stop being equal up to renaming before the e-graph sees them. Merging first keeps one
copy, and every later pass sees one name.

Argument (pass-through). ``D ::= E`` has L(D) = L(E) in every fixpoint of the rule
equations, so replacing each reference to D by E and dropping D leaves the least fixpoint
of the other rules unchanged. Chains are followed; a cycle of pass-throughs (no rule of it
derives anything) is left to ``unproductive``.

Argument (renaming). The blocks are the coarsest partition of rule names such that rules
of one block have bodies that are equal expressions once every reference is replaced by
its block (partition refinement, starting from one block). The quotient system (one
equation per block) then has the rules' equations as instances, so as in
``rewrites/delegation.py`` every rule of a block denotes the block's language in the least
fixpoint: replacing references to a member by its block's representative changes no
language.

Kept: the start rule, rules named by a directive or a lookahead, and rules with a
lookahead, Lark flags, priority or aliases stay (their references may still be redirected
to an equal rule). Lark grammars are left alone: a Lark rule name is a parse-tree node the
user's code reads. The representative of a block is its first rule in source order that is
not the start rule, so user-named rules survive their generated copies (which come later).
κ never increases: only whole rules are removed.
"""

from __future__ import annotations

from dataclasses import replace

from ...grammar import Expr, Grammar, Ref, refs, rename_refs, transform
from .common import is_lark


def _pinned(grammar: Grammar) -> set[str]:
    pinned = {grammar.start} | {a for d in grammar.directives for a in d.args}
    for r in grammar.rules:
        if r.lookahead is not None or r.flags or r.priority is not None or any(r.aliases):
            pinned.add(r.name)
        if r.lookahead is not None:
            pinned.update(refs(r.lookahead))
    return pinned


def _pass_through(grammar: Grammar, pinned: set[str]) -> dict[str, str]:
    """Unpinned ``D ::= E`` → the end of its chain of pass-throughs (cycles left out)."""
    rules = grammar.rule_map
    step = {r.name: r.body.name for r in grammar.rules
            if r.name not in pinned and isinstance(r.body, Ref) and r.body.name in rules}
    out: dict[str, str] = {}
    for name in step:
        seen = {name}
        end = step[name]
        while end in step and end not in seen:
            seen.add(end)
            end = step[end]
        if end not in seen:
            out[name] = end
    return out


def blocks(grammar: Grammar) -> dict[str, int]:
    """Block number of every rule: the coarsest partition stable under "bodies equal
    once references are replaced by their blocks"."""
    names = grammar.names
    block = {n: 0 for n in names}
    count = 1
    while True:
        def canon(e: Expr) -> Expr:
            return Ref(f"\0{block[e.name]}") if isinstance(e, Ref) and e.name in block else e
        sigs: dict[tuple, int] = {}
        new = {}
        for r in grammar.rules:
            new[r.name] = sigs.setdefault((block[r.name], transform(r.body, canon)), len(sigs))
        block = new
        if len(sigs) == count:
            return block
        count = len(sigs)


def _redirect(grammar: Grammar, mapping: dict[str, str]) -> Grammar:
    """Drop the rules ``mapping`` names; every reference to one goes to its image."""
    return grammar.replace_rules(replace(r, body=rename_refs(r.body, mapping))
                                 for r in grammar.rules if r.name not in mapping)


def merge_equivalent_rules(grammar: Grammar) -> Grammar:
    """Pass-through rules and rules equal up to renaming, merged (see the module docstring)."""
    if is_lark(grammar) or len(grammar.rules) < 2:
        return grammar
    pinned = _pinned(grammar)
    through = _pass_through(grammar, pinned)
    if through:
        grammar = _redirect(grammar, through)
    members: dict[int, list[str]] = {}
    for name, b in blocks(grammar).items():
        members.setdefault(b, []).append(name)
    mapping: dict[str, str] = {}
    for names in members.values():
        reps = [n for n in names if n != grammar.start]
        if len(names) < 2 or not reps:
            continue
        rep = reps[0]
        mapping.update({n: rep for n in names if n != rep and n not in pinned})
    return _redirect(grammar, mapping) if mapping else grammar
