"""The fixpoints every check and analysis runs first are worklists, linear in the grammar:
they compute what the plain while-changed loops (kept here as the reference) compute, and a
chain of rules written deepest-last no longer costs its size times its depth."""

from __future__ import annotations

import random

from gramopt.formats import parse
from gramopt.verify import derivations, symbols
from gramopt.verify.reference import Recognizer


def plain_prune(prods, n, terms):
    productive = [False] * n
    changed = True
    while changed:
        changed = False
        for a, r in prods:
            if not productive[a] and all(productive[s] if s >= 0 else bool(terms[~s]) for s in r):
                productive[a] = changed = True
    prods = [(a, r) for a, r in prods if all(productive[s] if s >= 0 else bool(terms[~s]) for s in r)]
    reach = [False] * n
    reach[0] = changed = True
    while changed:
        changed = False
        for a, r in prods:
            if reach[a]:
                for s in r:
                    if s >= 0 and not reach[s]:
                        reach[s] = changed = True
    return [(a, r) for a, r in prods if reach[a]]


def plain_nullable(prods, n):
    out = [False] * n
    changed = True
    while changed:
        changed = False
        for a, r in prods:
            if not out[a] and all(s >= 0 and out[s] for s in r):
                out[a] = changed = True
    return tuple(out)


def plain_heights(g):
    inf = 1 << 30
    h, ph = [inf] * len(g.names), [inf] * len(g.rhs)
    changed = True
    while changed:
        changed = False
        for p, r in enumerate(g.rhs):
            v = 1 + max((h[s] for s in r if s >= 0), default=0)
            ph[p] = min(ph[p], v)
            if v < h[g.lhs[p]]:
                h[g.lhs[p]] = v
                changed = True
    return h, ph


def random_productions(rng, n):
    """Productions over n nonterminals and two terminals (one of them empty: unproductive)."""
    terms = [frozenset([1]), frozenset()]
    prods = [(0, (1,))]
    for _ in range(rng.randrange(1, 3 * n)):
        prods.append((rng.randrange(n), tuple(rng.choice([-1, -1, -2] + list(range(n)))
                                              for _ in range(rng.randrange(4)))))
    return prods, terms


def test_prune_and_nullable_are_the_plain_fixpoints():
    rng = random.Random(7)
    for _ in range(3000):
        n = rng.randrange(2, 10)
        prods, terms = random_productions(rng, n)
        assert symbols._prune(prods, n, terms) == plain_prune(prods, n, terms), prods
        assert symbols._nullable(prods, n) == plain_nullable(prods, n), prods


def test_heights_are_the_plain_fixpoint():
    rng = random.Random(3)
    texts = ['root ::= a b | "x"\na ::= "a" a | b\nb ::= "b" | root root',
             'root ::= (x | y)* "z"\nx ::= "x"{2,5}\ny ::= x y | ""']
    for _ in range(200):
        k = rng.randrange(2, 7)
        rules = [f'r{i} ::= ' + " | ".join(
            " ".join(rng.choice([f"r{rng.randrange(k)}", '"a"', '"b"']) for _ in range(rng.randrange(1, 4)))
            for _ in range(rng.randrange(1, 4))) for i in range(k)]
        texts.append("\n".join(rules).replace("r0 ::=", "root ::=", 1).replace("r0", "root") + ' | "e"')
    for text in texts:
        g = Recognizer(parse(text, "gbnf")).g
        assert derivations.heights(g)[:2] == plain_heights(g), text


def test_a_chain_written_deepest_last_compiles_in_linear_steps():
    """A 3,000-rule chain whose rules come in reverse order: the plain loops would take 3,000
    passes over 3,000 rules (9·10⁶ steps); compiling it now is a few passes."""
    n = 3000
    text = "\n".join(f'r{i} ::= "a" r{i + 1} | "b" r{i + 1}' for i in reversed(range(n))) + f'\nr{n} ::= "c"\n'
    g = symbols.compile_grammar(parse(text.replace("r0 ", "root ", 1), "gbnf", start="root"))
    assert len(g.rhs) == 2 * n + 2
    assert derivations.heights(g)[0][0] == n + 2


def plain_rule_fixpoint(grammar, holds):
    out = set()
    changed = True
    while changed:
        changed = False
        for r in grammar.rules:
            if r.name not in out and holds(r.body, out):
                out.add(r.name)
                changed = True
    return out


def test_nullable_and_productive_rules_are_the_plain_fixpoints():
    from gramopt.grammar import analysis
    rng = random.Random(1)
    pieces = ['"a"', '""', "R*", '(R | "b")+', '"c"?', "R", "R R", "R{2,3}"]
    for _ in range(1500):
        k = rng.randrange(2, 7)
        rules = [f"r{i} ::= " + " | ".join(
            " ".join(rng.choice(pieces).replace("R", f"r{rng.randrange(k)}") for _ in range(rng.randrange(1, 4)))
            for _ in range(rng.randrange(1, 4))) for i in range(k)]
        g = parse("\n".join(rules).replace("r0 ::=", "root ::=", 1).replace("r0", "root"), "gbnf")
        for holds in (analysis.nullable_expr, analysis.productive_expr):
            assert analysis._fixpoint(g, holds) == plain_rule_fixpoint(g, holds), rules


def test_a_chain_in_source_order_is_one_pass():
    """r0 needs r1, …, r(n-1) needs rn: the plain loop found one more rule per pass over all
    n rules; the Horn solver touches each node once."""
    from gramopt.grammar import analysis
    n = 3000
    text = "\n".join(f'r{i} ::= "a" r{i + 1} | r{i + 1} r{i + 1}' for i in range(n)) + f'\nr{n} ::= "c" | ""\n'
    g = parse(text.replace("r0 ", "root ", 1), "gbnf", start="root")
    assert len(analysis.productive_rules(g)) == n + 1
    assert len(analysis.nullable_rules(g)) == n + 1  # rn ⇒ ε, so each r(i) ⇒ r(i+1) r(i+1) ⇒* ε
