"""FOLLOW sets over the byte-level IR (GBNF / xgrammar EBNF), in code points.

    follow_sets(grammar) -> {rule: Follow}

``Follow(ranges, end)``: the code points that can come right after a complete string of the
rule in some sentence of the grammar (sorted, disjoint inclusive ranges), and ``end`` when the
end of input can come right after it. Formally, with ⊣ the end marker, FOLLOW(A) is the least
family of sets with

    ⊣ ∈ FOLLOW(start)
    for every occurrence of A in a body of B, with x the rest of the sentential form after A
    inside that body:  FIRST(x) ⊆ FOLLOW(A), and FOLLOW(B) ⊆ FOLLOW(A) when x ⇒* ε

(for ``y*`` / ``y{m,n}`` with n > 1 the rest after ``y`` may be another ``y``). Only reachable
occurrences matter for a sentence, but FOLLOW here is computed over every rule, so it can
only be larger than the exact set: every code point that really follows A is in it (the
soundness the lookahead inference needs), possibly a few that do not.

Literal's first code point and character classes give FIRST (``analysis.first_sets``). Lark
atoms (terminals, regexps) are not code points: the Lark dialect is out of scope here, and
``follow_sets`` raises ``ValueError`` on a grammar that has them.
"""

from __future__ import annotations

from dataclasses import dataclass

from .analysis import first_of_expr, first_sets, nullable_expr, nullable_rules
from .expr import MAX_CODE_POINT, Alt, Expr, Ref, Regex, Repeat, Seq, Terminal, normalize_ranges, walk
from .grammar import Grammar


@dataclass(frozen=True)
class Follow:
    ranges: tuple[tuple[int, int], ...] = ()
    end: bool = False

    def covers_everything(self) -> bool:
        """Every code point can follow (a lookahead could reject nothing)."""
        return self.ranges == ((0, MAX_CODE_POINT),)


def follow_sets(grammar: Grammar) -> dict[str, Follow]:
    """FOLLOW of every rule of ``grammar`` (least fixpoint; see the module docstring)."""
    for r in grammar.rules:
        if any(isinstance(n, (Terminal, Regex)) for n in walk(r.body)):
            raise ValueError(f"rule '{r.name}' has Lark atoms: FOLLOW here is over code points only")
    nullable = nullable_rules(grammar)
    firsts = first_sets(grammar, nullable)
    first_ranges = {n: set(f.ranges) for n, f in firsts.items()}
    ranges: dict[str, set[tuple[int, int]]] = {r.name: set() for r in grammar.rules}
    end: dict[str, bool] = {r.name: False for r in grammar.rules}
    if grammar.start in end:
        end[grammar.start] = True
    # what follows each occurrence is a set fixed by the grammar, plus (when the rest of its
    # body is nullable) whatever follows the rule it is in: computed once, not every round
    occurrences = []
    for r in grammar.rules:
        found: list[tuple[str, frozenset, bool]] = []
        _occurrences(r.body, frozenset(), True, nullable, first_ranges, found)
        occurrences.append((r.name, [o for o in found if o[0] in ranges]))  # undefined: Grammar.check's
    changed = True
    while changed:
        changed = False
        for rule, found in occurrences:
            for name, fixed, transparent in found:
                rs = fixed | ranges[rule] if transparent else fixed
                e = transparent and end[rule]
                if not rs <= ranges[name] or (e and not end[name]):
                    ranges[name] |= rs
                    end[name] = end[name] or e
                    changed = True
    return {n: Follow(normalize_ranges(ranges[n]) if ranges[n] else (), end[n]) for n in ranges}


def _first(e: Expr, nullable: set[str], first_ranges) -> frozenset:
    out: set = set()
    first_of_expr(e, False, nullable, first_ranges, {}, out, set())
    return frozenset(out)


def _occurrences(e: Expr, after: frozenset, after_end: bool, nullable, first_ranges,
                 found: list) -> None:
    """Append (rule, code-point ranges, end) for every reference in ``e``, where ``after`` /
    ``after_end`` is what can follow ``e`` itself. Called with ``after`` empty and
    ``after_end`` True, ``end`` says whether what follows ``e`` can follow the reference
    (the rest of the body after it is nullable): the rule's FOLLOW then joins the ranges.
    Iterative (what follows a node is handed down, nothing comes back up): llama.cpp's
    converter nests bounded repetitions thousands deep."""
    stack = [(e, after, after_end)]
    while stack:
        e, after, after_end = stack.pop()
        if isinstance(e, Ref):
            found.append((e.name, after, after_end))
        elif isinstance(e, Seq):
            rs, en = after, after_end
            for item in reversed(e.items):  # right to left: what follows item i is FIRST(rest) ∪ …
                stack.append((item, rs, en))
                f = _first(item, nullable, first_ranges)
                if nullable_expr(item, nullable):
                    rs, en = rs | f, en
                else:
                    rs, en = f, False
        elif isinstance(e, Alt):
            stack.extend((item, after, after_end) for item in e.items)
        elif isinstance(e, Repeat):
            if e.max == 0:
                continue
            if e.max is None or e.max > 1:  # one copy of the item may follow another
                after = after | _first(e.item, nullable, first_ranges)
            stack.append((e.item, after, after_end))
