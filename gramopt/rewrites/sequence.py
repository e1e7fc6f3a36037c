"""Sequence rewrites (Python searchers over the snapshot).

    seq-flatten   a (b c) d  → a b c d        (anonymous inner sequence)
    seq-eps       a ε b      → a b
    seq-plus      x x*       → x+   ;  x* x → x+
    seq-star      x* x*      → x*   ;  x? x* → x*  ;  x* x? → x*

Arguments: concatenation is associative with ε as unit; x·x* = x*·x = ∪_{k≥1} x^k = x+;
x*·x* = x* (⊇ by ε ∈ x*, ⊆ since x^i x^j = x^{i+j}); x?·x* = x*·x? = x* likewise.
Only anonymous inner sequences are flattened (rule classes stay references; the
extractor inlines where it pays), which bounds growth.
"""

from __future__ import annotations

from ..egraph.rewrite import Context, Rewrite


def _rep_of(ctx: Context, c: int, lo: int, hi: int) -> int | None:
    for n in ctx.snap.classes.get(c, ()):
        if n.kind == "Rep" and n.data == (lo, hi):
            return n.children[0]
    return None


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


def _pairs(ctx: Context):
    for c, nodes in ctx.snap.classes.items():
        for n in nodes:
            if n.kind != "Seq":
                continue
            ch = n.children
            for i in range(len(ch) - 1):
                a, b = ch[i], ch[i + 1]
                repl = None
                if _rep_of(ctx, b, 0, -1) == a:  # x x* → x+
                    repl = ("rep", ("c", a), 1, -1)
                elif _rep_of(ctx, a, 0, -1) == b:  # x* x → x+
                    repl = ("rep", ("c", b), 1, -1)
                else:
                    xa = _rep_of(ctx, a, 0, -1)
                    xb = _rep_of(ctx, b, 0, -1)
                    if xa is not None and (xa == xb or xa == _rep_of(ctx, b, 0, 1)):
                        repl = ("c", a)
                    elif xb is not None and xb == _rep_of(ctx, a, 0, 1):
                        repl = ("c", b)
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
