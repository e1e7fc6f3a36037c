"""The default target (``portable``): safe in every engine, never slower than its input.

What it must give (issue 13): no left recursion (llama.cpp refuses it), no root that a rule
references (xgrammar 0.2.8's mask bug), xgrammar's masks of the output equal the input's
along the corpus samples, every target's output loads in its engine(s), and a candidate that
costs any engine more (``costmodels.engine_shapes``) gives way to a fallback, saying why.
Speed: ``benchmarks/safe_target_bench.py`` (no timing here).
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from cache_env import cache_at
from corpus_location import CORPUS

import gramopt
from gramopt import targets
from gramopt.costmodels.engine_shapes import CLEAR_GAIN, clearly_better_for, engine_costs, worse_for
from gramopt.formats import parse, read, write
from gramopt.grammar import GrammarError, Ref
from gramopt.grammar.analysis import structure
from gramopt.passes import optimize
from gramopt.targets.portable import fixup
from gramopt.verify import check_equivalence

HAVE_XGRAMMAR = importlib.util.find_spec("xgrammar") is not None
HAVE_LLG = importlib.util.find_spec("llguidance") is not None
HAVE_LLAMA = importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("gguf") is not None
GBNF = sorted(CORPUS.glob("gbnf/*.gbnf")) if CORPUS.is_dir() else []
WITH_SAMPLES = sorted(p for p in (GBNF + (sorted(CORPUS.glob("ebnf/*.ebnf")) if CORPUS.is_dir() else []))
                      if list(p.parent.glob(p.name[: -len(p.suffix)] + ".sample*.txt")))
# the default suite's share of the corpus tests (the rest: -m slow). llama.cpp's JSON grammar is
# in the rest: its default optimize judges it in three engines over Qwen's vocabulary (~50 CPU s)
# and its xgrammar masks along the samples cost ~15 more; the same claims run here on four other
# llama.cpp grammars and a maskbench one (its xgrammar-target output: test_target_xgrammar)
FAST_MASKS = ("llamacpp__arithmetic.gbnf", "llamacpp__list.gbnf", "llamacpp__c.gbnf",
              "llamacpp__chess.gbnf", "maskbench-xgrammar__Kubernetes-kb_412_Normalized.ebnf")
README_EXAMPLE = "examples/anbn_g2.ebnf"


def portable_output(path: str, optimized):
    """(input, default-target output) of a corpus file, or None when gramopt cannot read it;
    the output computed once per test run (conftest's ``optimized``), for both tests that ask."""
    try:
        g = read(path)
    except GrammarError:
        return None
    return g, optimized(path, verify=False).grammar


def _referenced_root(g) -> bool:
    from gramopt.grammar import refs
    return any(g.start in refs(r.body) for r in g.rules)


# ---------------------------------------------------------------- the record


def test_portable_is_the_default_and_generic_stays():
    assert targets.DEFAULT == "portable"
    assert {"portable", "generic"} <= set(targets.NAMES)
    t = targets.get("portable")
    assert not t.left_recursion and t.guard is not None and t.schema_converter == "xgrammar"


# ---------------------------------------------------------------- the fix-ups: start ⇒ goal


@pytest.mark.parametrize("src, goal", [
    # direct left recursion as a star
    ('root ::= x\nx ::= x "," v | v\nv ::= [0-9] | "(" x ")"', 'root ::= x\nx ::= v ("," v)*\nv ::= [0-9] | "(" x ")"'),
    ('root ::= x\nx ::= x "," [0-9] | [0-9]', 'root ::= x\nx ::= [0-9] ("," [0-9])*'),
    # a root that references itself delegates
    ('root ::= "a" root "b" | ""', 'root ::= root-rec\nroot-rec ::= "a" root-rec "b" | ""'),
    # a root referenced through another rule delegates too
    ('root ::= "[" v "]"\nv ::= root | "1"', 'root ::= root-rec\nroot-rec ::= "[" v "]"\nv ::= root-rec | "1"'),
    # a left-recursive root: first the star, then nothing references the root
    ('root ::= root "a" | "b"', 'root ::= "b" "a"*'),
    # a repetition of a leaf rule written flat, the wide class last (llama.cpp's converter's
    # JSON string): the leaf goes
    ('root ::= "{" s "}"\ns ::= "\\"" char* "\\""\nchar ::= [^"\\\\] | [\\\\] (["\\\\nt] | "u" [0-9a-f]{4})',
     'root ::= "{" s "}"\ns ::= "\\"" ([\\\\] ["\\\\nt] | [\\\\] "u" [0-9a-f]{4} | [^"\\\\])* "\\""'),
    # ... and stays where something else uses it
    ('root ::= s e\ns ::= "\\"" ([^"\\\\] | "\\\\" e)* "\\""\ne ::= [nt]',
     'root ::= s e\ns ::= "\\"" ("\\\\" [nt] | [^"\\\\])* "\\""\ne ::= [nt]'),
    # ... and in a rule that still uses another (llama.cpp's json.gbnf string before its `ws`)
    ('root ::= "{" s "}"\ns ::= "\\"" ([^"\\\\] | "\\\\" (["nt] | "u" [0-9a-f]{4}))* "\\"" ws\nws ::= " "?',
     'root ::= "{" s "}"\ns ::= "\\"" ("\\\\" ["nt] | "\\\\" "u" [0-9a-f]{4} | [^"\\\\])* "\\"" ws\nws ::= " "?'),
    # a string's minLength as the clean-ups merge it, c{3,}: written out, then flat (xgrammar took
    # 325 ms a mask inside c{8,}, 0.12 ms so); a class's count stays
    ('root ::= "{" s "}"\ns ::= "\\"" c{3,} "\\"" [0-9]{2,}\nc ::= [^"\\\\] | "\\\\" ["nt]',
     'root ::= "{" s "}"\ns ::= "\\"" ("\\\\" ["nt] | [^"\\\\]) ("\\\\" ["nt] | [^"\\\\]) ("\\\\" ["nt] | [^"\\\\]) '
     '("\\\\" ["nt] | [^"\\\\])* "\\"" [0-9]{2,}'),
    # a character rule written flat where a string's length is bounded (llama.cpp's converter's
    # maxLength), in a rule llguidance reads as one lexeme: the rule goes
    ('root ::= "{" s "}"\ns ::= "\\"" c (c c?)? "\\""\nc ::= [^"\\\\] | "\\\\" ["nt]',
     'root ::= "{" s "}"\ns ::= "\\"" ("\\\\" ["nt] | [^"\\\\]) (("\\\\" ["nt] | [^"\\\\]) ("\\\\" ["nt] | [^"\\\\])?)? "\\""'),
    # ... not in a rule llguidance reads as a parser rule (its lexemes would change)
    ('root ::= "{" s "}"\ns ::= "\\"" c (c c?)? "\\"" r\nr ::= "," s | ""\nc ::= [^"\\\\] | "\\\\" ["nt]',
     'root ::= "{" s "}"\ns ::= "\\"" c (c c?)? "\\"" r\nr ::= "," s | ""\nc ::= [^"\\\\] | "\\\\" ["nt]'),
])
def test_fixup_start_to_goal(src, goal):
    g = parse(src, "ebnf")
    out = fixup(g)
    assert out == parse(goal, "ebnf"), write(out)
    assert check_equivalence(g, out).ok
    assert fixup(out) == out  # idempotent


@pytest.mark.parametrize("src", ['root ::= item+\nitem ::= "- " [a-z]+ "\\n"', 'root ::= "a" b\nb ::= "b"*',
                                 # a body with a recursive rule, or one that is flat already
                                 'root ::= ("," v)*\nv ::= "[" v "]" | "x"', 'root ::= ([a-z] | "\\\\" [nt])*',
                                 # an empty alternative under the star: an ambiguity the input lacks
                                 'root ::= "x" s\ns ::= ("a" | e)*\ne ::= "b" | ""',
                                 # the start; narrow classes (xgrammar decides them well)
                                 'root ::= ([^"] | e)*\ne ::= "b"', 'root ::= s\ns ::= ("a" | e)* w\ne ::= "b"\nw ::= " " s | ""',
                                 # no iteration of one character: xgrammar decides the rule's own star
                                 # better (0.01 ms a mask, flat 0.28 ms)
                                 'root ::= "x" s\ns ::= item+\nitem ::= "- " [a-z]+ "\\n"'])
def test_fixup_leaves_safe_grammars_alone(src):
    g = parse(src, "ebnf")
    assert fixup(g) is g


# ---------------------------------------------------------------- the guard


def test_guard_counts_what_each_engine_pays_for():
    star = parse('root ::= "\\"" s\ns ::= ([a-z] | "\\\\" [nt])* "\\""', "ebnf")        # llguidance's form
    rec = parse('root ::= "\\"" s\ns ::= "\\"" | [a-z] s | "\\\\" [nt] s', "ebnf")      # xgrammar's form
    grew = {(e, k) for e, k, _, _ in worse_for(engine_costs(rec), engine_costs(star))}
    assert ("xgrammar", "star_groups") in grew and not any(e == "llguidance" for e, _ in grew)
    back = {(e, k) for e, k, _, _ in worse_for(engine_costs(star), engine_costs(rec))}
    assert ("llguidance", "recursions") in back
    assert worse_for(engine_costs(rec), engine_costs(rec)) == []


def test_guard_falls_back_and_says_why():
    # xgrammar's own string rule: the e-graph makes it a star (llguidance's form) with a
    # cost in κ that looks lower, but the star of a group costs xgrammar; the guard refuses
    # it, the passes without the e-graph change nothing, so the input is kept
    src = 'root ::= "\\"" s ws\ns ::= "\\"" | [a-z] s | "\\\\" [nt] s\nws ::= [ ]*'
    g = parse(src, "ebnf")
    r = optimize(g)
    guard = [p for p in r.report.passes if p.name == "guard"]
    # (the guard's reference is the input without its redundancy: here the input itself)
    assert guard and guard[0].notes[0].startswith("no-slower: predicted slower than the input without its "
                                                  "redundancy in xgrammar (xgrammar ")
    assert guard[0].notes[-1] == "kept the input with only the fix-ups"
    assert r.report.notes == [f"kept the input with only the fix-ups ({guard[0].notes[0]})"]
    assert r.grammar == g and r.report.verified == "ok"


def test_guard_keeps_a_delegate_inlined_where_predicted_faster():
    # inlining the delegate: one rule and one reference fewer, predicted faster in xgrammar
    # and slower in no engine (measured as noise, 0.88-1.03x: either form is within 20%)
    g = parse('root ::= s\ns ::= "01010" | "00100" | "01110" | "01111"', "ebnf")
    r = optimize(g)
    assert len(r.grammar.rules) == 1 and check_equivalence(g, r.grammar).ok
    guard = [p for p in r.report.passes if p.name == "guard"]
    assert guard and guard[0].notes[0].startswith("no-slower: predicted slower than its noise")
    # merging a class spread over three rules: the static shapes count it a third cheaper
    g = parse('root ::= c+\nc ::= letter | digit | punct\nletter ::= [A-Za-z]\ndigit ::= [0-9]\n'
              'punct ::= [!-/:-@[-`{-~]', "gbnf")
    out = parse('root ::= [!-~]+', "gbnf")
    gains = clearly_better_for(engine_costs(g), engine_costs(out))
    assert any(what == "cost model" and a <= CLEAR_GAIN * b for _, what, b, a in gains)


def test_guard_counts_the_stars_xgrammar_lowers_whatever_the_model_says():
    """A JSON string as a star of a reference (~66 ms an xgrammar mask inside the string, the
    right recursion 0.04 ms, flat 0.13 ms): more such stars is slower in xgrammar, fewer lets
    the model off there; ``("," v)*`` and a flat body are none."""
    from gramopt.costmodels.engine_shapes import lowered_stars
    from gramopt.targets.guard import PredictedGuard
    rec = parse('root ::= "{" s "}"\ns ::= "\\"" | [^"\\\\] s | "\\\\" e s\ne ::= [nt] | "u" [0-9]{4}', "ebnf")
    star = parse('root ::= "{" s "}"\ns ::= ([^"\\\\] | "\\\\" e)* "\\""\ne ::= [nt] | "u" [0-9]{4}', "ebnf")
    flat = parse('root ::= "{" s "}"\ns ::= ([^"\\\\] | "\\\\" [nt] | "\\\\u" [0-9]{4})* "\\""', "ebnf")
    assert lowered_stars(star) == ["s"] and lowered_stars(rec) == lowered_stars(flat) == []
    assert lowered_stars(parse('root ::= "[" v ("," v)* "]"\nv ::= [0-9]+ | root', "ebnf")) == []
    # a narrow class costs xgrammar little (digits: Qwen's one-digit tokens): not counted
    assert lowered_stars(parse('root ::= [1-9] d*\nd ::= [0-9] | "_" [0-9]', "ebnf")) == []
    guard = PredictedGuard()
    said = guard.worse(rec, star)
    assert said is not None and "xgrammar: more repetitions it lowers" in said
    back = guard.worse(star, flat) or ""
    assert "more repetitions" not in back and ("xgrammar " in back or not back)  # the model's figure



def test_guard_counts_counted_groups_as_xgrammar_lowers_them():
    """``c{8,}`` with ``c`` a group or a reference to one (325-362 ms an xgrammar mask inside a
    string, 0.12 ms written out) is counted; a class's count and a rule of one class are not
    (xgrammar's converter's ``chars{4,30}``); a candidate with more of them is slower in xgrammar."""
    from gramopt.costmodels.engine_shapes import lowered_repetitions
    from gramopt.targets.guard import PredictedGuard
    out = parse('root ::= "{" s "}"\ns ::= "\\"" c c c c* "\\""\nc ::= [^"\\\\] | "\\\\" ["nt]', "ebnf")
    merged = parse('root ::= "{" s "}"\ns ::= "\\"" c{3,} "\\""\nc ::= [^"\\\\] | "\\\\" ["nt]', "ebnf")
    group = parse('root ::= "{" s "}"\ns ::= "\\"" ([^"\\\\] | "\\\\" ["nt]){0,40} "\\""', "ebnf")
    cls = parse('root ::= "{" s "}"\ns ::= "\\"" c{4,30} [^"]{8,} "\\""\nc ::= [^"\\\\\\n\\r]', "ebnf")
    assert set(lowered_repetitions(merged)) == set(lowered_repetitions(group)) == {"s"} and lowered_repetitions(cls) == []
    said = PredictedGuard().worse(out, merged) or ""
    assert "xgrammar: more repetitions it lowers" in said


def test_one_character_judges_each_alternative_on_its_own():
    """``(c "b" | c)*`` may be one ``c``: the first alternative names c and fails on its "b",
    the second must still read c (a set of visited rules shared by the alternatives said no);
    through a chain of rules and a cycle alike, and a cycle alone derives nothing."""
    from gramopt.costmodels.engine_shapes import lowered_stars, one_character_rules
    assert lowered_stars(parse('root ::= "\\"" s\ns ::= (c "b" | c)* "\\""\nc ::= [^"]', "gbnf")) == ["s"]
    chain = parse('root ::= "x" s\ns ::= (a "z")*\na ::= b | "q"\nb ::= a "z" | c\nc ::= [^q]', "gbnf")
    assert one_character_rules(chain.bodies()) == {"a", "b", "c"}
    assert lowered_stars(chain) == []  # every iteration ends with "z": two characters at least
    loop = parse('root ::= "x" s\ns ::= (a | "q" "q")*\na ::= b\nb ::= a "z" | "q" a', "gbnf")
    assert one_character_rules(loop.bodies()) == set() and lowered_stars(loop) == []

def test_clearly_better_counts_the_decisive_shapes():
    amb = parse('root ::= e\ne ::= e "+" e | [0-9]', "gbnf")
    flat = parse('root ::= e\ne ::= [0-9] ("+" [0-9])*', "gbnf")
    gains = {(e, k) for e, k, _, _ in clearly_better_for(engine_costs(amb), engine_costs(flat))}
    assert ("llama.cpp", "left_recursions") in gains and ("xgrammar", "ambiguity") in gains
    assert clearly_better_for(engine_costs(flat), engine_costs(amb)) == []
    assert clearly_better_for(engine_costs(flat), engine_costs(flat)) == []


def test_gbnf_rule_names_llamacpp_reads():
    from gramopt.transforms.reshape import gbnf_rule_names
    from dataclasses import replace
    g = parse('root ::= a_b a-b x\na_b ::= "1" a_b | "2"\na-b ::= "3"\nx ::= "4"', "gbnf")
    g = g.replace_rules([replace(r, name="my_root") if r.name == "root" else r for r in g.rules], start="my_root")
    out, renamed = gbnf_rule_names(g)
    assert renamed == ["my_root", "a_b"]
    assert [r.name for r in out.rules] == ["my-root", "a-b2", "a-b", "x"]
    assert write(out, "gbnf").splitlines()[1:] == ['a-b2 ::= "1" a-b2 | "2"', 'a-b ::= "3"', 'x ::= "4"']
    assert out.start == "my-root" and check_equivalence(g, out).ok
    assert gbnf_rule_names(out) == (out, [])


ANY_CHAR_STRING = 'root ::= "{" str "}"\nstr ::= "\\"" ([^"\\\\] | "\\\\" .)* "\\""\n'  # llama.cpp's "any": .


def test_any_character_is_written_so_every_engine_reads_it():
    """GBNF's ``.`` (a hand-written string escape, held-out jade__tool_call): xgrammar's reader
    refuses it, llguidance refuses the ``[^]`` xgrammar EBNF prints; the default target's fix-up
    writes ``[^\\n] | "\\n"``, the same language, which the readers of all three take."""
    g = parse(ANY_CHAR_STRING, "gbnf")
    out = fixup(g)
    text = write(out, "gbnf")
    assert "." not in text.replace('"."', "") and "[^]" not in text, text
    assert check_equivalence(g, out).ok
    if HAVE_XGRAMMAR:
        import xgrammar as xgr
        with pytest.raises(Exception):
            xgr.Grammar.from_ebnf(write(g, "gbnf"))  # the input itself: "Rule "." is not defined"
        xgr.Grammar.from_ebnf(text)
    if importlib.util.find_spec("llguidance") is not None:
        import llguidance as llg
        from gramopt.engines.llguidance import _byte_tokenizer
        m = llg.LLMatcher(_byte_tokenizer(), llg.grammar_from("gbnf", text), log_level=0)
        assert not m.is_error(), m.get_error()


def test_any_character_in_a_pinned_rule_is_left_as_written():
    """A rule with xgrammar's assertion is the engine's own form (``Rule.pinned``): like every
    reshaping, the any-character spelling leaves it as written."""
    from gramopt.transforms.reshape import spell_any_char
    g = parse('root ::= s "x" [^]\ns ::= "\\\\" [^] (= "x")\n', "ebnf")
    out, changed = spell_any_char(g)
    assert changed == ["root"] and out.rule("s") == g.rule("s")


def test_guard_is_deterministic(optimized):
    """Two optimizes of one input give the same grammar: the first is the run's shared one
    (``optimized``, which the mask test of this file also asks for, computed by whichever
    test process asked first), the second this process's own."""
    path = CORPUS / "ebnf/maskbench-xgrammar__Kubernetes-kb_412_Normalized.ebnf"
    if not path.exists():
        pytest.skip("corpus not found")
    a, b = optimized(path, verify=False), optimize(read(str(path)), verify=False)
    assert a.grammar == b.grammar and write(a.grammar) == write(b.grammar)


# ---------------------------------------------------------------- the cases of issue 13


def test_readme_example_does_not_trip_the_xgrammar_root_bug():
    # G1's root is directly self-recursive: the output delegates to it
    out = optimize(read("examples/anbn_g1.ebnf")).grammar
    assert not _referenced_root(out)
    assert out.rule(out.start).body == Ref("root-rec")
    assert write(out).splitlines()[-2:] == ['root ::= root-rec', 'root-rec ::= "a" root-rec "b" | ""']
    # G2 (the README's) becomes G1 with the same delegate: no engine is predicted slower
    # (measured: 1.00x xgrammar, 0.99x llguidance, 0.99x llama.cpp at p95)
    r = optimize(read(README_EXAMPLE))
    assert not _referenced_root(r.grammar) and write(r.grammar).splitlines()[-2:] == write(out).splitlines()[-2:]
    assert not any(n.startswith("kept the input") for n in r.report.notes)


@pytest.mark.skipif(not HAVE_XGRAMMAR, reason="xgrammar not installed")
def test_readme_example_masks_in_xgrammar(qwen):
    """Along a^8: the default output's xgrammar masks allow ``bb`` (the bug: the directly
    self-recursive root's do not), as gramopt's exact runtime does."""
    from gramopt.engines.xgrammar import compile_grammar, matcher
    from gramopt.runtime import Matcher
    g = read(README_EXAMPLE)
    out = optimize(g).grammar
    enc = {b: i for i, b in enumerate(qwen.token_bytes)}
    m = matcher(compile_grammar(out, qwen))
    exact = Matcher(out, qwen)
    row = np.zeros(qwen.n_words, np.int32)
    ref = np.zeros((1, qwen.n_words), np.int32)
    for _ in range(8):
        assert m.accept(enc[b"a"]) and exact.accept_token(enc[b"a"])
    m.fill(row)
    exact.fill_next_token_bitmask(ref, 0)
    assert np.array_equal(row, ref[0])
    bb = enc[b"bb"]
    assert (row[bb >> 5] >> (bb & 31)) & 1


def test_obfuscated_list_comes_back_as_item_plus():
    from gramopt.bench.suites import file_case, obfuscated_case
    path = CORPUS / "gbnf/llamacpp__list.gbnf"
    if not path.exists():
        pytest.skip("corpus not found")
    obf = parse(obfuscated_case(file_case(str(path))).text, "gbnf")
    out = optimize(obf).grammar
    assert len(out.rules) == 2, write(out)
    assert write(out).startswith("root ::= item+\n")
    assert not _referenced_root(out) and not structure(out).left_recursive


# ---------------------------------------------------------------- over the corpus


@pytest.mark.skipif(not GBNF, reason="corpus not found")
@pytest.mark.parametrize("path", [p if p.name in FAST_MASKS else pytest.param(p, marks=pytest.mark.slow)
                                  for p in GBNF], ids=lambda p: p.name)
def test_corpus_gbnf_output_has_no_left_recursion_and_loads_in_llamacpp(path, tmp_path_factory, optimized):
    """(The default suite takes FAST_MASKS: each output is judged in three engines now.)"""
    got = portable_output(str(path), optimized)
    if got is None:
        pytest.skip("gramopt cannot read it")
    g, out = got
    assert not structure(out).left_recursive
    assert not _referenced_root(out)
    if HAVE_LLAMA:
        _llama_compiles(write(out, "gbnf"), tmp_path_factory)  # raises when refused


_VOCAB = []


def _llama_compiles(text: str, tmp_path_factory) -> None:
    """llama.cpp's engine compiles ``text`` (GBNF) over a 256-byte vocabulary, or raises; the
    vocabulary's GGUF goes to a temporary cache, made once per process (``cache_at``: the
    process's own cache is left as it was)."""
    from gramopt.engines.llamacpp import LlamaGrammar
    if not _VOCAB:
        from gramopt.runtime.vocab import Vocab
        _VOCAB.append((Vocab.from_bytes([bytes([b]) for b in range(256)], eos=256),
                       tmp_path_factory.mktemp("llama-cache")))
    vocab, folder = _VOCAB[0]
    with cache_at(folder):
        LlamaGrammar.compile(text, vocab)


def _mask_cases(fast: bool):
    return [pytest.param(p, id=p.name, marks=[] if fast else [pytest.mark.slow])
            for p in WITH_SAMPLES if (p.name in FAST_MASKS) == fast]


def _xgrammar_masks_agree(path, qwen, max_tokens, optimized):
    """xgrammar's masks of the input and of the default output, step by step along every
    sample (cut to ``max_tokens`` Qwen tokens): equal wherever the input's own matcher goes."""
    from gramopt.engines.xgrammar import compile_grammar, matcher
    from gramopt.runtime.tokenize import Tokenizer
    got = portable_output(str(path), optimized)
    if got is None:
        pytest.skip("gramopt cannot read it")
    g, out = got
    try:
        ca = compile_grammar(g, qwen)
    except RuntimeError as e:
        pytest.skip(f"xgrammar refuses the input: {e}")
    cb = compile_grammar(out, qwen)  # the output must load where the input does
    tok = Tokenizer.for_vocab(qwen)
    stem = path.name[: -len(path.suffix)]
    ra, rb = np.zeros(qwen.n_words, np.int32), np.zeros(qwen.n_words, np.int32)
    for sample in sorted(path.parent.glob(stem + ".sample*.txt")):
        toks, _ = tok.trajectory(sample.read_text(encoding="utf-8"), max_tokens)
        ma, mb = matcher(ca), matcher(cb)
        for i, t in enumerate(toks):
            ma.fill(ra)
            mb.fill(rb)
            if not np.array_equal(ra, rb):
                _input_mask_is_the_root_bug(g, qwen, toks[:i], ra, rb, f"{sample.name}: masks differ at step {i}")
            if not ma.accept(t):
                break  # the input's matcher stops here (a sample xgrammar rejects)
            assert mb.accept(t)
            if t in qwen.eos_ids:
                break


def _input_mask_is_the_root_bug(g, qwen, prefix, input_row, output_row, where):
    """Where xgrammar's masks of the input and the output differ, the output's must be
    gramopt's exact mask, and the input's the known xgrammar 0.2.8 bug: a start rule that
    references itself (``../shared/ENGINES.md``; the output's root delegates to avoid it)."""
    from gramopt.runtime import Matcher
    exact = Matcher(g, qwen)
    for t in prefix:
        assert exact.accept_token(t), where
    ref = np.zeros((1, qwen.n_words), np.int32)
    exact.fill_next_token_bitmask(ref, 0)
    assert np.array_equal(output_row, ref[0]), f"{where}: the output's mask is not the exact one"
    assert _referenced_root(g) and not np.array_equal(input_row, ref[0]), where


@pytest.mark.skipif(not (HAVE_XGRAMMAR and WITH_SAMPLES), reason="xgrammar or the corpus missing")
@pytest.mark.parametrize("path", _mask_cases(fast=True))
def test_xgrammar_masks_equal_along_samples(path, qwen, optimized):
    _xgrammar_masks_agree(path, qwen, 48, optimized)


@pytest.mark.skipif(not (HAVE_XGRAMMAR and WITH_SAMPLES), reason="xgrammar or the corpus missing")
@pytest.mark.parametrize("path", _mask_cases(fast=False))
def test_xgrammar_masks_equal_along_samples_whole_corpus(path, qwen, optimized):
    _xgrammar_masks_agree(path, qwen, 10_000, optimized)


# ---------------------------------------------------------------- every target in its engine(s)


TARGET_ENGINES = {"portable": ("xgrammar", "llguidance", "llama.cpp"), "xgrammar": ("xgrammar",),
                  "llguidance": ("llguidance",), "llama.cpp": ("llama.cpp",), "earley": (), "generic": ()}
CASES = {
    "anbn": ('root ::= "a" root "b" | ""', "ebnf"),
    "json-ish": ('root ::= value\nvalue ::= "[" ws (value ("," ws value)*)? "]" | [0-9]+\nws ::= [ ]*', "gbnf"),
    "left-rec": ('root ::= list\nlist ::= list "," item | item\nitem ::= [a-z]+', "gbnf"),
}


def _loads(engine: str, g, tmp_path_factory):
    if engine == "xgrammar":
        if not HAVE_XGRAMMAR:
            return
        import xgrammar as xgr
        info = xgr.TokenizerInfo([bytes([b]) for b in range(256)], xgr.VocabType.RAW, vocab_size=257,
                                 stop_token_ids=[256], add_prefix_space=False)
        xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False).compile_grammar(write(g, "ebnf"),
                                                                                    root_rule_name=g.start)
    elif engine == "llguidance":
        if not HAVE_LLG:
            return
        from gramopt.engines.llguidance import _matcher
        assert _matcher(g) is not None, "llguidance refuses the output"
    elif engine == "llama.cpp":
        if not HAVE_LLAMA:
            return
        _llama_compiles(write(g, "gbnf"), tmp_path_factory)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("target", list(TARGET_ENGINES))
