"""Delegation elimination: rules equal up to renaming, found by partition refinement.

Pass-through rules ``X ::= Y`` need no rewrite: lowering unions ``(R "X")`` with its body
``(R "Y")``, so X and Y are one e-class, and structurally equal rules merge by congruence.
What congruence cannot see is equality through cycles:

    A ::= "x" A | "y"    B ::= "x" B | "y"     (A = B, but neither term contains the other)

``delegation-bisim`` computes the coarsest partition of e-classes stable under "same set of
e-nodes up to blocks" (rule names ignored) by Hopcroft-style refinement (``partition``,
``grammar.refinement``), and proposes the classes of each block as equal.

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
from ..grammar.refinement import coarsest_partition as refine


def partition(ctx: Context) -> dict[int, int]:
    """Block id of every class of the snapshot (``coarsest_partition``)."""
    return coarsest_partition(ctx.snap.classes)


def coarsest_partition(classes: Mapping[int, Sequence[ENode]]) -> dict[int, int]:
    """Block id of every class: the coarsest partition in which the classes of a block have
    the same ``signature``, by Hopcroft-style refinement (``grammar.refinement``: a class's
    signature is recomputed only when a child's block splits; O(n log n) on a chain, where
    naive refinement takes n rounds). Blocks numbered in the order of their first class."""
    uses = {c: [ch for n in nodes if n.kind != "R" for ch in n.children] for c, nodes in classes.items()}
    return refine(list(classes), uses, lambda c, block: signature(classes[c], block))


def signature(nodes: Sequence[ENode], block: Mapping[int, int]) -> frozenset:
    """A class's e-nodes up to blocks: kind, data and the children's blocks of each non-R
    node (rule names ignored), as a set."""
    return frozenset((n.kind, n.data, tuple(block[ch] for ch in n.children))
                     for n in nodes if n.kind != "R")


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
