"""The xgrammar fix-up pass: shapes that xgrammar 0.2.8's token-mask cache can decide.

Why (measured, benchmarks/xgrammar_target_bench.py): xgrammar precomputes, for every position
inside every rule, which tokens are accepted, rejected or *uncertain*; only the uncertain ones
are re-checked per step against the whole parser stack, and that re-check is what costs. A
token is uncertain at a position of rule R when R can *end* inside it (the rest of the token
is then up to R's caller) and R's lookahead assertion, if any, does not reject the rest.
llama.cpp's JSON grammar costs ~40 ms per mask against ~10 μs for xgrammar's own JSON not
because of its nullable ``ws`` (that costs a few hundred uncertain tokens) but because of the
alternation under the star of its string rule, ``"\"" ( [^"\\] | "\\" esc )* "\""``:
xgrammar lowers the group into a helper rule of *one character* whose end is reached after
the first byte of nearly every token, and the assertion it derives for that helper is the
(nullable) star rule, which rejects nothing — ~130,000 of 151,643 Qwen tokens uncertain at
every position inside a string. The same mechanism, a rule that ends early in most tokens and
has no useful assertion, is behind every slow corpus grammar: ``char+`` with a one-character
``char`` rule, ``[ \t]+`` (a plus of a class becomes a helper rule ``X ::= c X | c``), a
shared ``ws`` rule followed by identifiers, left recursion (the rule ends after every item),
and ambiguity that keeps many parser states alive (SMILES: ``(b? smiles)+`` where the parts
concatenate into one ``smiles`` anyway).

``fixup`` runs, all steps language-preserving (each an IR pass of ``gramopt.transforms.reshape``
that states its argument; one module per step: ``counted``, ``flat_stars``, ``left_recursion``,
``regular_rules``, ``star_rules`` with its inclusion prover ``inclusion``, ``root_wrapper``, ``lookaheads``):

* first, ``write_out_counted_groups`` (``counted``: ``c{8,}`` as ``c … c c*``, 325 ms a mask
  against 0.12 ms) and ``flatten_character_rules`` (``flat_stars``): a rule of one wide
  character written flat where it is used outside a repetition (llama.cpp's converter's bounded string
  ``"\"" char char (char …)? "\""``: 68 ms a Qwen mask inside it, 0.12 ms flat; the round's
  inliner would write it as a nested group, as slow as the reference);
* to a fixpoint: ``remove_left_recursion`` (A ::= A α | β as β α*), ``inline_small_regular_rules``
  (``ws ::= [ \t]*`` into its callers; small alternation rules only where something follows),
  ``lift_star_alternations`` ((a|b)* t as ``U ::= t | a U | b U``, (a|b)* as ``S ::= "" | a S |
  b S``, bounded ones as rule chains, ``c+`` as ``c c*``, ``U+`` as ``U`` and ``U*`` as ``U?``
  when U·U ⊆ U, (a+ | b)* as (a | b)*);
* ``wrap_referenced_root``: a root that rules reference delegates to a fresh rule (xgrammar
  0.2.8 treats the root as the end of input in its mask cache: ``root ::= "a" root "b" |
  ""`` misses ``bb``, and llama.cpp's JSON once inlined, ``value ::= root | …``, misses
  ``{},`` after ``{"name":``);
* ``infer_lookaheads``: ``(= [F])`` with F the ASCII FOLLOW class of the rule. It restricts
  nothing the grammar allows: xgrammar reads an assertion only while building the mask cache
  (its runtime parser never consults it — probed, tests/test_target_xgrammar.py: a rule
  asserted ``(= "b")`` yet followed by the end of input still lets EOS through and
  terminates), and there only to *reject* a token that ends R inside itself when the rest of
  the token cannot start with the assertion. If the token can extend a sentence, the rest's
  first code point follows R in that sentence, so it is in FOLLOW(R) ⊆ F and the token is
  kept; a token ending exactly where R ends is never checked; the end of input has no rest to
  read, so leaving it out of F is sound. gramopt's own runtime and verifier read an assertion
  as ε ("a hint, not part of the language", ``grammar.bnf``), which is exact for these.

The pass is idempotent (the reshaping steps run to a fixpoint, assertions are recomputed from
the grammar, a wrapped root is no longer referenced) and the benchmark and tests compare
xgrammar's masks for the original and the optimized grammar bit for bit along Qwen-tokenized
corpus samples.
"""

