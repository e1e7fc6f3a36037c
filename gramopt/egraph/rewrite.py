"""Rewrites as named data (egg's ``Rewrite(name, searcher, applier)``).

A rewrite is either an egglog rule (``egglog``: rule text, run by egglog itself) or a
Python searcher over a frozen snapshot of the e-graph (``search``) that proposes equalities
``class c = term``; the runner applies them as unions. Every rewrite carries the argument
why it preserves every class's language (``doc``). The term of a proposal is a nested tuple:

    ("c", class_id)           an existing e-class
    ("tok", atom)             an atom (Literal / CharClass / Terminal / Regex)
    ("eps",)                  ε
    ("seq", [t1, t2, …])      concatenation (a one-item list is that item, none is ε)
    ("alt", [t1, t2, …])      union (a one-item list is that item)
    ("rep", t, min, max)      repetition, max = -1 unbounded

Soundness convention (used by every argument): L(c) is the language of e-class c in the
least fixpoint of the input grammar; every e-node of c denotes exactly L(c) once its
children's languages are plugged in. A rewrite may union c with a term only when that
term's language equals L(c) under that assignment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

from ..grammar.dialects import token_atoms
from .lower import ENode, GrammarEGraph, Snapshot, node_text

Term = tuple
Proposal = tuple[int, Term]


class Context:
    """What a Python searcher sees: the snapshot, the e-graph (atoms, new atoms), the
    dialect, and cached analyses (nullable classes)."""

    def __init__(self, eg: GrammarEGraph, snap: Snapshot):
        self.eg = eg
        self.snap = snap
        self.lark = token_atoms(eg.grammar.dialect)
        self._nullable: set[int] | None = None

    @property
    def nullable(self) -> set[int]:
        """Classes whose language contains ε (least fixpoint over all e-nodes: sound since
        every node denotes its class's language, complete since the input's nodes are there)."""
        if self._nullable is None:
            self._nullable = nullable_classes(self.snap)
        return self._nullable

    def first_node(self, c: int, kind: str) -> ENode | None:
        for n in self.snap.classes.get(c, ()):
            if n.kind == kind:
                return n
        return None

    def has_eps(self, c: int) -> bool:
        return self.first_node(c, "Eps") is not None


def nullable_classes(snap: Snapshot) -> set[int]:
    """The least set closed under ``node_nullable``, by a worklist: a Seq node waits for
    its distinct children (a count), an Alt node for any child, a Rep node of min > 0 for
    its item; a class enters once, when its first node holds. Linear in the e-nodes (a
    round per level over every class, as it was, is quadratic on a chain)."""
    out: set[int] = set()
    waiting: dict[int, list[tuple[int, int]]] = {}  # child -> (class, node number) waiting on it
    need: list[int] = []
    owner: list[int] = []
    ready: list[int] = []
    for c, nodes in snap.classes.items():
        for n in nodes:
            k = n.kind
            if k == "Eps" or k == "Rep" and n.data[0] == 0:
                ready.append(c)
                continue
            if k == "Seq":
                kids = list(dict.fromkeys(n.children))
                if not kids:
                    ready.append(c)
                    continue
            elif k == "Alt" or k == "Rep":
                kids = list(dict.fromkeys(n.children))
            else:
                continue  # Tok atoms consume a symbol; R is a name, not a structure
            i = len(need)
            need.append(len(kids) if k == "Seq" else 1)
            owner.append(c)
            for ch in kids:
                waiting.setdefault(ch, []).append((c, i))
    while ready:
        c = ready.pop()
        if c in out:
            continue
        out.add(c)
        for _, i in waiting.get(c, ()):
            need[i] -= 1
            if need[i] == 0 and owner[i] not in out:
                ready.append(owner[i])
    return out


def node_nullable(n: ENode, nullable: set[int]) -> bool:
    k = n.kind
    if k == "Eps":
        return True
    if k == "Seq":
        return all(ch in nullable for ch in n.children)
    if k == "Alt":
        return any(ch in nullable for ch in n.children)
    if k == "Rep":
        return n.data[0] == 0 or n.children[0] in nullable
    return False  # Tok atoms consume a symbol; R is a name, not a structure


@dataclass(frozen=True)
class Rewrite:
    """One named rewrite; exactly one of ``egglog`` / ``search`` is set."""

    name: str
    family: str
    doc: str
    egglog: str | None = None
    search: Callable[[Context], Iterable[Proposal]] | None = field(default=None, compare=False)


def render(t: Term, eg: GrammarEGraph) -> str:
    """The egglog text of term ``t``, classes named by their witnesses."""
    return _written(t, eg, eg.witness, node_text)


def term_key(t: Term, eg: GrammarEGraph) -> int:
    """The structure id (``GrammarEGraph.structure``) of the term ``render`` writes for ``t``:
    two terms have one id exactly when their texts are equal with every witness spelled out."""
    return _written(t, eg, eg.class_structure, eg.structure)


def _written(t: Term, eg: GrammarEGraph, of_class, node):
    """``t`` as written to egglog, folded: ``of_class(c)`` for a class, ``node(kind, data,
    kids)`` for each e-node (ε dropped from sequences, one-item groups written as the item)."""
    k = t[0]
    if k == "c":
        return of_class(t[1])
    if k == "tok":
        return node("Tok", eg.atom(t[1]), ())
    if k == "eps":
        return node("Eps", None, ())
    if k in ("seq", "alt"):
        items = [i for i in t[1] if not (k == "seq" and i == ("eps",))]
        if not items:
            return node("Eps", None, ())
        if len(items) == 1:
            return _written(items[0], eg, of_class, node)
        return node("Seq" if k == "seq" else "Alt", None, tuple(_written(i, eg, of_class, node) for i in items))
    if k == "rep":
        return node("Rep", (t[2], t[3]), (_written(t[1], eg, of_class, node),))
    raise ValueError(t)


def as_node(t: Term) -> ENode | None:
    """The e-node a term is, when all its children are existing classes (for the
    already-present check); None otherwise."""
    k = t[0]
    if k in ("seq", "alt"):
        items = t[1]
        if len(items) >= 2 and all(i[0] == "c" for i in items):
            return ENode("Seq" if k == "seq" else "Alt", None, tuple(i[1] for i in items))
    if k == "rep" and t[1][0] == "c":
        return ENode("Rep", (t[2], t[3]), (t[1][1],))
    if k == "eps":
        return ENode("Eps", None)
    return None
