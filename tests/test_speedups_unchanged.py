"""The optimizer's speed-ups change nothing it says or charges: coverage sentences read from
their memoized contexts (``coverage.Checker``) get ``accepts``'s verdicts with the same sets
built and the same work charged; ``run`` from a given set equals reading the whole input; the
sentences are the plain definition's; the recognizer's work and suffix numbering are the
ones measured before; the collector is paused while optimizing and checking and restored
after; ``release`` keeps a recognizer usable; ``equivalent_rules._unfold`` is ``transform``
with the readings."""

from __future__ import annotations

import gc
import random

from gramopt.formats import parse
from gramopt.grammar import GrammarError
from gramopt.verify import check_equivalence
from gramopt.collector import paused as collector_paused
from gramopt.verify.coverage import Checker, coverage_sentences, shortest
from gramopt.verify.reference import Recognizer
from gramopt.verify.result import WorkBudget

JSONISH = r'''
root ::= value
value ::= object | array | string | "true" | "null" | [0-9]+
object ::= "{" ws ( member ( "," ws member )* )? "}"
member ::= string ws ":" ws value ws
array ::= "[" ws ( value ( "," ws value )* )? "]"
string ::= "\"" ( [a-c] | "\\" ["nt] )* "\""
ws ::= [ ]?
'''


def _stream(seed: int, n: int = 400) -> list[tuple[int, ...]]:
    """Sentences sharing prefixes, with dead prefixes, out-of-alphabet symbols and repeats."""
    rng = random.Random(seed)
    base = [tuple(b'{"a":[1,2,{"b":"c"}]}'), tuple(b'[true,null,"ab\\n"]'), tuple(b'{}'), ()]
    out = []
    for _ in range(n):
        w = list(rng.choice(base + out[-3:] if out else base))
        for _ in range(rng.randrange(3)):
            k = rng.randrange(len(w) + 1)
            op = rng.randrange(4)
            if op == 0:
                w = w[:k]
            elif op == 1:
                w.insert(k, rng.choice(b'{}[],:"ab1tn\\ x'))
            elif op == 2 and w:
                w[min(k, len(w) - 1)] = rng.choice([300, -1, ord("z"), ord("1")])
            else:
                w = w[:k] + w[k:] * 2
        out.append(tuple(w))
    return out


def _mutants(text: str, seed: int, n: int = 12) -> list[str]:
    """``text`` with one character of a literal or class dropped or changed, ``n`` times."""
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        k = rng.randrange(len(text))
        if text[k] in 'abcnt019{}[],:':
            out.append(text[:k] + rng.choice(['', 'x', text[k] * 2]) + text[k + 1:])
    return out


def test_checker_gives_accepts_verdicts_states_and_work():
    """Reading each sentence from its context's memoized set gives ``accepts``'s verdict of
    the whole sentence, and builds the same sets and charges the same work."""
    src = Recognizer(parse(JSONISH, "gbnf")).g
    sh = shortest(src)
    for text in _mutants(JSONISH, 1):
        try:
            other = parse(text, "gbnf")
        except GrammarError:
            continue
        for pick in (min, max):
            plain, memo = Recognizer(other, budget=WorkBudget(None)), Recognizer(other, budget=WorkBudget(None))
            checker = Checker(src, sh, memo, pick)
            for p, w in enumerate(coverage_sentences(src, pick)):
                assert checker.accepts(p) == plain.accepts(w), (text, w)
                assert checker.sentence(p) == w
                assert memo.states_built == plain.states_built
                assert memo.budget.spent == plain.budget.spent


def test_checker_on_the_empty_language():
    src = Recognizer(parse(JSONISH, "gbnf")).g
    checker = Checker(src, shortest(src), Recognizer(parse('root ::= "a" root', "gbnf")), min)
    assert not any(checker.accepts(p) for p in range(len(src.rhs)))


def test_run_from_a_set_equals_reading_the_whole_input():
    r = Recognizer(parse(JSONISH, "gbnf"))
    for w in _stream(7, 60):
        for k in range(len(w) + 1):
            mid = r.run(w[:k])
            if mid is not None:
                assert r.run(w[k:], start=mid) is r.run(w)


def _users(g):
    users = [[] for _ in g.names]
    for p, r in enumerate(g.rhs):
        for s in dict.fromkeys(r):
            if s >= 0:
                users[s].append(p)
    return users


# The plain definition, as first written: yields and contexts as whole tuples.


