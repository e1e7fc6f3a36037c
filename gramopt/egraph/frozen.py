"""Rules the e-graph must not reshape, hidden from it as opaque atoms.

    hidden, thaw = hide_frozen(grammar)     # saturate and extract ``hidden``
    grammar_out = thaw(extracted)           # the frozen rules back, as written

A Lark rule whose top-level alternatives carry ``-> alias`` names (``Rule.aliases``) shapes
the parse tree a Lark user's Transformer sees; the extractor cannot carry those names
through a rewritten body. Rather than give up the whole e-graph pass for such a grammar, each
frozen rule R is taken out of it: R's definition is set aside, every reference to R becomes
an atom ``A_R`` the rewrites cannot look into, and the rules R's body names are pinned as
roots (a directive, as ``--keep`` pins), so that they survive by name. After extraction
``A_R`` becomes ``Ref(R)`` again and R's definition comes back unchanged.

Why the language is kept: every e-graph rewrite is an identity of languages that holds for
any language of its atoms (an atom is an uninterpreted terminal to it), so it holds with
L(R) put for ``A_R``; the one property the rewrites read off an atom is that it is not
nullable, so only rules that derive no empty string (and some string) are frozen. A frozen
start rule stays the start: its hidden body is ``A_start``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from ..grammar import Directive, Grammar, Ref, Terminal, refs, transform
from ..grammar.analysis import nullable_rules, productive_rules

PIN = "frozen-roots"  # the directive naming what the frozen bodies reference
_PREFIX = "__FROZEN_"


def frozen_rules(grammar: Grammar) -> list[str]:
    """The rules to hide: Lark rules with ``-> alias`` names that are productive and not
    nullable (module docstring)."""
    if not any(any(r.aliases) for r in grammar.rules):
        return []
    nullable, productive = nullable_rules(grammar), productive_rules(grammar)
    return [r.name for r in grammar.rules if any(r.aliases) and r.name in productive and r.name not in nullable]


def hide_frozen(grammar: Grammar) -> tuple[Grammar, Callable[[Grammar], Grammar]]:
    """(``grammar`` with its frozen rules hidden, the function that brings them back)."""
    names = frozen_rules(grammar)
    if not names:
        return grammar, lambda g: g
    taken = {t.name for t in grammar.terminals}
    atom = {n: Terminal(_fresh(f"{_PREFIX}{n}", taken)) for n in names}
    back = {a.name: n for n, a in atom.items()}
    originals = {r.name: r for r in grammar.rules if r.name in atom}

    def to_atom(e):
        return atom[e.name] if isinstance(e, Ref) and e.name in atom else e

    def to_ref(e):
        return Ref(back[e.name]) if isinstance(e, Terminal) and e.name in back else e

    kept = []
    for r in grammar.rules:
        if r.name == grammar.start and r.name in atom:
            kept.append(replace(r, body=atom[r.name], aliases=(), lookahead=None))
        elif r.name not in atom:
            kept.append(replace(r, body=transform(r.body, to_atom)))
    roots = [n for r in originals.values() for n in refs(r.body) if n not in atom]
    hidden = replace(grammar.replace_rules(kept), directives=grammar.directives +
                     ((Directive(PIN, tuple(dict.fromkeys(roots))),) if roots else ()))
    order = {r.name: i for i, r in enumerate(grammar.rules)}

    def thaw(g: Grammar) -> Grammar:
        rules = [originals[r.name] if r.name in originals else replace(r, body=transform(r.body, to_ref))
                 for r in g.rules]
        present = {r.name for r in rules}
        rules += [r for n, r in originals.items() if n not in present]
        rules.sort(key=lambda r: order.get(r.name, len(order)))
        directives = tuple(d for d in g.directives if d.name != PIN)
        return replace(g.replace_rules(rules), directives=directives)

    return hidden, thaw


def _fresh(base: str, taken: set[str]) -> str:
    name, k = base, 2
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    taken.add(name)
    return name


__all__ = ["PIN", "frozen_rules", "hide_frozen"]
