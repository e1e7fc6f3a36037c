"""The targets: one ``Target`` record per engine, and the registry.

    TARGETS["xgrammar"]         the record (``target.py``: every way targets differ)
    get(name_or_target)         the record; ValueError naming the known ones
    apply(grammar, target)      the target's fix-ups (the ``target`` pass of ``gramopt.passes``)

Nothing outside this package compares target names: the passes read the record's fields.
Measured reasons for each field are beside it (``benchmarks/results/bench-2026-11-23``).
"""

from __future__ import annotations

from ..costmodels.objective import W_RECURSION
from ..engines.llguidance import lark_error as _llguidance_lark_error
from ..formats.lark_llguidance import LarkSubset, for_llguidance
from ..grammar import Grammar
from .guard import GUARD as _NO_SLOWER, llamacpp_guard
from .target import INLINE_BY_KAPPA, INLINE_LEAVES, INLINE_LEXICAL, INLINE_NONE, Target
from .llamacpp import fixup as _llamacpp_fixup
from .portable import fixup as _portable_fixup, no_left_recursion as _no_left_recursion, reduce as _portable_reduce
from .xgrammar import fixup as _xgrammar_fixup


PORTABLE = Target(
    "portable", "safe in every engine: no left recursion, a root that delegates, regular parts "
                "regular, never slower than the input",
    # factoring nests the rest of the alternatives in a group, a rule of its own in xgrammar
    skips_cleanups=("factoring",),
    # inlining `item ::= "- " [^\n]+ "\n"` into `root ::= item+` made llguidance 250× slower:
    # rules are its lexer's boundaries, so a rule is inlined (where κ does not grow) only where
    # llguidance's lexemes stay as they are; pass-through and duplicate rules still merge
    # (issue 23: the obfuscated corpus's helper rules, e.g. xml_simple's `rep ::= [0-9]+`
    # used once in a lexical `CharRef`, had stayed named)
    inlining=INLINE_LEXICAL,
    # regular parts regular: a star as a recursive helper rule is 9× (xgrammar) to 121×
    # (llguidance) slower
    recursion_penalty=W_RECURSION,
    # llama.cpp refuses left recursion
    left_recursion=False,
    # the whitespace `[ \t\n\r]*` of a JSON-schema grammar named as one shared rule: xgrammar
    # 1.6-3.4x slower at p95 on 5 of 56 JSONSchemaBench schemas (a nullable rule's every use is
    # predicted and completed), and llguidance lexes such a rule greedily (a mask difference the
    # engine check caught); left inline where the input wrote it
    names_nullable=False,
    # `"[" [ \t\n\r]* "]"` (an empty array) named as one shared rule: llguidance lexes such a
    # leaf rule as one greedy lexeme and, after `[ `, refused the `"` of a string in the array
    # beside it (129 tokens, Github_hard---o21157); left inline where the input wrote it
    names_lexemes=False,
    # a property rule that xgrammar's converter wrote once per use, merged with its copies:
    # xgrammar derives no lookahead for a rule used twice, 1.4-2x slower at p95 on 3 schemas
    keeps_derived_lookaheads=True,
    fixups=(("portable", _portable_fixup),),
    # engines disagree on the best form (xgrammar wants `S ::= "\"" | c S` with a lookahead,
    # llguidance the star): an output that costs any engine more (static counts) is not kept
    guard=_NO_SLOWER,
    # safe in every engine: its masks there must equal the input's (xgrammar trusts lookahead
    # assertions; llguidance's greedy lexer can accept less than the language)
    checked_in=("xgrammar", "llguidance", "llama.cpp"),
    # a schema's grammar is gramopt's to write: in the dialect all three read (issue 24: xgrammar
    # EBNF with lookaheads loaded in neither llguidance nor llama.cpp); --target xgrammar keeps them
    schema_dialect="gbnf",
    # an output the guard or the engine check rejects still loses its pass-through and
    # duplicated rules, split literals and unreachable rules (issue 23: 25 of 34 obfuscated
    # corpus grammars came back larger than their clean form)
    reduce=_portable_reduce)

GENERIC = Target(
    "generic", "pure κ + SAC-proxy, no engine quirks (a research target: its output may be "
               "left-recursive or slower in an engine)")

EARLEY = Target(
    "earley", "gramopt's own runtime: leaf rules inlined, regular parts kept regular",
    # gramopt's Earley runtime completes back into every caller of a leaf rule: inlining
    # `ws ::= [ \t\n]*` into xgrammar's JSON grammar took p95 from 182 µs back to 25 µs
    inlining=INLINE_LEAVES,
    # `[ \t\n]*` extracted as `W ::= "" | W [ \t\n]` made gramopt's Earley 2,000× slower
    recursion_penalty=W_RECURSION)

