"""Small regular rules inlined into their callers (``ws ::= [ \t]*``)."""

from __future__ import annotations

from dataclasses import replace

from ...costmodels.engine_shapes import wide_class
from ...grammar import Alt, CharClass, Expr, Grammar, Ref, Seq, refs, seq, transform, walk
from ...grammar.analysis import reference_counts
from .flat_stars import MAX_FLAT_REFERENCES


SMALL = 8  # expression nodes: [ \t\n]* is 2, "\"" [^"]* "\"" is 4


SMALL_ALT = 12  # ("int" | "float" | "char") [ \t\n]+ is 7


def inline_small_regular_rules(g: Grammar) -> tuple[Grammar, list[str]]:
    """Substitute the body of a small rule that uses no rule for references to it; a rule
    with no reference left is dropped. Argument: replacing a reference by the referenced
    rule's body keeps the language.

    Without an alternation (``ws ::= [ \t\n]*``) the body goes to every reference. Why: a
    shared ``ws`` rule ends wherever any of its callers continues, so its FOLLOW (and any
    assertion) is the union of every caller's next character, and a token like `` x`` stays
    undecided at every ``ws`` position; inline, the star is part of its caller's automaton,
    which knows what comes next. With an alternation (``dataType ::= ("int" | "char") ws``)
    the body goes only where something follows the reference in its sequence: xgrammar lifts
    the group into a helper rule used once and not last, for which it derives an exact
    assertion (the rest of the sequence) that decides ``int x`` inside the cache; at the end of
    a sequence the helper would get no assertion, so there the rule (with its FOLLOW
    assertion) stays. Never inlined: the start rule, rules named in an assertion, rules a
    directive names (``--keep``), and pinned rules (``Rule.pinned``: any assertion, an engine
    macro such as xgrammar's ``Regex``, which xgrammar runs as its own fast path); nothing is
    inlined into a pinned rule either; nor a rule with an alternation and a wide character
    class (``engine_shapes.wide_class``) referenced more than ``MAX_FLAT_REFERENCES`` times
    (llama.cpp's ``char`` in a maxLength of 32,767: each copy is a position xgrammar
    precomputes masks for, and o6213's candidate took its compile past 18 GB)."""
    uses = reference_counts(g)
    pinned = {n for r in g.rules if r.lookahead is not None for n in refs(r.lookahead)}
    pinned.update(a for d in g.directives for a in d.args)
    small, inner = {}, {}
    for r in g.rules:
        if r.name == g.start or r.name in pinned or refs(r.body) or r.pinned:
            continue
        size = sum(1 for _ in walk(r.body))
        if not any(isinstance(x, Alt) for x in walk(r.body)):
            if size <= SMALL:
                small[r.name] = r.body
        elif size <= SMALL_ALT and not (uses[r.name] > MAX_FLAT_REFERENCES
                                        and any(isinstance(x, CharClass) and wide_class(x) for x in walk(r.body))):
            inner[r.name] = r.body
    if not small and not inner:
        return g, []

    def sub(e: Expr) -> Expr:
        if isinstance(e, Ref):
            return small.get(e.name, e)
        if isinstance(e, Seq) and inner:
            items = [inner[x.name] if isinstance(x, Ref) and x.name in inner and i < len(e.items) - 1 else x
                     for i, x in enumerate(e.items)]
            return seq(*items) if items != list(e.items) else e
        return e

    bodies = {r.name: r.body if r.pinned else transform(r.body, sub) for r in g.rules if r.name not in small}
    used = {n for b in bodies.values() for n in refs(b)} | pinned | {g.start}
    after, before = (_uses(bodies.values()), _uses(g.bodies().values())) if inner else ({}, {})
    done = [n for n in g.names if n in small or (n in inner and after.get(n, 0) < before.get(n, 0))]
    if not done:
        return g, []
    rules = [replace(r, body=bodies[r.name]) for r in g.rules
             if r.name in bodies and not (r.name in inner and r.name not in used)]
    return g.replace_rules(rules), done


def _uses(bodies) -> dict[str, int]:
    """How many references to each rule ``bodies`` hold."""
    count: dict[str, int] = {}
    for b in bodies:
        for x in walk(b):
            if isinstance(x, Ref):
                count[x.name] = count.get(x.name, 0) + 1
    return count