def test_each_target_output_loads_in_its_engines_and_avoids_their_bugs(target, case, tmp_path_factory):
    src, dialect = CASES[case]
    g = parse(src, dialect)
    out = optimize(g, target=target).grammar
    engines = TARGET_ENGINES[target]
    if "xgrammar" in engines:
        assert not _referenced_root(out), write(out)      # xgrammar 0.2.8's root bug
    if "llama.cpp" in engines:
        assert not structure(out).left_recursive, write(out)  # llama.cpp refuses it
    for e in engines:
        _loads(e, out, tmp_path_factory)


def test_llamacpp_target_removes_left_recursion_the_egraph_did_not_see():
    """The e-graph skips a grammar over its limits: the llama.cpp target's fix-up still
    removes the input's left recursion (here the e-graph passes are left out)."""
    g = parse('root ::= list\nlist ::= list "," item | item\nitem ::= [a-z]+', "gbnf")
    r = optimize(g, target="llama.cpp", passes=["cleanup", "inline", "target"])
    assert structure(g).left_recursive and not structure(r.grammar).left_recursive
    assert r.report.verified == "ok"


def test_a_lark_grammar_no_engine_but_llguidance_reads_gets_no_xgrammar_root_wrapper():
    """xgrammar never gets a Lark grammar with a lexer of its own (``formats.engine_reads``):
    the root wrapper written for xgrammar's mask bug is not added there; a Lark grammar without
    one is written as EBNF for xgrammar and gets it. Left recursion goes in both (llama.cpp;
    llguidance is faster on the star too)."""
    lexer = parse('start: "a" start "b" | NAME\nNAME: /[a-z]+/\n', "lark")
    plain = parse('start: "a" start "b" | "c"\n', "lark")
    assert [r.name for r in fixup(lexer).rules] == ["start"]
    assert [r.name for r in fixup(plain).rules] == ["start", "start_rec"]
    left = parse('start: list\nlist: list "," NAME | NAME\nNAME: /[a-z]+/\n', "lark")
    assert not structure(fixup(left)).left_recursive
    r = optimize(lexer)
    assert r.report.verified == "ok" and len(r.grammar.rules) <= len(lexer.rules)


