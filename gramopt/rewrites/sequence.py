"""Sequence rewrites (Python searchers over the snapshot).

    seq-flatten      a (b c) d  → a b c d        (anonymous inner sequence)
                     a ε b      → a b
    seq-repetition   x x*       → x+   ;  x* x → x+
                     x* x*      → x*   ;  x? x* → x*  ;  x* x? → x*

Arguments: concatenation is associative with ε as unit; the repetition forms are law
``concat`` of ``gramopt.grammar.powers`` (L^{a..b}·L^{c..d} = L^{a+c..b+d}: x·x* = x+,
x*·x* = x?·x* = x*), which computes their bounds.
Only anonymous inner sequences are flattened (rule classes stay references; the
extractor inlines where it pays), which bounds growth.
"""

from __future__ import annotations

from ..egraph.rewrite import Context, Rewrite
from ..grammar.powers import ONCE, PLUS, STAR, Bounds, concat


def _flatten(ctx: Context):
    for c, nodes in ctx.snap.classes.items():
        for n in nodes:
            if n.kind != "Seq":
                continue
            items: list[int] = []
            changed = False
            for ch in n.children:
                if ctx.has_eps(ch):
                    changed = True
                    continue
                inner = ctx.first_node(ch, "Seq")
                if inner is not None and ch not in ctx.snap.names and ch != c:
                    items.extend(inner.children)
                    changed = True
                else:
                    items.append(ch)
            if changed:
                yield c, ("seq", [("c", i) for i in items])


def _powers(ctx: Context, c: int) -> list[tuple[int, Bounds]]:
    """Class ``c`` as powers of a base: (c, x{1}) and (x, bounds) for each ?, * or + node."""
    out = [(c, ONCE)]
    for n in ctx.snap.classes.get(c, ()):
        if n.kind == "Rep" and n.data in ((0, -1), (0, 1), (1, -1)):
            out.append((n.children[0], (n.data[0], None if n.data[1] == -1 else n.data[1])))
    return out


def _merged(ctx: Context, a: int, b: int):
    """The repetition (law ``concat``) for adjacent classes ``a b`` when one is a star of a
    base the other is a power of (x x*, x* x, x* x*, x? x*, x* x?), else None."""
    for xa, pa in _powers(ctx, a):
        for xb, pb in _powers(ctx, b):
            if xa != xb or STAR not in (pa, pb) or PLUS in (pa, pb):
                continue
            lo, hi = concat(pa, pb)
            return ("rep", ("c", xa), lo, -1 if hi is None else hi)
    return None


def _pairs(ctx: Context):
    for c, nodes in ctx.snap.classes.items():
        for n in nodes:
            if n.kind != "Seq":
                continue
            ch = n.children
            for i in range(len(ch) - 1):
                repl = _merged(ctx, ch[i], ch[i + 1])
                if repl is not None:
                    items = [("c", x) for x in ch[:i]] + [repl] + [("c", x) for x in ch[i + 2:]]
                    yield c, ("seq", items)
                    break


RULES = [
    Rewrite("seq-flatten", "sequence",
            "Concatenation is associative and ε is its unit: a (b c) d = a b c d, a ε b = a b.",
            search=_flatten),
    Rewrite("seq-repetition", "sequence",
            "x x* = x* x = x+; x* x* = x? x* = x* x? = x* (identities of languages).",
            search=_pairs),
]