def shortest_yields(g) -> list[tuple[int, ...] | None]:
    """A shortest string of each nonterminal, as terminal ids (None where there is none).

    A worklist fixpoint (a production is looked at again only when a nonterminal it
    names got a shorter string), so a chain of n rules costs O(n), not n passes."""
    best: list[tuple[int, ...] | None] = [None] * len(g.names)
    users = _users(g)
    todo = list(range(len(g.rhs)))
    queued = [True] * len(g.rhs)
    head = 0
    while head < len(todo):
        p = todo[head]
        head += 1
        queued[p] = False
        parts = [best[s] if s >= 0 else (~s,) for s in g.rhs[p]]
        if any(x is None for x in parts):
            continue
        w = tuple(x for part in parts for x in part)
        a = g.lhs[p]
        if best[a] is None or len(w) < len(best[a]):
            best[a] = w
            for q in users[a]:
                if not queued[q]:
                    queued[q] = True
                    todo.append(q)
    return best


def shortest_contexts(g, best) -> list[tuple[tuple[int, ...], tuple[int, ...]] | None]:
    """For each nonterminal A, a pair (u, v) of terminal-id strings with S' ⇒* u A v and
    |u| + |v| least (a worklist over the productions of nonterminals whose context got
    shorter)."""

    def yield_of(syms) -> tuple[int, ...]:
        return tuple(x for s in syms for x in (best[s] if s >= 0 else (~s,)))

    ctx: list = [None] * len(g.names)
    ctx[0] = ((), ())
    todo = [0]
    queued = [False] * len(g.names)
    queued[0] = True
    head = 0
    while head < len(todo):
        a = todo[head]
        head += 1
        queued[a] = False
        outer = ctx[a]
        for p in g.by_lhs[a]:
            r = g.rhs[p]
            for i, s in enumerate(r):
                if s < 0:
                    continue
                u, v = outer[0] + yield_of(r[:i]), yield_of(r[i + 1:]) + outer[1]
                if ctx[s] is None or len(u) + len(v) < len(ctx[s][0]) + len(ctx[s][1]):
                    ctx[s] = (u, v)
                    if not queued[s]:
                        queued[s] = True
                        todo.append(s)
    return ctx


def _plain_sentences(g, pick):
    best = shortest_yields(g)
    ctx = shortest_contexts(g, best)
    spell = [pick(t) if t else -1 for t in g.terms]
    for p, rhs in enumerate(g.rhs):
        u, v = ctx[g.lhs[p]]
        w = u + tuple(x for s in rhs for x in (best[s] if s >= 0 else (~s,))) + v
        yield tuple(spell[t] for t in w)


def test_coverage_sentences_are_the_definitions():
    cg = Recognizer(parse(JSONISH, "gbnf")).g
    for pick in (min, max):
        assert list(coverage_sentences(cg, pick)) == list(_plain_sentences(cg, pick))


def test_check_pauses_the_collector_and_restores_it():
    a = parse(JSONISH, "gbnf")
    b = parse(JSONISH.replace('"true" | "null"', '"null" | "true"'), "gbnf")
    seen = []
    with collector_paused():
        seen.append(gc.isenabled())
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:
        assert check_equivalence(a, b).ok
        assert not gc.isenabled()  # left off when it was off
    finally:
        gc.enable()
    res = check_equivalence(a, parse(JSONISH.replace('"null"', '"nul"'), "gbnf"))
    assert not res.ok and gc.isenabled()


def test_release_keeps_the_recognizer_usable():
    r = Recognizer(parse(JSONISH, "gbnf"))
    words = _stream(3, 80)
    before = [r.accepts(w) for w in words]
    built = r.states_built
    r.release()
    assert r.states_built == 1
    assert [r.accepts(w) for w in words] == before
    assert r.states_built == built


# (accepted, work charged, sets built) of 40 derived sentences, with and without Leo's
# collapse, measured before the recognizer's loop was tightened (64b827e): the work a
# budget is charged shapes output (a spent budget stops at the same step), so it must not move
WORK_FIGURES = {
    "ebnf/transformers-cfg__SMILES_acrylates.ebnf": [(40, 282368, 3377), (40, 284329, 3379)],
    "gbnf/llamacpp__json.gbnf": [(40, 5158, 382), (40, 5390, 383)],
    "lark/lark__python.lark": [(40, 21851, 238), (40, 21887, 238)],
}


def test_work_charged_and_sets_built_are_unchanged():
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parent))
    from corpus_location import CORPUS
    from gramopt.formats import read
    from gramopt.verify.derivations import heights, random_sentence
    for name, figures in WORK_FIGURES.items():
        path = CORPUS / name
        g = read(str(path), start="file_input" if name.endswith(".lark") else None)
        got = []
        for leo in (True, False):
            r = Recognizer(g, leo=leo, budget=WorkBudget(None))
            rng, h = random.Random(1), heights(r.g)
            accepted = sum(r.accepts(random_sentence(r.g, rng, 12, h)) for _ in range(40))
            got.append((accepted, r.budget.spent, r.states_built))
        assert got == figures, name