# ---------------------------------------------------------------- flat repetition bodies, differentially

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from examples import examples  # noqa: E402
from gramopt.grammar import CharClass, Epsilon, Grammar, Literal, Repeat, Rule, alt, refs, seq  # noqa: E402
from gramopt.transforms.reshape import flatten_repetition_bodies  # noqa: E402


def _flat_exprs(depth, names=("A", "B", "S")):
    atoms = st.sampled_from([Literal("a"), Literal("bc"), CharClass(((0x61, 0x63),)), Epsilon(),
                             Repeat(Literal("b"), 2, 3), CharClass(((0x22, 0x22), (0x5C, 0x5C)), True)])
    leaf = st.one_of(atoms, st.sampled_from(names).map(Ref)) if names else atoms
    if depth == 0:
        return leaf
    sub = _flat_exprs(depth - 1, names)
    return st.one_of(leaf, st.lists(sub, min_size=2, max_size=3).map(lambda xs: seq(*xs)),
                     st.lists(sub, min_size=2, max_size=3).map(lambda xs: alt(*xs)),
                     st.tuples(sub, st.sampled_from([(0, None), (1, None)])).map(
                         lambda t: Repeat(t[0], *t[1]) if t[0] != Epsilon() else t[0]))


@settings(max_examples=examples(80), deadline=None, suppress_health_check=list(HealthCheck))
@given(st.tuples(_flat_exprs(2, ("A",)), _flat_exprs(2, ()), _flat_exprs(2, ("A", "B", "S"))))
def test_flat_repetition_bodies_keep_the_language(bodies):
    """Random grammars (``A`` a leaf, read through into the repetitions of ``S``, which the
    start uses): the reshaping's output has the input's language, and a second run changes
    nothing."""
    rules = [Rule(n, b) for n, b in zip(["S", "A", "B"], bodies)]
    g = Grammar((Rule("R", seq(Ref("S"), Ref("B"))), *rules), "R")
    out, done = flatten_repetition_bodies(g)
    assert check_equivalence(g, out).ok, (g, out)
    assert flatten_repetition_bodies(out)[0] == out
    assert bool(done) == (out != g)


