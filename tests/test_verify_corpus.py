"""check_equivalence over the corpus: a grammar against a fresh copy of itself passes
within the time budget, and a planted unsound rewrite — one alternative dropped, one
character removed from a class — is caught. Ground truth for "the plant changed the
language": a corpus sample of the grammar is no longer accepted."""

from __future__ import annotations

from corpus_location import CORPUS as _CORPUS_DIR

import os

import pytest

from gramopt.grammar import Alt, CharClass, Grammar, GrammarError, alt, transform
from gramopt.verify import Bounds, Recognizer, check_equivalence

CORPUS = str(_CORPUS_DIR)
QUICK = {"xgrammar__builtin_json.ebnf", "llamacpp__json.gbnf", "llamacpp__arithmetic.gbnf",
         "maskbench-xgrammar__BFCL_sql_72.ebnf", "maskbench-llamacpp__JME_54.gbnf",
         "transformers-cfg__PDDL_depot_typed.ebnf", "maskbench-xgrammar__Github_hard-o81117.ebnf"}


def _cases(quick: bool):
    out = []
    for folder in ("ebnf", "gbnf"):
        d = os.path.join(CORPUS, folder)
        if not os.path.isdir(d):
            continue
        for f in sorted(os.listdir(d)):
            if not f.endswith("." + folder) or (quick and f not in QUICK):
                continue
            stem = f.rsplit(".", 1)[0]
            samples = sorted(os.path.join(d, s) for s in os.listdir(d) if s.startswith(stem + ".sample"))
            if samples:
                out.append(pytest.param(os.path.join(d, f), samples, id=f))
    return out


def _read(path):
    pytest.importorskip("gramopt.formats.ebnf", reason="GBNF/EBNF reader not landed yet")
    from gramopt.formats import read
    try:
        return read(path)
    except GrammarError as e:
        pytest.skip(f"reader: {e.message}")


def _samples(paths):
    out = []
    for p in paths:
        with open(p, "rb") as f:
            out.append(f.read())
    return out


def _plants(grammar: Grammar):
    """Candidate unsound rewrites, deterministic: each top-level alternative dropped, and
    each single-range class with more than one code point losing its last code point."""
    for r in grammar.rules:
        if isinstance(r.body, Alt):
            for i in range(len(r.body.items)):
                yield f"drop alternative {i} of {r.name}", grammar.with_bodies(
                    {r.name: alt(*(x for j, x in enumerate(r.body.items) if j != i))})
    for r in grammar.rules:
        seen = []

        def shrink(e):
            if isinstance(e, CharClass) and not e.negated and not seen and e.ranges[-1][1] > e.ranges[-1][0]:
                seen.append(e)
                lo, hi = e.ranges[-1]
                return CharClass(e.ranges[:-1] + ((lo, hi - 1),))
            return e
        body = transform(r.body, shrink)
        if seen:
            yield f"shrink a class in {r.name}", grammar.with_bodies({r.name: body})


def _planted(grammar, samples, limit=40):
    """The first plant that rejects a sample (so it surely changed the language)."""
    for n, (what, bad) in enumerate(_plants(grammar)):
        if n >= limit:
            break
        r = Recognizer(bad)
        if not all(r.accepts(s) for s in samples):
            return what, bad
    return None, None


def _check_case(path, sample_paths):
    grammar = _read(path)
    samples = _samples(sample_paths)
    r = check_equivalence(grammar, _read(path))
    assert r.ok, (path, r)
    # budgets in work units (no enumeration where the automata proved the two equal first)
    assert r.stats.get("enumeration", {"prefixes": 0})["prefixes"] <= Bounds().max_prefixes, r.stats
    what, bad = _planted(grammar, samples)
    if bad is None:
        pytest.skip("no plant rejected a sample")
    r = check_equivalence(grammar, bad, Bounds(max_prefixes=8000))
    assert not r.ok, (path, what, r.stats)


@pytest.mark.parametrize("path,samples", _cases(quick=True))
def test_corpus_planted_bugs_quick(path, samples):
    _check_case(path, samples)


@pytest.mark.slow
@pytest.mark.parametrize("path,samples", _cases(quick=False))
def test_corpus_planted_bugs_all(path, samples):
    _check_case(path, samples)


def test_lark_corpus_grammar_against_itself_and_a_plant():
    path = os.path.join(CORPUS, "lark", "outlines__json.lark")
    if not os.path.exists(path):
        pytest.skip("corpus missing")
    pytest.importorskip("gramopt.formats.lark", reason="Lark reader not landed yet")
    from gramopt.formats import read
    from gramopt.grammar import Literal
    grammar = read(path)
    assert check_equivalence(grammar, read(path)).ok
    body = grammar.rule("value").body
    keep = [x for x in body.items if x != Literal("true")]
    assert len(keep) == len(body.items) - 1
    r = check_equivalence(grammar, grammar.with_bodies({"value": alt(*keep)}))
    assert not r.ok and "'true'" in str(r.counterexample)
