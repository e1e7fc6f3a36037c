"""The xgrammar fix-up pass: shapes that xgrammar 0.2.8's token-mask cache can decide.

Why (measured, see benchmarks/xgrammar_target_bench.py): xgrammar precomputes, for every
position inside every rule, which tokens are accepted, rejected or *uncertain*; only the
uncertain ones are re-checked per step against the whole parser stack, and that re-check is
what costs. A token is uncertain at a position of rule R when R can *end* inside it: what the
rest of the token must match then depends on R's caller. Two grammar shapes make that happen
for most of the vocabulary:

* **an alternation under a star**, llama.cpp's ``"\\"" ( [^"\\\\] | "\\\\" esc )* "\\""``:
  xgrammar lowers the group into a helper rule of *one character* (``string_2_2 ::= [^"\\\\] |
  "\\\\" esc``) whose own end is reached after the first byte of nearly every token; the
  lookahead xgrammar derives for it is the star rule, which is nullable, so it rejects
  nothing. On llamacpp__json.gbnf that leaves ~130,000 of 151,643 Qwen tokens uncertain at
  every position inside a string: ~40 ms per mask against ~60 μs once the star is a rule of
  its own, ``S ::= "" | [^"\\\\] S | "\\\\" esc S``, whose end is reached only at the closing
  quote.
* **a rule that ends with something nullable** (``… "\\"" ws``, with ``ws ::= "" | " " | …``)
  and is used in several places: xgrammar derives a lookahead only for a rule used exactly
  once and never last, so such a rule gets none, and every token that runs past its end is
  uncertain.

The pass (``fixup``), all three steps language-preserving:

1. ``lift_star_alternations``: ``(a₁ | … | aₙ)*`` becomes a fresh rule
   ``S ::= "" | a₁ S | … | aₙ S`` and ``(a₁ | … | aₙ)+`` a fresh ``P ::= a₁ P | … | aₙ P | a₁ |
   … | aₙ``. Argument: L(S) is the least solution of S = ε ∪ (a₁ ∪ … ∪ aₙ)·S, which is
   (a₁ ∪ … ∪ aₙ)* (Arden's lemma, least fixpoint); likewise P = A·P ∪ A gives A⁺. Equal
   repetitions share one rule.
2. ``infer_lookaheads``: every non-start rule R without an assertion gets ``(= [F])``, F the
   code points of FOLLOW(R) (``targets.follow``), when F is not every code point and not
   empty. Argument — it restricts nothing the grammar allows: xgrammar reads an assertion
   only while building the mask cache (its runtime parser never consults it; probed: a rule
   asserted ``(= "b")`` yet followed by the end of input still lets EOS through and
   terminates), and there it is used to *reject* a token that ends R inside itself when
   the rest of the token cannot start with the assertion. If the rest can extend a sentence
   at all, its first code point follows R in that sentence, so it is in FOLLOW(R) ⊆ F and
   the token is not rejected; a token whose rest is empty is never checked against the
   assertion; a token that could only end R at the end of input has no rest to read. So the
   cache marks no allowed token as rejected, and the mask is the same bit for bit (the
   benchmark and tests compare masks of original and optimized grammars along real
   trajectories). gramopt's own runtime and verifier read an assertion as ε (``grammar.bnf``:
   "a hint, not part of the language"), which is therefore exact for inferred assertions.
   Assertions already in the input are kept as written.
3. ``wrap_self_recursive_root``: xgrammar 0.2.8 computes wrong masks for a directly
   self-recursive root rule (``root ::= "a" root "b" | ""``), so the root delegates to a
   fresh rule with the old body: same language, one unit production.

The pass is idempotent: step 1 leaves no alternation under an unbounded repetition, step 2
keeps existing assertions, step 3 leaves a root that is not self-recursive.
"""

from __future__ import annotations

from dataclasses import replace

from ..grammar import (Alt, CharClass, Epsilon, Expr, Grammar, Ref, Regex, Repeat, Rule, Terminal, alt,
                       refs, rename_refs, seq, transform, walk)
from .follow import follow_sets


