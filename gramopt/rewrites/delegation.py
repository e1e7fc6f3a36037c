"""Delegation elimination: rules equal up to renaming, found by partition refinement.

Pass-through rules ``X ::= Y`` need no rewrite: lowering unions ``(R "X")`` with its body
``(R "Y")``, so X and Y are one e-class, and structurally equal rules merge by congruence.
What congruence cannot see is equality through cycles:

    A ::= "x" A | "y"    B ::= "x" B | "y"     (A = B, but neither term contains the other)

``delegation-bisim`` computes the coarsest partition of e-classes stable under "same set of
e-nodes up to blocks" (rule names ignored) by Hopcroft-style refinement (``partition``),
and proposes the classes of each block as equal.

Argument. Let E be the system "c = ∪ of c's e-nodes"; the languages L of the input's least
fixpoint form the least fixpoint of E (E contains the input's own equations, and L is a
fixpoint of E because every node denotes its class). Let Q be the quotient system over
blocks, B = ∪ of the (common) node set of B's classes. (1) Giving each class its block's
language in lfp(Q) is a fixpoint of E, so L(c) ⊆ lfp(Q)(B). (2) M(B) = ∩_{c∈B} L(c) is a
pre-fixpoint of Q: each node of B, applied to M, is below the matching node of every c ∈ B
applied to L, hence below L(c). So lfp(Q)(B) ⊆ M(B) ⊆ L(c). All classes of a block denote
the same language.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from ..egraph.lower import ENode
from ..egraph.rewrite import Context, Rewrite


def partition(ctx: Context) -> dict[int, int]:
    """Block id of every class of the snapshot (``coarsest_partition``)."""
    return coarsest_partition(ctx.snap.classes)


def coarsest_partition(classes: Mapping[int, Sequence[ENode]]) -> dict[int, int]:
    """Block id of every class: the coarsest partition in which the classes of a block have
    the same signature (``signature``: their non-R e-nodes with children read as blocks).
    Blocks are numbered in the order of their first class in ``classes``.

    Hopcroft-style refinement. Invariant between rounds: ``sig[c]`` is c's signature under
    the current partition for every class not in ``dirty``, and every class of a block b
    that is not dirty has the signature ``common[b]``. A round recomputes the signatures
    of the dirty classes (all under the same partition), then splits each block they lie
    in by signature: the classes whose signature differs from ``common[b]`` leave in one
    part per signature. The largest part (the rest of b counts as one) keeps the id b;
    the classes of every other part get a new id, and the classes with an e-node whose
    child got a new id are the next round's dirty ones — no other signature can change,
    as no other child changed id. It stops when no class is dirty: then every block is
    stable, and every split was forced (classes with different signatures under a
    partition coarser than a stable one differ under the stable one too), so the result
    is the coarsest stable partition — the one naive refinement (every signature, every
    round) reaches.

    Cost. A class that gets a new id lands in a part at most half its old block's size
    (not the largest), so it changes id at most log2 n times; a signature is recomputed
    only for a class with a child that changed id in the round before. The work is
    O(n + log n · Σ_c |sig(c)| · fan-in(c)) instead of naive refinement's
    O(rounds · Σ_c |sig(c)|), where a chain of n classes takes n rounds.
    """
    users = _users(classes)
    block = dict.fromkeys(classes, 0)
    members: dict[int, dict[int, None]] = {0: dict.fromkeys(classes)}
    common: dict[int, object] = {0: None}  # no class has signature None: round 1 splits all of block 0
    dirty: dict[int, None] = dict.fromkeys(classes)
    while dirty:
        sig = {c: signature(classes[c], block) for c in dirty}
        moved: list[int] = []
        for b, changed in _by_block(dirty, block).items():
            moved += _split(b, changed, sig, members, common, block)
        dirty = dict.fromkeys(u for c in moved for u in users[c])
    first: dict[int, int] = {}
    return {c: first.setdefault(block[c], len(first)) for c in classes}


def signature(nodes: Sequence[ENode], block: Mapping[int, int]) -> frozenset:
    """A class's e-nodes up to blocks: kind, data and the children's blocks of each non-R
    node (rule names ignored), as a set."""
    return frozenset((n.kind, n.data, tuple(block[ch] for ch in n.children))
                     for n in nodes if n.kind != "R")


def _users(classes: Mapping[int, Sequence[ENode]]) -> dict[int, list[int]]:
    """For each class, the classes with a non-R e-node that has it as a child."""
    out: dict[int, list[int]] = {c: [] for c in classes}
    for c, nodes in classes.items():
        for ch in dict.fromkeys(ch for n in nodes if n.kind != "R" for ch in n.children):
            out[ch].append(c)
    return out


def _by_block(dirty: dict[int, None], block: dict[int, int]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for c in dirty:
        out.setdefault(block[c], []).append(c)
    return out


def _split(b: int, changed: list[int], sig: dict[int, frozenset], members: dict[int, dict[int, None]],
           common: dict[int, object], block: dict[int, int]) -> list[int]:
    """Split block b by the new signatures of its ``changed`` classes (``coarsest_partition``);
    the classes given a new id."""
    leaving: dict[frozenset, dict[int, None]] = {}
    for c in changed:
        if sig[c] != common[b]:
            leaving.setdefault(sig[c], {})[c] = None
    if not leaving:
        return []
    rest = members[b]
    for part in leaving.values():
        for c in part:
            del rest[c]
    parts = [(common[b], rest), *leaving.items()]
    keep = max(range(len(parts)), key=lambda i: len(parts[i][1]))
    moved: list[int] = []
    for i, (s, part) in enumerate(parts):
        if i == keep:
            members[b], common[b] = part, s
        elif part:
            nb = len(members)
            members[nb], common[nb] = part, s
            for c in part:
                block[c] = nb
            moved += part
    return moved


def _bisim(ctx: Context):
    blocks: dict[int, list[int]] = {}
    for c, b in partition(ctx).items():
        blocks.setdefault(b, []).append(c)
    for members in blocks.values():
        if len(members) > 1:
            members.sort(key=lambda c: (c not in ctx.snap.names, c))
            for other in members[1:]:
                yield members[0], ("c", other)


RULES = [
    Rewrite("delegation-bisim", "delegation", __doc__.split("\n\n")[3].strip(), search=_bisim),
]
