"""The llama.cpp fix-up: alternatives in the order llama.cpp's stacks pay least for.

Why (measured, ``benchmarks/llamacpp_profile.py``; llama-cpp-python 0.3.36). llama.cpp's
grammar sampler keeps one parse *stack* per way the grammar may go on and, to fill a mask,
tries them one after another, each on the candidate tokens the stacks before it rejected
(``llama_grammar_reject_candidates``). A stack whose top is ``"\\""`` scans ~all 150k
candidates and rejects nearly all of them, so every stack tried before the one that takes
most candidates costs a pass over the vocabulary. The order of the stacks is the order of
llama.cpp's depth-first expansion (``llama_grammar_advance_stack``), which pushes a rule's
alternatives in written order on a LIFO work list: **the alternative written last is
expanded, and tried, first**. llama.cpp's own expansion of ``x*`` is ``x' ::= x x' | ε``
(and ``x?`` is ``x' ::= x | ε``), so the empty alternative — the caller's continuation,
typically a closing quote — is tried before ``x``. Inside a JSON string
(``"\\"" char* "\\""``, ``char ::= [^"\\\\] | "\\\\" esc``) the stacks are tried as
``"\\""``, ``"\\\\"``, ``[^"\\\\]``: two full scans before the class that takes the tokens.
Written as ``s ::= "" | char s`` with ``char ::= "\\\\" esc | [^"\\\\]``, the class is tried
first: 133 → 92 ms per in-string mask on the Qwen vocabulary in one run (same stacks, same
mask).

``order_for_llamacpp`` (every step language-preserving):

* ``x*`` becomes a reference to a rule ``R ::= "" | x R`` (one per distinct ``x``; a rule
  ``A ::= x*`` becomes ``A ::= "" | x A`` itself), ``x+`` becomes ``x R``, and ``x?`` becomes
  ``("" | x)``: the same language (R derives exactly
  the strings of x*: ε, and x followed by a string of x*, by induction on the length of a
  derivation; ``x x*`` = x+; ε ∪ x = x?), and the same stacks llama.cpp builds from the
  operators itself, only with the empty alternative written first. Skipped where x is
  nullable (R would be left-recursive, which llama.cpp refuses).
* In every alternation the alternatives are stably sorted by how many code points can begin
  them (their FIRST set's width), nullable alternatives first: the widest is written last
  and so tried first. Union is commutative, so the language is unchanged; llama.cpp has no
  ordered choice (it keeps every stack), so its masks are unchanged too.

The pass is idempotent (no ``*``, ``+`` or ``?`` is left on a non-nullable item, and sorting
a sorted alternation keeps it). Lark grammars (terminal atoms) are left alone: llama.cpp
reads GBNF.
"""

from __future__ import annotations

from dataclasses import replace

from ..grammar import Alt, Epsilon, Expr, Grammar, Ref, Regex, Repeat, Rule, Seq, Terminal, transform, walk
from ..grammar.analysis import first_of_expr, first_sets, nullable_expr, nullable_rules

WIDEST = 0x110000


def order_for_llamacpp(g: Grammar, notes: list | None = None, fired: dict | None = None) -> Grammar:
    """``g`` with its repetitions written as empty-first rules and its alternatives ordered
    widest-last (module docstring); ``notes`` / ``fired`` say what changed."""
    notes = [] if notes is None else notes
    fired = {} if fired is None else fired
    if any(isinstance(n, (Terminal, Regex)) for r in g.rules for n in walk(r.body)) or g.terminals:
        return g
    out, lifted = _lift_repetitions(g)
    out, sorted_alts = _sort_alternatives(out)
    if lifted:
        fired["llama.cpp-star-rules"] = fired.get("llama.cpp-star-rules", 0) + lifted
    if sorted_alts:
        fired["llama.cpp-order"] = fired.get("llama.cpp-order", 0) + sorted_alts
    if lifted or sorted_alts:
        notes.append(f"llama.cpp: {lifted} repetition(s) written empty-first, {sorted_alts} alternation(s) "
                     f"ordered widest-last (tried first)")
    return out


def _lift_repetitions(g: Grammar) -> tuple[Grammar, int]:
    """``x*`` → ``R`` with ``R ::= "" | x R``; ``x+`` → ``x R``; ``x?`` → ``("" | x)``
    (x not nullable). Returns the grammar and how many repetitions were rewritten."""
    nullable = nullable_rules(g)
    taken = set(g.names)
    made: dict[Expr, str] = {}
    new_rules: list[Rule] = []
    count = 0

    def star_rule(item: Expr, owner: str) -> str:
        if item not in made:
            name, k = f"{owner}-star", 1
            while name in taken:
                k += 1
                name = f"{owner}-star-{k}"
            taken.add(name)
            made[item] = name
            new_rules.append(Rule(name, Alt((Epsilon(), Seq((item, Ref(name)))))))
        return made[item]

    def lift(owner: str):
        def fn(e: Expr) -> Expr:
            nonlocal count
            if not isinstance(e, Repeat) or nullable_expr(e.item, nullable):
                return e
            if e.max is None and e.min in (0, 1):
                count += 1
                r = Ref(star_rule(e.item, owner))
                return r if e.min == 0 else Seq((e.item, r))
            if e.min == 0 and e.max == 1:
                count += 1
                return Alt((Epsilon(), e.item))
            return e
        return fn

    rules = []
    for r in g.rules:
        b = r.body
        if isinstance(b, Repeat) and b.max is None and b.min == 0 and not nullable_expr(b.item, nullable):
            # a rule that is one star is its own star rule: R ::= "" | x R
            count += 1
            rules.append(replace(r, body=Alt((Epsilon(), Seq((transform(b.item, lift(r.name)), Ref(r.name)))))))
        else:
            rules.append(replace(r, body=transform(b, lift(r.name))))
    if not count:
        return g, 0
    return replace(g, rules=tuple(rules) + tuple(new_rules)), count


def _sort_alternatives(g: Grammar) -> tuple[Grammar, int]:
    """Every alternation stably sorted by FIRST width, nullable alternatives first."""
    nullable = nullable_rules(g)
    firsts = first_sets(g, nullable)
    rule_ranges = {n: set(f.ranges) for n, f in firsts.items()}
    changed = 0

    def key(e: Expr) -> int:
        if nullable_expr(e, nullable):
            return -1
        ranges: set = set()
        first_of_expr(e, False, nullable, rule_ranges, {}, ranges, set())
        covered = 0
        for lo, hi in _merge(ranges):
            covered += hi - lo + 1
        return min(covered, WIDEST)

    def order(e: Expr) -> Expr:
        nonlocal changed
        if not isinstance(e, Alt):
            return e
        keys = [key(i) for i in e.items]
        ordered = tuple(item for _, _, item in sorted(zip(keys, range(len(keys)), e.items)))
        if ordered == e.items:
            return e
        changed += 1
        return Alt(ordered)

    rules = tuple(replace(r, body=transform(r.body, order)) for r in g.rules)
    return (replace(g, rules=rules), changed) if changed else (g, 0)


def _merge(ranges) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return [(lo, hi) for lo, hi in out]


def fixup(g: Grammar, notes: list, fired: dict) -> Grammar:
    """The llama.cpp target's fix-up (``Target.fixups``)."""
    return order_for_llamacpp(g, notes, fired)


__all__ = ["fixup", "order_for_llamacpp"]