def fixup(g: Grammar, notes: list[str] | None = None, fired: dict | None = None) -> Grammar:
    """The xgrammar target pass (see the module docstring). ``notes`` / ``fired`` collect
    what it did, for the pass report."""
    notes = [] if notes is None else notes
    fired = {} if fired is None else fired
    if _has_lark_atoms(g):
        notes.append("xgrammar: Lark terminals present, only the root fix-up applies")
    else:
        lifted, n = lift_star_alternations(g)
        if n:
            fired["xgrammar-star-rule"] = n
            notes.append(f"xgrammar: {n} alternation(s) under a repetition made rules")
        g = lifted
    g, wrapped = wrap_self_recursive_root(g)
    if wrapped:
        fired["xgrammar-root-wrapper"] = 1
        notes.append(f"xgrammar: root delegates to {wrapped}")
    if not _has_lark_atoms(g):
        with_la, n = infer_lookaheads(g)
        if n:
            fired["xgrammar-lookahead"] = n
            notes.append(f"xgrammar: {n} lookahead assertion(s) from FOLLOW sets")
        g = with_la
    return g


# ---------------------------------------------------------------- 1. alternations under a star


def lift_star_alternations(g: Grammar) -> tuple[Grammar, int]:
    """Every ``(a₁|…|aₙ)*`` / ``(a₁|…|aₙ)+`` becomes a right-recursive rule of its own (see
    the module docstring); returns the grammar and how many rules were made. Rule order: a
    new rule right after the first rule that uses it."""
    taken = set(g.names)
    made: dict[Repeat, str] = {}
    new_rules: dict[str, list[Rule]] = {}

    def lift(owner: str):
        def fn(e: Expr) -> Expr:
            if not (isinstance(e, Repeat) and isinstance(e.item, Alt) and e.max is None and e.min <= 1):
                return e
            if e in made:
                return Ref(made[e])
            name = _fresh(f"{owner}_{'star' if e.min == 0 else 'plus'}", taken)
            made[e] = name
            me = Ref(name)
            steps = [seq(a, me) for a in e.item.items]
            body = alt(Epsilon(), *steps) if e.min == 0 else alt(*steps, *e.item.items)
            new_rules.setdefault(owner, []).append(Rule(name, body))
            return me
        return fn

    rules = []
    for r in g.rules:
        body = transform(r.body, lift(r.name))
        rules.append(replace(r, body=body) if body != r.body else r)
        rules.extend(new_rules.get(r.name, []))
    return (g.replace_rules(rules), len(made)) if made else (g, 0)


# ---------------------------------------------------------------- 2. lookahead assertions


def infer_lookaheads(g: Grammar) -> tuple[Grammar, int]:
    """Add ``(= [FOLLOW])`` to every non-start rule that has no assertion, where FOLLOW is
    neither every code point nor empty; returns the grammar and how many were added."""
    follows = follow_sets(g)
    n = 0
    rules = []
    for r in g.rules:
        f = follows.get(r.name)
        if r.name == g.start or r.lookahead is not None or f is None or not f.ranges or f.covers_everything():
            rules.append(r)
            continue
        rules.append(replace(r, lookahead=CharClass(f.ranges)))
        n += 1
    return (g.replace_rules(rules), n) if n else (g, 0)


# ---------------------------------------------------------------- 3. self-recursive root


def wrap_self_recursive_root(g: Grammar) -> tuple[Grammar, str | None]:
    """A directly self-recursive start rule delegates to a fresh rule holding its body (every
    other reference to the start rule is pointed there too); returns (grammar, the new rule's
    name or None when nothing changed)."""
    root = g.rule(g.start)
    if g.start not in refs(root.body):
        return g, None
    name = _fresh(f"{g.start}_rec", set(g.names))
    mapping = {g.start: name}
    out = []
    for r in g.rules:
        if r.name == g.start:
            out.append(replace(root, body=Ref(name), aliases=(), lookahead=None))
            out.append(Rule(name, rename_refs(root.body, mapping), root.lookahead))
        else:
            la = None if r.lookahead is None else rename_refs(r.lookahead, mapping)
            out.append(replace(r, body=rename_refs(r.body, mapping), lookahead=la))
    return g.replace_rules(out), name


# ---------------------------------------------------------------- helpers


def _fresh(base: str, taken: set[str]) -> str:
    name, k = base, 1
    while name in taken:
        k += 1
        name = f"{base}{k}"
    taken.add(name)
    return name


def _has_lark_atoms(g: Grammar) -> bool:
    return bool(g.terminals) or any(isinstance(n, (Terminal, Regex)) for r in g.rules for n in walk(r.body))
