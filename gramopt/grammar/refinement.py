"""The coarsest stable partition by signature refinement, Hopcroft-style.

    coarsest_partition(items, uses, signature, initial=None) -> {item: block}

``signature(x, block)`` describes item x through the blocks of the items it uses
(``uses[x]``); the result is the coarsest partition, refining ``initial`` (one block when
None), in which the items of a block have equal signatures. Two homes use it: the e-graph's
bisimulation (``rewrites.delegation``) and the clean-up's equal rules
(``transforms.cleanup.equivalent_rules``). Naive refinement (every signature, every round
until no block splits) reaches the same partition, but a chain of n items takes n rounds of
n signatures.

Invariant between rounds: ``sig[x]`` is x's signature under the current partition for
every item not in ``dirty``, and every item of a block b that is not dirty has the
signature ``common[b]``. A round recomputes the signatures of the dirty items (all under
the same partition), then splits each block they lie in: the items whose signature differs
from ``common[b]`` leave, one part per signature. The largest part (the rest of b counts as
one) keeps the id b; the items of every other part get a new id, and the users of those
items are the next round's dirty ones — no other signature can change, as no other used
item changed id. It stops when no item is dirty: then every block is stable. Every split
was forced (items with different signatures under a partition coarser than a stable one
differ under the stable one too), so the result is the coarsest stable partition, the one
naive refinement reaches.

Cost. An item that gets a new id lands in a part at most half its old block's size (not
the largest), so it changes id at most log2 n times; a signature is recomputed only for an
item one of whose used items changed id in the round before. The work is
O(n + log n · Σ_x |sig(x)| · |users(x)|).
"""

from __future__ import annotations

from typing import Callable, Hashable, Iterable, Mapping, Sequence, TypeVar

K = TypeVar("K", bound=Hashable)

_UNSEEN = object()  # no item's signature: the first round moves every item out of it


def coarsest_partition(items: Sequence[K], uses: Mapping[K, Iterable[K]],
                       signature: Callable[[K, Mapping[K, int]], Hashable],
                       initial: Mapping[K, int] | None = None) -> dict[K, int]:
    """Block of every item (module docstring), blocks numbered in the order of their first
    item in ``items``. ``uses[x]``: the items whose blocks ``signature(x, ·)`` reads (all
    in ``items``); ``initial``: a block number per item to refine (default: all one)."""
    users: dict[K, list[K]] = {x: [] for x in items}
    for x in items:
        for y in dict.fromkeys(uses[x]):
            users[y].append(x)
    block: dict[K, int] = {x: 0 for x in items} if initial is None else {x: initial[x] for x in items}
    members: dict[int, dict[K, None]] = {}
    for x in items:
        members.setdefault(block[x], {})[x] = None
    common: dict[int, object] = dict.fromkeys(members, _UNSEEN)
    fresh = max(members, default=-1) + 1
    dirty: dict[K, None] = dict.fromkeys(items)
    while dirty:
        sig = {x: signature(x, block) for x in dirty}
        moved: list[K] = []
        for b, changed in _by_block(dirty, block).items():
            for part in _split(b, changed, sig, members, common):
                members[fresh], common[fresh] = part
                for x in part[0]:
                    block[x] = fresh
                moved += part[0]
                fresh += 1
        dirty = dict.fromkeys(u for x in moved for u in users[x])
    first: dict[int, int] = {}
    return {x: first.setdefault(block[x], len(first)) for x in items}


def _by_block(dirty: dict, block: dict) -> dict[int, list]:
    out: dict[int, list] = {}
    for x in dirty:
        out.setdefault(block[x], []).append(x)
    return out


def _split(b: int, changed: list, sig: dict, members: dict[int, dict], common: dict[int, object]) -> list:
    """Split block b by the new signatures of its ``changed`` items: b keeps its largest
    part; the others, as (items, signature), to be given new ids."""
    leaving: dict[Hashable, dict] = {}
    for x in changed:
        if sig[x] != common[b]:
            leaving.setdefault(sig[x], {})[x] = None
    if not leaving:
        return []
    rest = members[b]
    for part in leaving.values():
        for x in part:
            del rest[x]
    parts = [(rest, common[b]), *((part, s) for s, part in leaving.items())]
    keep = max(range(len(parts)), key=lambda i: len(parts[i][0]))
    members[b], common[b] = parts[keep]
    return [p for i, p in enumerate(parts) if i != keep and p[0]]