def test_optimize_pauses_the_collector_and_restores_it():
    from gramopt.passes import optimize
    seen = []
    g = parse('root ::= "a" x | "a" y\nx ::= "b"\ny ::= "c"\n', "gbnf")
    optimize(g, target="generic", callback=lambda name, out: seen.append(gc.isenabled()))
    assert seen and not any(seen)
    assert gc.isenabled()


def test_release_memory_collects_a_large_grammars_cycles_while_paused():
    import weakref
    from gramopt.collector import LARGE_RULES, release_memory

    class Node:
        pass

    with collector_paused():
        a = Node()
        a.me = a  # a cycle: reference counting never frees it
        alive = weakref.ref(a)
        del a
        release_memory(LARGE_RULES - 1)  # a small grammar: nothing done
        assert alive() is not None
        release_memory(LARGE_RULES)
        assert alive() is None
        assert not gc.isenabled()


def test_the_passes_garbage_is_released_before_the_engines_only_for_a_large_grammar(monkeypatch):
    """Above ``AHEAD_MAX_SIZE`` expanded symbols the saturation's garbage and free pages are
    given back before the judge (``collector.release_now``); a small grammar does not pay
    for a collection. Outputs are the same either way."""
    import gramopt.passes as P
    from gramopt.passes import optimize
    calls = []
    monkeypatch.setattr(P, "release_now", lambda: calls.append(1))
    small = parse('root ::= "a" x | "a" y\nx ::= "b"\ny ::= "c"\n', "gbnf")
    out_small = optimize(small, target="generic").grammar
    assert calls == []
    words = " | ".join(f'"w{i:04d}x"' for i in range(P.AHEAD_MAX_SIZE // 5))
    large = parse(f"root ::= item (\",\" item)*\nitem ::= {words}\n", "gbnf")
    assert P.grammar_size(large) > P.AHEAD_MAX_SIZE
    optimize(large, target="generic", verify=False)
    assert calls == [1]
    monkeypatch.undo()
    assert optimize(small, target="generic").grammar == out_small


class _SliceSuffixes:
    """The suffix numbering as first written (every suffix a tuple key): the reference."""

    def __init__(self):
        self.ids, self.lhs, self.head, self.rest, self.tag = {}, [], [], [], []

    def id(self, lhs, tail, tag=-1):
        k = self.ids.get((lhs, tail, tag))
        if k is not None:
            return k
        n, j = len(tail), 1
        while j <= n:
            k = self.ids.get((lhs, tail[j:], tag))
            if k is not None:
                break
            j += 1
        else:
            k, j = self._new(lhs, (), -1, tag), n
        for i in range(j - 1, -1, -1):
            k = self._new(lhs, tail[i:], k, tag)
        return k

    def _new(self, lhs, tail, rest, tag):
        k = self.ids[(lhs, tail, tag)] = len(self.lhs)
        self.lhs.append(lhs)
        self.head.append(tail[0] if tail else None)
        self.rest.append(rest)
        self.tag.append(tag)
        return k


def test_suffix_numbering_is_the_slice_numbering():
    from gramopt.verify.reference import Suffixes
    rng = random.Random(5)
    new, ref = Suffixes(), _SliceSuffixes()
    for _ in range(3000):
        lhs, tag = rng.randrange(4), rng.choice([-1, -1, 0, 1])
        tail = tuple(rng.choice([-1, -2, 0, 1, 2]) for _ in range(rng.choice([0, 1, 2, 3, 8, 40])))
        assert new.id(lhs, tail, tag) == ref.id(lhs, tail, tag)
    assert (new.lhs, new.head, new.rest, new.tag) == (ref.lhs, ref.head, ref.rest, ref.tag)


def test_unfold_is_transform_with_the_readings():
    """``equivalent_rules._unfold`` written out equals ``transform`` with the substitution,
    on non-canonical nodes too (a Seq holding a Seq or ε, a one-item Alt)."""
    from gramopt.grammar import Alt, Epsilon, Literal, Ref, Repeat, Seq, transform
    from gramopt.transforms.cleanup.equivalent_rules import _unfold
    closed = {"h": Repeat(Literal(" "), 0, None), "d": Seq((Literal("a"), Literal("b")))}

    def sub(e):
        return closed.get(e.name, e) if isinstance(e, Ref) else e

    cases = [
        Seq((Ref("x"), Ref("h"), Literal("c"))),
        Alt((Ref("d"), Seq((Ref("h"), Ref("d"))), Epsilon())),
        Seq((Seq((Literal("a"), Ref("d"))), Epsilon(), Ref("x"))),
        Alt((Alt((Ref("h"), Ref("y"))), Repeat(Ref("d"), 1, 3))),
        Seq((Epsilon(), Ref("d"))),
        Alt((Ref("x"),)),
        Repeat(Seq((Ref("y"), Ref("x"))), 0, 2),
    ]
    for e in cases:
        want = transform(e, sub)
        got = _unfold(e, closed)
        assert got == want and type(got) is type(want)
        assert (got is e) == (want is e)


def test_the_language_check_made_during_the_judge_is_the_final_ones():
    """``passes._VerifyAhead`` checks the first grammar the judge sends to the engines in a
    thread: for that grammar its result is the final check's (the same verdict and stats);
    for any other it gives None (the final check runs); the input itself starts nothing."""
    from gramopt.passes import _VerifyAhead
    from gramopt.verify import Bounds
    a = parse(JSONISH, "gbnf")
    b = parse(JSONISH.replace("ws ::= [ ]?", "ws ::= \" \"?"), "gbnf")
    wrong = parse(JSONISH.replace("[a-c]", "[a-d]"), "gbnf")
    ahead = _VerifyAhead(a, None)
    ahead.start(a)
    assert ahead.thread is None
    ahead.start(b)
    ahead.start(wrong)  # only the first is checked ahead
    got, plain = ahead.result(b), check_equivalence(a, b, Bounds(), incremental=True)
    def drop(st):  # the stats without their wall seconds
        return {k: drop(v) if isinstance(v, dict) else v for k, v in st.items() if k != "seconds"}
    assert got.ok and plain.ok and drop(got.stats) == drop(plain.stats)
    assert ahead.result(wrong) is None and ahead.result(a) is None
    bad = _VerifyAhead(a, None)
    bad.start(wrong)
    assert not bad.result(wrong).ok  # a difference is reported as the final check reports it
    repaired = parse(JSONISH.replace("ws ::= [ ]?", "ws ::= \"\" | \" \""), "gbnf")
    made = ahead.checked(repaired)  # a repair's check during the judge: kept for the final one
    assert made.ok and ahead.result(repaired) is made
    busy = _VerifyAhead(a, None, side_by_side=False)  # no spare core: nothing started ahead
    busy.start(b)
    assert busy.thread is None and busy.result(b) is None
    import gramopt.passes as passes
    small = passes.AHEAD_MAX_SIZE
    try:  # a grammar over the size checked ahead: checked after the engines, as before
        passes.AHEAD_MAX_SIZE = 1
        large = _VerifyAhead(a, None)
        large.start(b)
        assert large.thread is None and large.result(b) is None
    finally:
        passes.AHEAD_MAX_SIZE = small


def test_side_by_side_threads_only_with_a_spare_core(monkeypatch):
    """``cores.spare``: one process on two cores has one; two batch workers on two cores do not
    (the judge then makes the input's trace first, as before: the same paths either way)."""
    from gramopt import cores
    monkeypatch.setattr(cores, "cores", lambda: 2)
    monkeypatch.setattr(cores, "_workers", 1)
    assert cores.spare()
    cores.share(2)
    assert not cores.spare()
    monkeypatch.setattr(cores, "cores", lambda: 1)
    cores.share(1)
    assert not cores.spare()


def test_forget_all_empties_every_identity_memo_and_answers_stay_the_same():
    """``grammar.memo.forget_all`` (between batch items) empties every ``IdentityMemo``; a
    memo asked again computes the same value."""
    from gramopt.grammar.analysis import nullable_rules
    from gramopt.grammar.memo import IdentityMemo, forget_all
    g = parse('root ::= a "x"\na ::= "" | "y"\n', "gbnf")
    before = nullable_rules(g)
    mine = IdentityMemo(2)
    assert mine.get(g, lambda h: len(h.rules)) == 2
    forget_all()
    assert not mine.entries
    assert nullable_rules(g) == before


def test_forget_all_empties_kappas_body_cache_and_kappa_stays_the_same():
    """κ's cache of rule bodies (keyed by value: it kept every earlier batch item's bodies
    alive) is ``forgotten``: ``forget_all`` empties it, and κ computed again is the same."""
    import importlib
    from gramopt.costmodels import kappa
    from gramopt.grammar.memo import forget_all
    cache = importlib.import_module("gramopt.costmodels.kappa")._body_kappa
    g = parse('root ::= a "x" | a a\na ::= "" | "y"+\n', "gbnf")
    k = kappa(g)
    assert cache.cache_info().currsize > 0
    forget_all()
    assert cache.cache_info().currsize == 0
    assert kappa(g) == k
