"""Bounded enumeration: every prefix up to a length, both recognizers in lockstep.

    enumerate_check(a, b, bounds) -> (Counterexample | None, stats)

Breadth-first over prefixes that are viable in both grammars. At each prefix it compares
acceptance and the *whole* set of viable next symbols (all 256 bytes, or all atoms); it
then extends the prefix by one representative of each class of symbols that every
terminal of both grammars treats alike (``symbols.symbol_classes``): two symbols of one
class lead both recognizers to the same states, so the representative stands for the
class exactly, not by sampling.

Soundness. A counterexample is a real difference: both verdicts come from the reference
recognizers. Breadth-first order makes it a shortest one. Coverage: when level L is
complete, every string of length ≤ L was compared for membership and every string of
length ≤ L + 1 for viability. A pair of states already met at a shallower level is not
expanded again — the states are hash-consed Earley sets whose futures are fully
determined by the pair, so its subtree was (or is being) explored with at least as much
depth. If the search runs out of new pairs the grammars are proved equivalent
(``exact: True``): every reachable pair of states was compared. Otherwise equality holds
only up to the reported bound.
"""

from __future__ import annotations

import time

from .reference import Recognizer
from .result import Bounds, Counterexample
from .symbols import symbol_classes

METHOD = "enumeration"


def enumerate_check(a: Recognizer, b: Recognizer, bounds: Bounds = Bounds()):
    """Compare ``a`` (original) and ``b`` (candidate) over a shared alphabet."""
    t0 = time.perf_counter()
    deadline = bounds.deadline(t0)
    _, members = symbol_classes(a.alphabet, (*a.g.terms, *b.g.terms))
    reps = tuple(m[0] for m in members)
    stats = {"classes": len(reps), "prefixes": 0, "complete_len": -1, "exact": False,
             "bound_met": False, "budget_spent": False, "safety_limit": False}

    def done(cex=None):
        stats["seconds"] = round(time.perf_counter() - t0, 4)
        stats["states"] = (a.states_built, b.states_built)
        return cex, stats

    sa, sb = a.initial(), b.initial()
    if sa.viable != sb.viable:  # one language is empty
        return done(Counterexample(_empty(a), "prefix", sa.viable, sb.viable, METHOD, a.atoms))
    if not sa.viable:
        stats.update(exact=True, bound_met=True, complete_len=bounds.max_len)
        return done()
    seen: set = set()
    level = [((), None, None, None)]  # (prefix, parent states, last symbol): advanced lazily
    depth = 0
    while level and depth <= bounds.max_prefix_len:
        nxt = []
        for prefix, pa, pb, x in level:
            if stats["prefixes"] >= bounds.max_prefixes:
                stats["budget_spent"] = True
                break
            if time.perf_counter() > deadline:
                stats["safety_limit"] = True
                break
            if pa is not None:
                sa, sb = a.advance(pa, x), b.advance(pb, x)
            if (sa, sb) in seen:
                continue
            seen.add((sa, sb))
            stats["prefixes"] += 1
            if sa.accepting != sb.accepting:
                return done(Counterexample(_data(a, prefix), "string", sa.accepting, sb.accepting,
                                           METHOD, a.atoms))
            na, nb = sa.next_symbols, sb.next_symbols
            if na != nb:
                y = min(na ^ nb)
                return done(Counterexample(_data(a, prefix + (y,)), "prefix", y in na, y in nb,
                                           METHOD, a.atoms))
            nxt.extend((prefix + (y,), sa, sb, y) for y in reps if y in na)
        if stats["budget_spent"] or stats["safety_limit"]:
            break
        stats["complete_len"] = depth
        depth += 1
        level = nxt
        if depth > bounds.max_len and stats["prefixes"] >= bounds.min_prefixes:
            break
    stats["exact"] = not level and not stats["budget_spent"] and not stats["safety_limit"]
    stats["bound_met"] = stats["exact"] or stats["complete_len"] >= bounds.max_len or \
        stats["prefixes"] >= bounds.min_prefixes
    return done()


def _data(r: Recognizer, symbols: tuple) -> bytes | tuple:
    return tuple(symbols) if r.atoms is not None else bytes(symbols)


def _empty(r: Recognizer) -> bytes | tuple:
    return () if r.atoms is not None else b""