@settings(max_examples=examples(80), deadline=None, suppress_health_check=list(HealthCheck))
@given(st.tuples(_flat_exprs(2, ("B",)), _flat_exprs(2, ()), _flat_exprs(1, ("A",))))
def test_flat_repetition_bodies_read_leaves_through_leaves(bodies):
    """``S``'s stars reference ``B``, which references the leaf ``A`` (a hand-written JSON
    string: ``characters ::= character*``, ``character ::= [^"\\] | "\\" escape``): read
    through both, the language is the input's, a second run changes nothing, and a rule read
    through that nothing references any more is gone."""
    rules = [Rule(n, b) for n, b in zip(["S", "A", "B"], bodies)]
    g = Grammar((Rule("R", Ref("S")), *rules), "R")
    out, done = flatten_repetition_bodies(g)
    assert check_equivalence(g, out).ok, (g, out)
    assert flatten_repetition_bodies(out)[0] == out
    assert bool(done) == (out != g)
    unused = lambda h: {r.name for r in h.rules} - {n for r in h.rules for n in refs(r.body)} - {"R"}  # noqa: E731
    assert unused(out) <= unused(g)  # what was read through and is no longer referenced is gone


def test_a_hand_written_json_string_is_read_flat_through_its_named_rules():
    g = parse('root ::= "\\"" characters "\\""\ncharacters ::= character*\n'
              'character ::= [^"\\\\] | "\\\\" escape\nescape ::= ["\\\\/bfnrt] | "u" [0-9a-f] [0-9a-f]\n', "gbnf")
    out, done = flatten_repetition_bodies(g)
    assert done == ["characters"] and [r.name for r in out.rules] == ["root", "characters"]
    assert check_equivalence(g, out).ok


