"""Alternation rewrites (Python searchers): the set semantics of the n-ary ``Alt``.

    alt-normalize  (a | (b | c) | a)  → (a | b | c)   flatten anonymous inner unions,
                                                       drop duplicates, sort by class id
                   (a | a)            → a
    alt-optional   (x | ε)            → x?   ;  (x+ | ε) → x*  ;  (x* | ε) → x*
    alt-charclass  ("a" | [b-d] | e)  → ([a-d] | e)   (GBNF/EBNF only, never Lark)

Arguments: union is associative, commutative and idempotent, so any flattening, ordering
and deduplication denotes the same set; x | ε = x? by definition; x+ ∪ {ε} = x*;
x* ∪ {ε} = x*. A character class or a one-code-point literal denotes the set of the UTF-8
encodings of its code points, so a union of such atoms is the class of the union of their
code points. Lark literals are lexer tokens (atoms of another alphabet), so alt-charclass
is off for Lark.
"""

from __future__ import annotations

from ..egraph.rewrite import Context, Rewrite
from ..grammar import CharClass, Literal


def _normal_children(ctx: Context, c: int, children: tuple[int, ...]) -> list[int]:
    out: dict[int, None] = {}
    for ch in children:
        inner = ctx.first_node(ch, "Alt") if ch not in ctx.snap.names and ch != c else None
        if inner is not None:
            for x in inner.children:
                out.setdefault(x, None)
        else:
            out.setdefault(ch, None)
    return sorted(out)


def _normalize(ctx: Context):
    for c, nodes in ctx.snap.classes.items():
        for n in nodes:
            if n.kind != "Alt":
                continue
            items = _normal_children(ctx, c, n.children)
            if len(items) == 1:
                yield c, ("c", items[0])
            elif tuple(items) != n.children:
                yield c, ("alt", [("c", i) for i in items])


def _rep(ctx: Context, c: int, lo: int, hi: int) -> int | None:
    for n in ctx.snap.classes.get(c, ()):
        if n.kind == "Rep" and n.data == (lo, hi):
            return n.children[0]
    return None


def _optional(ctx: Context):
    for c, nodes in ctx.snap.classes.items():
        for n in nodes:
            if n.kind != "Alt":
                continue
            eps = [ch for ch in n.children if ctx.has_eps(ch)]
            rest = [ch for ch in n.children if not ctx.has_eps(ch)]
            if not eps or not rest:
                continue
            if len(rest) == 1:
                x = rest[0]
                plus = _rep(ctx, x, 1, -1)
                if plus is not None:
                    yield c, ("rep", ("c", plus), 0, -1)
                elif _rep(ctx, x, 0, -1) is not None:
                    yield c, ("c", x)
                else:
                    yield c, ("rep", ("c", x), 0, 1)
            else:
                yield c, ("rep", ("alt", [("c", x) for x in rest]), 0, 1)


def _code_points(atom) -> tuple | None:
    if isinstance(atom, CharClass):
        return atom.code_points()
    if isinstance(atom, Literal) and len(atom.text) == 1:
        return ((ord(atom.text), ord(atom.text)),)
    return None


def _charclass(ctx: Context):
    if ctx.lark:
        return
    atoms = ctx.eg.atoms
    for c, nodes in ctx.snap.classes.items():
        for n in nodes:
            if n.kind != "Alt":
                continue
            merged: list = []
            rest: list[int] = []
            for ch in n.children:
                tok = ctx.first_node(ch, "Tok")
                cps = _code_points(atoms[tok.data]) if tok is not None else None
                if cps is not None:
                    merged.extend(cps)
                else:
                    rest.append(ch)
            if len(n.children) - len(rest) >= 2:
                cls = CharClass(tuple(merged))
                yield c, ("alt", [("tok", cls)] + [("c", x) for x in rest])


RULES = [
    Rewrite("alt-normalize", "alternation",
            "Union is associative, commutative and idempotent: flattening, sorting and "
            "deduplicating alternatives denotes the same set; a union of one set is that set.",
            search=_normalize),
    Rewrite("alt-optional", "alternation",
            "x | ε = x?;  x+ | ε = x*;  x* | ε = x*;  (a | b | ε) = (a | b)?.",
            search=_optional),
    Rewrite("alt-charclass", "alternation",
            "A union of single-code-point atoms and classes is the class of the union of their "
            "code points (GBNF/EBNF only; Lark literals are lexer tokens).",
            search=_charclass),
]
