"""Recursion normalization (Python searchers over rule classes).

For a rule class X with a union node whose alternatives are classified against X —
left tails ``X w``, infix ``X m X`` (m may be empty: ``X X``), right heads ``w X`` and
bases T (everything else) — propose, by the one rewrite ``rec-normalize``:

    rec-normalize   X ::= X w₁ | … | X m₁ X | … | T    →   X = T (w₁ | … | m₁ T | …)*
                    (only ``X X``:  X ::= X X | T  →  X = T+)          (no right heads)
                    X ::= w₁ X | … | T                 →   X = (w₁ | …)* T  (right heads only)

The argument (shortest counterexample, on the languages of the input's least fixpoint):
S = T U* ⊆ L(X) by induction on the number of U factors, since X ⊇ X w and X ⊇ X m X ⊇
X m T. Conversely let s be a shortest string of L(X) \\ S. It is not in T; so s = x v
with x ∈ L(X), v ∈ L(w), or s = x₁ m x₂. When ε ∉ L(w) the prefix x is strictly shorter,
so x ∈ S and s ∈ S U ⊆ S; when ε ∉ L(m) or ε ∉ L(X), both x₁ and x₂ are strictly shorter,
so s ∈ S M S ⊆ S — a contradiction either way. Hence the side conditions: every w
non-nullable; for an infix, m non-nullable or X non-nullable. (Without them the rewrite is
wrong: the class of a+ also contains a+ | a, i.e. w = ε, and "X = a" would follow.) The
right form is the mirror image. T, w and m may mention X: the argument never looks inside.

    rec-intro   X = x*     →  X = X x | ε ;   X = x+  →  X = X x | x ;
                X = T w*   →  X = X w | T

The converse direction, offered so the extractor can choose a left-recursive rule where
κ says it is cheaper (x* costs a helper nonterminal): x* = x* x ∪ {ε}, x+ = x+ x ∪ x,
T w* = T w* w ∪ T are identities of languages.
"""

from __future__ import annotations

from ..egraph.rewrite import Context, Rewrite


def _classify(ctx: Context, x: int, a: int):
    """('self',), ('left', w), ('infix', m), ('right', w) or ('base',) for alternative a of X."""
    if a == x:
        return ("self",)
    for n in ctx.snap.classes.get(a, ()):
        if n.kind != "Seq" or len(n.children) < 2:
            continue
        ch = n.children
        starts, ends = ch[0] == x, ch[-1] == x
        if starts and ends:
            return ("infix", ch[1:-1])
        if starts:
            return ("left", ch[1:])
        if ends:
            return ("right", ch[:-1])
    return ("base",)


def _seq(items) -> tuple:
    return ("seq", [("c", i) for i in items])


def _normalize(ctx: Context):
    nullable = ctx.nullable
    for x in ctx.snap.names:
        for n in ctx.snap.classes.get(x, ()):
            if n.kind != "Alt":
                continue
            kinds = [_classify(ctx, x, a) for a in n.children]
            if any(k[0] == "self" for k in kinds):
                continue
            bases = [a for a, k in zip(n.children, kinds) if k[0] == "base"]
            lefts = [k[1] for k in kinds if k[0] == "left"]
            infix = [k[1] for k in kinds if k[0] == "infix"]
            rights = [k[1] for k in kinds if k[0] == "right"]
            if not bases:
                continue
            t = ("c", bases[0]) if len(bases) == 1 else ("alt", [("c", b) for b in bases])
            if (lefts or infix) and not rights:
                if any(all(i in nullable for i in w) for w in lefts):
                    continue
                if x in nullable and any(all(i in nullable for i in m) for m in infix):
                    continue
                if not lefts and all(len(m) == 0 for m in infix):
                    yield x, ("rep", t, 1, -1)
                    continue
                u = [_seq(w) for w in lefts]
                if infix:  # X m₁ X | X m₂ X  →  (m₁ | m₂) T inside the star
                    ms = [_seq(m) for m in infix]
                    u.append(("seq", [ms[0] if len(ms) == 1 else ("alt", ms), t]))
                yield x, ("seq", [t, ("rep", u[0] if len(u) == 1 else ("alt", u), 0, -1)])
            elif rights and not lefts and not infix:
                if any(all(i in nullable for i in w) for w in rights):
                    continue
                u = [_seq(w) for w in rights]
                yield x, ("seq", [("rep", u[0] if len(u) == 1 else ("alt", u), 0, -1), t])


def _intro(ctx: Context):
    for x in ctx.snap.names:
        for n in ctx.snap.classes.get(x, ()):
            if n.kind == "Rep" and n.data == (0, -1):
                yield x, ("alt", [("seq", [("c", x), ("c", n.children[0])]), ("eps",)])
            elif n.kind == "Rep" and n.data == (1, -1):
                yield x, ("alt", [("seq", [("c", x), ("c", n.children[0])]), ("c", n.children[0])])
            elif n.kind == "Seq":
                last = n.children[-1]
                for m in ctx.snap.classes.get(last, ()):
                    if m.kind == "Rep" and m.data == (0, -1) and last != x:
                        head = n.children[:-1]
                        yield x, ("alt", [("seq", [("c", x), ("c", m.children[0])]), _seq(head)])
                        break


RULES = [
    Rewrite("rec-normalize", "recursion", __doc__.split("\n\n")[2].strip(), search=_normalize),
    Rewrite("rec-intro", "recursion",
            "x* = x* x ∪ ε, x+ = x+ x ∪ x, T w* = T w* w ∪ T (identities of languages).",
            search=_intro),
]
