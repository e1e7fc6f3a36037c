"""Lookahead assertions ``(= [F])`` from FOLLOW sets (``grammar/follow.py``)."""

from __future__ import annotations

from dataclasses import replace

from ...grammar import CharClass, Grammar
from ...grammar.follow import follow_sets
from .common import _covers


def infer_lookaheads(g: Grammar) -> tuple[Grammar, int]:
    """Set ``(= [F])``, F = FOLLOW's code points, on every non-start rule whose assertion is
    absent or a character class, when F is non-empty ASCII; returns the grammar and how many
    assertions changed.

    ASCII only: xgrammar *accepts without re-checking* a token whose rest is consumed by an
    assertion it deems exact (a rule used once, not last) without completing it. A non-empty
    rest against one ASCII class either matches its first byte (the assertion completes: the
    token stays uncertain and is re-checked) or fails, so that case never arises; against a
    class with multi-byte code points a rest cut inside a code point would be accepted on
    the strength of F, a union over all of R's contexts, not this one's.

    A character-class assertion already there is *recomputed*, not kept: an earlier round
    may have inferred it for a grammar whose FOLLOW sets the later rewrites changed (a rule
    merged with an equal one used elsewhere), and a stale class narrower than FOLLOW would
    reject allowed tokens. Where no class is inferred, a class already there is kept only if
    it covers F; where F is empty (the rule ends only at the end of input) any assertion is
    sound and the one there is kept. Sequence assertions (written by a user, as
    in xgrammar's built-in JSON) are kept as written; gramopt reads every assertion as a hint
    (ε), so replacing a user's class by FOLLOW keeps the language."""
    follows = follow_sets(g)
    n = 0
    rules = []
    roots = {g.start} | {a for d in g.directives for a in d.args}  # an entry point (--keep) ends anywhere
    for r in g.rules:
        f = follows.get(r.name)
        la = r.lookahead
        if r.name in roots or f is None or not (la is None or isinstance(la, CharClass)) or not f.ranges:
            rules.append(r)
            continue
        if f.covers_everything() or f.ranges[-1][1] > 0x7F:
            new = la if la is not None and _covers(la.code_points(), f.ranges) else None
        else:
            new = CharClass(f.ranges)
        if new != la:
            r = replace(r, lookahead=new)
            n += 1
        rules.append(r)
    return (g.replace_rules(rules), n) if n else (g, 0)
