"""A start rule that rules reference delegates to a fresh rule (xgrammar 0.2.8's
self-recursive-root bug)."""

from __future__ import annotations

from dataclasses import replace

from ...grammar import Grammar, Ref, Rule, refs, rename_refs
from .common import _fresh


def wrap_referenced_root(g: Grammar, sep: str = "_") -> tuple[Grammar, str | None]:
    """A start rule that some rule references (itself included) delegates to a fresh rule
    holding its body, and every reference to it points there; returns (grammar, the new
    rule's name or None when nothing changed). The new rule is ``{start}{sep}rec`` (the
    portable target passes "-": llama.cpp's rule names have no '_'). Argument: the fresh
    rule derives what the start derived, and the start derives exactly the fresh rule."""
    root = g.rule(g.start)
    if not any(g.start in refs(r.body) for r in g.rules):
        return g, None
    name = _fresh(f"{g.start}{sep}rec", set(g.names))
    mapping = {g.start: name}
    out = []
    for r in g.rules:
        if r.name == g.start:
            out.append(replace(root, body=Ref(name), aliases=(), lookahead=None))
            out.append(Rule(name, rename_refs(root.body, mapping), root.lookahead))
        else:
            la = None if r.lookahead is None else rename_refs(r.lookahead, mapping)
            out.append(replace(r, body=rename_refs(r.body, mapping), lookahead=la))
    return g.replace_rules(out), name