XGRAMMAR = Target(
    "xgrammar", "lookahead assertions from FOLLOW sets, star rules in place, no factoring of "
                "alternatives, a root that delegates; written as xgrammar EBNF",
    # factoring a common prefix out of alternatives nests the rest in a group, which xgrammar
    # compiles as a rule of its own (built-in JSON: p50 5.4 → 6.6 µs per mask with factoring)
    skips_cleanups=("factoring",),
    # `[ \t\n]*` as a left-recursive helper rule: 9× slower in xgrammar
    recursion_penalty=W_RECURSION,
    calibrated_engine="xgrammar",
    fixups=(("xgrammar", _xgrammar_fixup),),
    # a rule used once keeps its own assertion (xgrammar derives one): merged with its copies, 1.6x
    # slower at p95 (BFCL_javascript_16)
    keeps_derived_lookaheads=True,
    # xgrammar trusts a lookahead assertion where it does not hold (53 extra tokens after
    # `{"hobby": "` on a JSONSchemaBench schema): its masks must equal the input's
    checked_in=("xgrammar",),
    # the assertions are what makes xgrammar's mask cache fast (llama.cpp JSON: ~650× p50);
    # only xgrammar EBNF can carry them
    output_dialect="ebnf",
    # xgrammar loads its EBNF and GBNF, not Lark or NLTK CFG (a Lark input is written as Lark: warned)
    reads=("ebnf", "gbnf"))

LLGUIDANCE = Target(
    "llguidance", "lexemes kept (a rule is inlined only where it is no lexeme of its lexer), regular parts regular, checked in "
                  "llguidance itself",
    # inlining `item ::= "- " [^\n]+ "\n"` into `root ::= item+` made llguidance 250× slower:
    # only inlinings that keep its lexemes as they are
    inlining=INLINE_LEXICAL,
    # regular parts run in its lexer: 121× slower as recursive rules
    recursion_penalty=W_RECURSION,
    calibrated_engine="llguidance",
    # its greedy lexer can accept less than the language, depending on which rules it lexes
    checked_in=("llguidance",),
    # a shared leaf expression named as a rule becomes one lexeme (the portable target's reason)
    names_lexemes=False,
    # llguidance's own JsonCompiler prints no grammar: llama.cpp's converter writes GBNF it reads
    schema_converter="llama.cpp",
    # llama-cpp-python is a source build: without it, xgrammar's converter written as GBNF
    schema_fallback="xgrammar",
    # its Lark has no priorities, no relative imports, and starts at `start`: 6 of 9 real
    # .lark files did not load as gramopt wrote them
    lark_subset=LarkSubset("llguidance", for_llguidance, _llguidance_lark_error))

def _llamacpp_fixed_up(g: Grammar) -> Grammar:
    """The input as the llama.cpp target writes it without its e-graph: the fix-ups alone."""
    return LLAMA_CPP.apply_fixups(g)


LLAMA_CPP = Target(
    "llama.cpp", "no left recursion; extraction and guard under llama.cpp's calibrated model "
                 "(the shipped costmodels/models/llama.cpp.json, or --cost-model)",
    recursion_penalty=W_RECURSION,
    left_recursion=False,
    calibrated_engine="llama.cpp",
    # no left recursion: the extractor emits none, but an input the e-graph skipped (too
    # large) may still have some; then llama.cpp tries the alternative written last first:
    # repetitions written empty-first and alternations widest-last (targets/llamacpp.py;
    # in-string masks 133 → 92 ms in one run)
    fixups=(("no-left-recursion", _no_left_recursion), ("llama.cpp", _llamacpp_fixup)),
    # the fix-up's order is what moved llama.cpp's masks (in-string p95 1.2-1.7x); the e-graph's
    # output measured 0.9-1.1x against the input with the same fix-ups (stack counts equal,
    # benchmarks/results/reach-2026-11-25): it is kept only where llama.cpp's model prices it lower
    guard=llamacpp_guard(_llamacpp_fixed_up),
    checked_in=("llama.cpp",),
    schema_converter="llama.cpp",
    # llama.cpp loads GBNF (xgrammar EBNF without lookaheads reads as GBNF), not Lark or NLTK CFG
    reads=("gbnf", "ebnf"))

TARGETS: dict[str, Target] = {t.name: t for t in (PORTABLE, GENERIC, XGRAMMAR, LLGUIDANCE, LLAMA_CPP, EARLEY)}
NAMES = tuple(TARGETS)
DEFAULT = "portable"


def get(target: "str | Target") -> Target:
    """The record of ``target`` (a name, or a record passed through)."""
    if isinstance(target, Target):
        return target
    try:
        return TARGETS[target]
    except KeyError:
        raise ValueError(f"unknown target '{target}' (known: {', '.join(TARGETS)})") from None


def apply(grammar: Grammar, target: "str | Target", notes: list[str] | None = None,
          fired: dict | None = None) -> Grammar:
    """``grammar`` fixed up for ``target``; ``notes`` / ``fired`` collect what was done."""
    return get(target).apply_fixups(grammar, notes, fired)


__all__ = ["DEFAULT", "INLINE_BY_KAPPA", "INLINE_LEAVES", "INLINE_LEXICAL", "INLINE_NONE", "NAMES", "TARGETS",
           "Target", "apply", "get"]
