"""Random derivations: sentences derived from one grammar, checked in the other.

    derivation_check(a, b, bounds) -> (Counterexample | None, stats)
    random_sentence(g, rng, max_depth, heights) -> tuple[int, ...]
    covering_sentences(g, rng, heights, max_symbols) -> list[tuple[int, ...]]
                                                      every production in every context
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
GREEDY_PICKS = 64  # targets a covering sentence takes on its way, besides the one it aims at
COVER_SENTENCES = 256  # covering sentences at most, whatever their length
DISTANCES_EVERY = 8    # covering sentences between two computations of the steering distances


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


def routes(g: Compiled) -> list[tuple[int, int] | None]:
    """Per nonterminal B, the (production p, position i) through which a shortest derivation
    from ``S'`` first reaches B (``rhs[p][i] == B``; None for ``S'`` itself): a breadth-first
    search, so following the routes up from B gives a path of fewest expansions."""
    route: list[tuple[int, int] | None] = [None] * len(g.names)
    seen = [False] * len(g.names)
    seen[0] = True
    queue = [0]
    for a in queue:
        for p in g.by_lhs[a]:
            for i, s in enumerate(g.rhs[p]):
                if s >= 0 and not seen[s]:
                    seen[s] = True
                    route[s] = (p, i)
                    queue.append(s)
    return route


def covering_sentences(g: Compiled, rng: random.Random, hts, max_symbols: int,
                       greedy_picks: int = GREEDY_PICKS, max_sentences: int = COVER_SENTENCES) -> list[tuple[int, ...]]:
    """Sentences of ``g`` (non-empty) that together take every production in every context,
    until ``max_symbols`` terminal symbols (over all sentences) or ``max_sentences`` are spent
    (work budgets; the steering distances are computed again every ``DISTANCES_EVERY``
    sentences, one pass over the grammar each).

    A *target* is (p, i, q): the nonterminal B at position i of production p expanded with
    production q of B; covering them all takes every alternative of every rule where it is
    written, and every optional and repetition both empty and not, at each place (a
    repetition of whitespace after one ``[`` and not after another: which rule the lexer is
    in differs). Each sentence aims at the first target not yet taken (targets in production
    order): the route of fewest expansions from ``S'`` to p (``routes``) is forced, then p's
    position i takes q. Every other expansion, up to ``greedy_picks`` per sentence, takes a
    target not yet taken in its context (the one of least height), or else steers towards the
    nearest production with one (``_distances``: a chain of such steps strictly lowers the
    distance, and a chain starts only below a new target); then a production of least height
    (a seeded choice among them). So it terminates: greedy choices are bounded, and
    least-height choices lower the height (``random_sentence``).
    Deterministic for a seeded ``rng``; one-sided like every derivation (a sentence is in the
    language by construction)."""
    h, ph, terms = hts
    route = routes(g)
    covered: set[tuple[int, int, int]] = set()
    targets = ((p, i, q) for p in range(len(g.rhs)) for i, s in enumerate(g.rhs[p]) if s >= 0
               for q in g.by_lhs[s])
    left = [sum(len(g.by_lhs[s]) for s in r if s >= 0) for r in g.rhs]  # per production, targets not taken
    out_all: list[tuple[int, ...]] = []
    spent = 0
    users = _Users(g)
    for target in targets:
        if spent >= max_symbols or len(out_all) >= max_sentences:
            break
        if target in covered:
            continue
        p, i, q = target
        path = [(p, i)]  # (production, position) from S' down to p, then q
        a = g.lhs[p]
        while route[a] is not None:
            path.append(route[a])
            a = g.lhs[route[a][0]]
        path.reverse()
        forced = [pp for pp, _ in path] + [q]
        if len(out_all) % DISTANCES_EVERY == 0:
            dist, towards = _distances(g, left, users)
        out: list[int] = []
        greedy = 0
        # (symbol, context production, context position, index on the forced path or -1,
        # the distance below which it may steer)
        stack: list[tuple[int, int, int, int, int]] = [(0, -1, 0, 0, _FAR)]
        while stack:
            s, cp, ci, k, steer = stack.pop()
            if s < 0:
                out.append(_pick(terms[~s], rng))
                continue
            below = -1  # what its children may steer below: nothing, unless chosen otherwise
            if k >= 0:
                r, below = forced[k], _FAR
            else:
                open_ = [x for x in g.by_lhs[s] if (cp, ci, x) not in covered] if greedy < greedy_picks else []
                if open_:
                    r, below = min(open_, key=lambda x: (ph[x], x)), _FAR
                    greedy += 1
                elif greedy < greedy_picks and dist[s] < steer:
                    r, below = min(g.by_lhs[s], key=lambda x: (towards[x], ph[x], x)), dist[s]
                    greedy += 1
                else:
                    r = rng.choice([x for x in g.by_lhs[s] if ph[x] == h[s]])
            if (cp, ci, r) not in covered:
                covered.add((cp, ci, r))
                if cp >= 0:
                    left[cp] -= 1
            nxt = path[k][1] if 0 <= k < len(path) else -1
            stack.extend((x, r, j, k + 1 if j == nxt else -1, below)
                         for j, x in reversed(list(enumerate(g.rhs[r]))))
        out_all.append(tuple(out))
        spent += len(out)
    return out_all


_FAR = 1 << 30


class _Users:
    """Per nonterminal, the productions it appears on (each once, in production order), as
    flat arrays for ``_distances``' level-by-level search: the productions of nonterminal b
    are ``prod[start[b]:start[b + 1]]``; ``lhs[p]`` is production p's left-hand side."""

    def __init__(self, g: Compiled):
        import numpy as np
        pairs = sorted({(x, p) for p, r in enumerate(g.rhs) for x in r if x >= 0})
        owner = np.fromiter((x for x, _ in pairs), np.int64, len(pairs))
        self.prod = np.fromiter((p for _, p in pairs), np.int64, len(pairs))
        self.start = np.searchsorted(owner, np.arange(len(g.names) + 1))
        self.lhs = np.asarray(g.lhs, np.int64)
        self.nonterminals = len(g.names)


def _distances(g: Compiled, left: list[int], users: _Users) -> tuple[list[int], list[int]]:
    """(per nonterminal, per production) the fewest expansions to a production with a target
    not yet taken (``left[p] > 0``): 0 for such a production, else 1 + the least distance of
    the nonterminals on it (``_FAR``: none reachable). A breadth-first search backwards from
    those productions, one level at a time over flat arrays (``users``: ``_Users(g)``, made
    once per covering run): level d's nonterminals give every production they appear on the
    distance d + 1 at most, and those productions' unreached left-hand sides make level d + 1,
    which is what a first-in first-out search finds (every nonterminal is reached at its least
    level, and each reached one lowers every production it is on), in one pass over the
    grammar done by numpy (seconds of pure Python on a 70,000-symbol grammar, 32 times)."""
    import numpy as np
    open_ = np.asarray(left, np.int64) > 0
    towards = np.where(open_, 0, _FAR)
    dist = np.full(users.nonterminals, _FAR, np.int64)
    level = np.unique(users.lhs[open_])
    dist[level] = 0
    d = 0
    while level.size:
        lo, hi = users.start[level], users.start[level + 1]
        counts = hi - lo
        # the productions of every nonterminal of the level, one flat gather
        at = np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))
        prods = users.prod[at]
        np.minimum.at(towards, prods, d + 1)
        heads = users.lhs[prods]
        level = np.unique(heads[dist[heads] == _FAR])
        dist[level] = d + 1
        d += 1
    return dist.tolist(), towards.tolist()


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
            dst.trim()  # random sentences rarely meet a set again: the sets hold memory, not speed
    stats["bound_met"] = True
    return done()
