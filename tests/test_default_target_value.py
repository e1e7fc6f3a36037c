"""The default target does the optimizer's job again (issue 23): removing redundancy is never
rejected by its guard, and what the guard still rejects is what costs an engine."""

import pytest

from corpus_location import CORPUS

from gramopt.bench.obfuscate import obfuscate
from gramopt.formats import parse, read
from gramopt.passes import optimize
from gramopt.targets.guard import GUARD, without_redundancy
from gramopt.transforms.registry import remove_redundancy

# start => goal: what remove_redundancy takes away (delegation, duplicates, split literals,
# unreachable rules) and what it leaves (a left-recursive helper is not redundancy)
GOLDEN = [
    ('root ::= a "," b\na ::= a1\na1 ::= "x" c\nb ::= "x" c2\nc ::= [0-9]\nc2 ::= [0-9]\nu ::= "never"\n',
     'root ::= a1 "," a1\na1 ::= "x" c\nc ::= [0-9]\n'),
    ('root ::= "ab" "c" | "d" "e"\n', 'root ::= "abc" | "de"\n'),
    ('root ::= h "x"\nh ::= h "a" | ""\n', 'root ::= h "x"\nh ::= h "a" | ""\n'),
]


@pytest.mark.parametrize("start, goal", GOLDEN)
def test_remove_redundancy(start, goal):
    from gramopt.formats.ebnf import write_ebnf
    assert write_ebnf(remove_redundancy(parse(start, "gbnf"))) == goal


def test_split_literals_are_obfuscated_and_the_language_kept():
    g = parse('root ::= "hello" " " "world"\n', "gbnf")
    o = obfuscate(g, seed=3, p=1.0)
    assert any(len(x.items) > 3 for x in [o.rules[0].body] if hasattr(x, "items"))
    assert optimize(o, target="generic").report.verified == "ok"


@pytest.mark.parametrize("name", ["llamacpp__json.gbnf", "llamacpp__list.gbnf", "llamacpp__chess.gbnf",
                                  "maskbench-llamacpp__BFCL_java_73.gbnf"])
def test_redundancy_removed_is_never_rejected(name):
    path = CORPUS / "gbnf" / name
    if not path.exists():
        pytest.skip("corpus not found")
    o = obfuscate(read(str(path)), seed=1)
    assert GUARD.worse(o, without_redundancy(o)) is None


def test_a_right_recursive_rule_made_a_star_group_is_rejected():
    """xgrammar decides ``S ::= "\\"" | c S`` in its mask cache; the star group made of it is a
    helper rule ending inside nearly every token (issue 23: 87 µs → 246 ms p95)."""
    original = parse('root ::= "\\"" s\ns ::= "\\"" | [a-z] s | "\\\\" [nt] s\n', "gbnf")
    star = parse('root ::= "\\"" ([a-z] | "\\\\" [nt])* "\\""\n', "gbnf")
    why = GUARD.worse(original, star)
    assert why is not None and why.startswith("predicted slower than the input without its redundancy in xgrammar")


# default run: chess (5 rules, 12 obfuscated, ~1 s), arithmetic (6 rules, 19 obfuscated, ~7 s);
# json (7 rules, 33 obfuscated) costs ~47 CPU s in the judge's three engines and runs under -m slow
# with the rest
@pytest.mark.parametrize("name", ["llamacpp__chess.gbnf", "llamacpp__arithmetic.gbnf",
                                  *(pytest.param(n, marks=pytest.mark.slow) for n in
                                    ("llamacpp__json.gbnf", "llamacpp__json_arr.gbnf", "llamacpp__english.gbnf",
                                     "maskbench-llamacpp__BFCL_simple_196.gbnf", "../ebnf/xgrammar__builtin_json.ebnf"))])
def test_default_target_on_obfuscated_grammars(name):
    """Issue 23's floor, per grammar: no more rules than the clean original plus 2, language
    unchanged (benchmarks/obfuscated_rules.py runs the whole set). Arithmetic and the built-in
    JSON grammar pass since their star helpers stay parser items in llguidance
    (``Extractor._new_lexemes``): before, the judge kept 15 and 98 rules."""
    path = CORPUS / "gbnf" / name
    if not path.exists():
        pytest.skip("corpus not found")
    clean = read(str(path))
    r = optimize(obfuscate(clean, seed=1), verify=True)
    assert r.report.verified == "ok"
    assert len(r.grammar.rules) <= len(clean.rules) + 2