from __future__ import annotations

from ..grammar import Grammar
from ..transforms.fixpoint import fixpoint
from ..transforms.registry import has_token_atoms, reshaping
from ..transforms.reshape import (infer_lookaheads, inline_small_regular_rules, lift_star_alternations,
                                  remove_left_recursion, wrap_referenced_root)

ROUND = (  # (name in the report, reshaping in the registry transforms.registry.PASSES, what the note
    ("xgrammar-left-recursion", "left-recursion", "left recursion as a star in"),  # says), run in this
    ("xgrammar-inline", "inline-regular", "inlined"),                                # order, then the root
    ("xgrammar-star-rule", "star-rules", "repetitions made rules:"),                 # wrapper, to a fixpoint
)


def _count(fired: dict, notes: list[str], key: str, names: list[str], what: str) -> None:
    """Record that step ``key`` changed ``names`` (the pass report's counts and notes)."""
    if names:
        fired[key] = fired.get(key, 0) + len(names)
        notes.append(f"xgrammar: {what} {', '.join(names[:6])}{' …' if len(names) > 6 else ''}")


def fixup(g: Grammar, notes: list[str] | None = None, fired: dict | None = None) -> Grammar:
    """The xgrammar target pass (see the module docstring). ``notes`` / ``fired`` collect
    what it did, for the pass report."""
    notes = [] if notes is None else notes
    fired = {} if fired is None else fired
    if has_token_atoms(g):  # Lark terminals are not code points: only the root fix-up applies
        g, wrapped = reshaping("root-wrapper")(g)
        _count(fired, notes, "xgrammar-root-wrapper", [wrapped] if wrapped else [], "root delegates to")
        return g

    def round_(g: Grammar) -> Grammar:
        for key, name, what in ROUND:
            g, names = reshaping(name)(g)
            _count(fired, notes, key, names, what)
        g, wrapped = reshaping("root-wrapper")(g)  # in the round: the new rule may be small enough to inline
        _count(fired, notes, "xgrammar-root-wrapper", [wrapped] if wrapped else [], "root delegates to")
        return g
    # a string's length bound, before the round could inline its character rule as a nested
    # group: counted groups written out (c{8,}: 325 ms a mask, 0.12 ms written out), then the
    # character rules written flat (68 ms a mask either way, 0.12 ms flat)
    g, names = reshaping("counted-groups")(g)
    _count(fired, notes, "xgrammar-counted-groups", names, "counted repetitions written out in")
    g, names = reshaping("flat-characters")(g)
    _count(fired, notes, "xgrammar-flat-characters", names, "character rules written flat in")
    # each step can open the way for another (an inlined ws makes its caller small and
    # regular): to a fixpoint, so the pass is idempotent
    g = fixpoint(round_, g, 16)
    # no body deeper than the passes' bound (the flat characters in a string's maxLength chain),
    # or the whole pass is reverted (passes._too_big): lifted as the reader lifts them, before
    # the assertions (a rule with one is pinned, and the new rules get theirs)
    g, names = reshaping("deep-groups")(g)
    _count(fired, notes, "xgrammar-deep-groups", names, "groups nested too deep lifted into rules in")
    g, n = reshaping("lookaheads")(g)
    if n:
        fired["xgrammar-lookahead"] = n
        notes.append(f"xgrammar: {n} lookahead assertion(s) from FOLLOW sets")
    return g


__all__ = ["ROUND", "fixup", "infer_lookaheads", "inline_small_regular_rules", "lift_star_alternations",
           "remove_left_recursion", "wrap_referenced_root"]