@settings(max_examples=examples(80), deadline=None, suppress_health_check=list(HealthCheck))
@given(st.tuples(_flat_exprs(2, ("A",)), _flat_exprs(2, ()), _flat_exprs(2, ("A", "B", "S"))), st.booleans())
def test_flat_character_rules_keep_the_language(bodies, lexical_users_only):
    """The same random grammars through ``flatten_character_rules``: the output has the
    input's language, a second run changes nothing (``s ::= A`` becomes a character rule once
    A is written in it), and no repetition is rewritten (those are ``flatten_repetition_bodies``';
    a star of one atom may come with a character rule's body)."""
    from gramopt.transforms.reshape import flatten_character_rules
    rules = [Rule(n, b) for n, b in zip(["S", "A", "B"], bodies)]
    g = Grammar((Rule("R", seq(Ref("S"), Ref("B"))), *rules), "R")
    out, done = flatten_character_rules(g, lexical_users_only)
    assert check_equivalence(g, out).ok, (g, out)
    assert flatten_character_rules(out, lexical_users_only)[0] == out
    assert bool(done) == (out != g)
    from gramopt.costmodels.engine_shapes import flat_atom
    from gramopt.grammar import walk
    stars = lambda h: {x for r in h.rules for x in walk(r.body) if isinstance(x, Repeat) and x.max is None}
    assert {x for x in stars(out) if not flat_atom(x)} <= stars(g)  # only a character rule's own moved


def test_a_string_too_deep_once_flat_is_lifted_not_reverted():
    """The portable fix-up too: ``c`` written flat in the lexical string rule nests llama.cpp's
    maxLength chain past the passes' bound; its deepest groups become rules (reshape/deep_groups.py),
    where the whole fix-up used to be thrown away (passes._too_big)."""
    from gramopt.grammar.expr import MAX_PASS_DEPTH, depth
    from gramopt.passes import _too_big
    levels = 23
    g = parse('root ::= "{" s "}"\ns ::= "\\"" ' + "(c " * levels + ")?" * levels + ' "\\""\n'
              'c ::= [^"\\\\] | "\\\\" (["nt] | "u" [0-9a-f]{4})\n', "gbnf")
    out = fixup(g)
    assert "c" not in out.names and not _too_big(out) and len(out.rules) > 2
    assert max(depth(r.body) for r in out.rules) <= MAX_PASS_DEPTH
    assert check_equivalence(g, out).ok
    assert fixup(out) == out
