"""Random derivations: sentences derived from one grammar, checked in the other.

    derivation_check(a, b, bounds) -> (Counterexample | None, stats)
    random_sentence(g, rng, max_depth, heights) -> tuple[int, ...]
    derived_texts(grammar, n, seed=0) -> list[str]   sentences as text (a decoding check's)

A sentence is derived top-down from ``S'``: below ``max_depth`` each production is
chosen uniformly; from there on (or once the sentence is long) only productions of
least height are taken, which strictly lowers the height of what is left to expand, so
every derivation terminates. Each terminal yields a random symbol of its set, the
set's ends being favoured (off-by-one bugs in classes live there). Deep and long
sentences reach parts of a grammar that bounded enumeration never gets to.

Soundness. A derived sentence is in its grammar by construction (the compiled grammar
is language-equal to the source: ``symbols``); if the other recognizer rejects it, the
difference is real. It is one-sided evidence: finding nothing proves nothing beyond the
sentences tried, which ``stats`` counts.
"""

from __future__ import annotations

import random
import time

from .reference import Recognizer
from .result import Bounds, Counterexample
from .symbols import Compiled

METHOD = "random derivations"
MAX_SYMBOLS = 256  # past this many symbols a derivation only takes shortest completions


def heights(g: Compiled) -> tuple[list[int], list[int], list[list[int]]]:
    """(height of each nonterminal, height of each production, each terminal's symbols
    sorted): heights are least depths of derivation trees, a least fixpoint over the
    (productive) grammar, h(A) = min over A's productions of 1 + max h(B) over the
    nonterminals B on it. Computed as Knuth's generalization of Dijkstra's algorithm:
    nonterminals are settled in increasing height, a production's height is known once its
    last nonterminal is settled (that one has the largest height), so the cost is linear
    in the grammar (plus a heap), not in its size times its depth."""
    import heapq
    inf = 1 << 30
    n = len(g.names)
    h = [inf] * n
    ph = [inf] * len(g.rhs)
    missing = []
    waiting: list[list[int]] = [[] for _ in range(n)]
    heap: list[tuple[int, int]] = []
    for p, r in enumerate(g.rhs):
        nts = [s for s in r if s >= 0]
        missing.append(len(nts))
        for s in nts:
            waiting[s].append(p)
        if not nts:
            ph[p] = 1
            heap.append((1, g.lhs[p]))
    heapq.heapify(heap)
    while heap:
        d, a = heapq.heappop(heap)
        if h[a] != inf:
            continue
        h[a] = d
        for p in waiting[a]:
            missing[p] -= 1
            if missing[p] == 0:
                ph[p] = d + 1
                heapq.heappush(heap, (d + 1, g.lhs[p]))
    return h, ph, [sorted(t) for t in g.terms]


def random_sentence(g: Compiled, rng: random.Random, max_depth: int, hts) -> tuple[int, ...]:
    """One sentence of ``g`` (which must be non-empty), derived leftmost without recursion."""
    h, ph, terms = hts
    out: list[int] = []
    stack: list[tuple[int, int]] = [(0, 0)]  # (symbol, depth), top is the next to expand
    while stack:
        s, depth = stack.pop()
        if s < 0:
            out.append(_pick(terms[~s], rng))
            continue
        prods = g.by_lhs[s]
        if depth >= max_depth or len(out) + len(stack) > MAX_SYMBOLS:
            prods = [p for p in prods if ph[p] == h[s]]
        p = rng.choice(prods)
        stack.extend((x, depth + 1) for x in reversed(g.rhs[p]))
    return tuple(out)


def derived_texts(grammar, n: int, seed: int = 0, max_depth: int = 24) -> list[str]:
    """Up to ``n`` distinct sentences of a byte grammar derived at random (seeded), as text:
    sentences that are not UTF-8 are skipped, as is a Lark grammar (its sentences are
    tokens, not text). Spelled by ``verify --decode``, they make long, varied trajectories."""
    from .symbols import compile_grammar
    g = compile_grammar(grammar)
    if g.atoms is not None or g.empty:
        return []
    rng, hts, out = random.Random(seed), heights(g), {}
    for _ in range(4 * n):
        if len(out) >= n:
            break
        try:
            out.setdefault(bytes(random_sentence(g, rng, max_depth, hts)).decode("utf-8"), None)
        except UnicodeDecodeError:
            continue
    return [t for t in out if t]


def _pick(xs: list[int], rng: random.Random) -> int:
    u = rng.random()
    return xs[0] if u < 0.15 else xs[-1] if u < 0.3 else rng.choice(xs)


def derivation_check(a: Recognizer, b: Recognizer, bounds: Bounds = Bounds()):
    """Sentences of ``a`` (original) checked in ``b`` (candidate) and the other way,
    alternating, ``bounds.derivations`` each."""
    t0 = time.perf_counter()
    deadline = bounds.deadline(t0)
    rng = random.Random(bounds.seed)
    stats = {"sentences": [0, 0], "max_len": 0, "exact": False, "bound_met": False,
             "safety_limit": False}

    def done(cex=None):
        stats["seconds"] = round(time.perf_counter() - t0, 4)
        return cex, stats

    sides = [(side, src, dst, heights(src.g)) for side, (src, dst) in enumerate(((a, b), (b, a)))
             if not src.g.empty]
    for _ in range(bounds.derivations):
        for side, src, dst, hts in sides:
            if time.perf_counter() > deadline:
                stats["safety_limit"] = True
                return done()
            w = random_sentence(src.g, rng, bounds.max_depth, hts)
            stats["sentences"][side] += 1
            stats["max_len"] = max(stats["max_len"], len(w))
            if not dst.accepts(w):
                data = tuple(w) if a.atoms is not None else bytes(w)
                in_a = side == 0 or a.accepts(w)
                in_b = side == 1 or b.accepts(w)
                return done(Counterexample(data, "string", in_a, in_b, METHOD, a.atoms))
    stats["bound_met"] = True
    return done()
