"""Warnings for structurally ambiguous forms that make parse forests grow.

Each form below has at least two derivations for some string whenever the rule is
reachable and productive, so each finding is a real ambiguity (except ``overlap``, which
only says two alternatives can begin alike: a cost for engines that must keep both open):

  self-concat      X → X X            "aaa" splits as (aa)a and a(aa): Catalan-many trees
  binary-operator  E → E op E         E op E op E associates both ways
  duplicate        A → α | α          the same string through either alternative
  nullable-alts    A → α | β, α, β ⇒* ε  two derivations of ε
  nullable-repeat  (x?)*, (y*)+       ε repeated any number of times
  overlap          A → α | β with FIRST(α) ∩ FIRST(β) ≠ ∅
"""

from __future__ import annotations

from dataclasses import dataclass

from .analysis import FirstSet, first_of_expr, first_sets, nullable_expr, nullable_rules
from .expr import Alt, Expr, Ref, Repeat, Seq, walk
from .grammar import Grammar, Rule
from .dialects import token_atoms


@dataclass(frozen=True)
class Finding:
    kind: str
    rule: str
    line: int | None
    message: str


def ambiguity_findings(grammar: Grammar) -> list[Finding]:
    nullable = nullable_rules(grammar)
    firsts = _Firsts(grammar, nullable, first_sets(grammar, nullable))
    out: list[Finding] = []
    for rule in grammar.rules:
        out.extend(_rule_findings(rule, grammar, nullable, firsts))
    return out


class _Firsts:
    """The FIRST sets of a grammar's rules, split once into the two maps ``first_of_expr``
    reads (building them per alternative made the findings quadratic in the rules)."""

    def __init__(self, grammar: Grammar, nullable: set[str], firsts: dict[str, FirstSet]):
        self.lark = token_atoms(grammar.dialect)
        self.nullable = nullable
        self.ranges = {n: f.ranges for n, f in firsts.items()}
        self.atoms = {n: f.atoms for n, f in firsts.items()}

    def of(self, e: Expr) -> FirstSet:
        ranges: set = set()
        atoms: set = set()
        first_of_expr(e, self.lark, self.nullable, self.ranges, self.atoms, ranges, atoms)
        return FirstSet(tuple(sorted(ranges)), frozenset(atoms))


def self_concatenations(grammar: Grammar) -> list[str]:
    """The rules with an alternative X → X X … (only X, twice or more), or X → α X* / α X+
    (X repeated at its own end, X → X X once left recursion is removed: with X = α X*, α α α
    is α·(α)(α) and α·(α α)): Catalan-many parse trees, and in xgrammar (0.2.8) a mask time
    that grows with every byte read (0.6 ms at the start, 0.5 s after 30 letters:
    ``judge.masks``)."""
    return [r.name for r in grammar.rules if any(_self_concat(a, r.name) for a in _alternatives(r.body))]


def _self_concat(alt: Expr, name: str) -> bool:
    items = alt.items if isinstance(alt, Seq) else (alt,)
    if len(items) >= 2 and all(i == Ref(name) for i in items):
        return True
    last = items[-1]
    return isinstance(last, Repeat) and last.item == Ref(name) and (last.max is None or last.max >= 2)


def _alternatives(e: Expr) -> tuple[Expr, ...]:
    return e.items if isinstance(e, Alt) else (e,)


def _rule_findings(rule: Rule, grammar: Grammar, nullable: set[str], firsts: _Firsts) -> list[Finding]:
    line = rule.pos.line if rule.pos else None
    name = rule.name
    out: list[Finding] = []

    def add(kind: str, message: str) -> None:
        out.append(Finding(kind, name, line, message))

    alts = _alternatives(rule.body)
    for alt in alts:
        items = alt.items if isinstance(alt, Seq) else (alt,)
        if _self_concat(alt, name):
            shown = " ".join([name] * len(items)) if isinstance(items[-1], Ref) else f"… ({name})*"
            add("self-concat", f"{name} → {shown}: ambiguous "
                               f"concatenation (Θ(t²) new forest nodes per symbol)")
        elif len(items) >= 3 and items[0] == Ref(name) and items[-1] == Ref(name):
            add("binary-operator", f"{name} → {name} … {name}: ambiguous binary operator "
                                   f"(no precedence or associativity)")
    seen: dict[Expr, int] = {}
    for k, alt in enumerate(alts, 1):
        if alt in seen:
            add("duplicate", f"alternatives {seen[alt]} and {k} are identical")
        else:
            seen[alt] = k
    null_alts = [k for k, a in enumerate(alts, 1) if nullable_expr(a, nullable)]
    if len(null_alts) >= 2:
        add("nullable-alts", f"alternatives {null_alts[0]} and {null_alts[1]} both derive the "
                             f"empty string")
    for node in walk(rule.body):
        if isinstance(node, Repeat) and (node.max is None or node.max > 1) \
                and nullable_expr(node.item, nullable):
            add("nullable-repeat", "a repetition of something that derives the empty string "
                                   "(ε can repeat any number of times)")
            break
    if len(alts) >= 2:
        fs = [firsts.of(a) for a in alts]
        for i in range(len(alts)):
            for j in range(i + 1, len(alts)):
                common = _intersect(fs[i], fs[j])
                if common:
                    add("overlap", f"alternatives {i + 1} and {j + 1} can both begin with {common}")
                    break
            else:
                continue
            break
    return out


def _intersect(a: FirstSet, b: FirstSet) -> str:
    """A short description of what both FIRST sets contain, or '' when disjoint."""
    for lo1, hi1 in a.ranges:
        for lo2, hi2 in b.ranges:
            lo, hi = max(lo1, lo2), min(hi1, hi2)
            if lo <= hi:
                return repr(chr(lo)) if lo == hi else f"{chr(lo)!r}..{chr(hi)!r}"
    common = a.atoms & b.atoms
    if common:
        atom = sorted(common, key=repr)[0]
        return getattr(atom, "name", None) or repr(getattr(atom, "text", None) or atom)
    return ""
