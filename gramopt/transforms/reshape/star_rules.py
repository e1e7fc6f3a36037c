"""Repetitions made rules in the shapes xgrammar's mask cache decides well."""

from __future__ import annotations

from dataclasses import replace

from ...grammar import Alt, CharClass, Epsilon, Expr, Grammar, Literal, Ref, Repeat, Rule, Seq, alt, refs, seq, transform
from ...grammar.analysis import reachable_rules
from .common import _alternatives, _fresh
from .inclusion import _closed_under_concat, _star_item


MAX_CHAIN = 32  # a{m,k} of an alternation becomes k rules up to this k


def lift_star_alternations(g: Grammar) -> tuple[Grammar, list[str]]:
    """Repetitions in the shapes xgrammar decides well; returns the grammar and the (first)
    new rule of each repetition made a rule (new rules follow the first rule using them).
    Each rewrite keeps the language:

    * ``(a₁|…|aₙ)* t``, t a literal or class, → ``U ::= t | a₁ U | … | aₙ U``: U = A*·t is the
      least solution of U = t ∪ A·U. The rule ends after t, not after every item, and its
      FOLLOW is what comes after t: llama.cpp's string ``"\"" (c | "\\" e)* "\""`` becomes
      xgrammar's own ``S ::= "\"" | c S | "\\" e S``. A reference to a star rule counts too.
    * a rule ``R ::= (a₁|…|aₙ)* x₁ … xₖ`` (the star, or a star rule, heading its whole body;
      the item may be a sequence) becomes the star itself, ``R ::= x₁ … xₖ | a₁ R | … | aₙ R``:
      R = A*·X is the least solution of R = X ∪ A·R. R still ends where it ended, after its
      whole rest, so an assertion on R (a user's ``(= [ \t\n]* ":")``-style one, or FOLLOW's)
      is read at the same place. Why: the e-graph factors xgrammar's built-in JSON's four
      string rules into one shared star ``T`` followed by each rule's stop; the until-rule
      above would then end at the closing quote for all four callers, with a FOLLOW class
      (the union of ``:``, ``,``, ``}``, ``]``, whitespace) weaker than each rule's own
      assertion — 4× slower masks than the hand-written grammar (0.25×; 0.95× as R). A star
      rule left with no reference is dropped (it derives no sentence of the start rule).
    * ``(a₁|…|aₙ)*`` → ``S ::= "" | a₁ S | … | aₙ S`` (least solution of S = ε ∪ A·S is A*);
      ``(…)+`` → ``P ::= a₁ P | … | aₙ P | a₁ | … | aₙ`` (A⁺); a rule that *is* such a star is
      rewritten in place. xgrammar itself would lower the group into a one-character helper
      rule whose end is inside nearly every token.
    * ``x{m,k}`` (2 ≤ k ≤ MAX_CHAIN) of an alternation or a sequence → a chain ``Rᵢ ::= x Rᵢ₊₁``
      with ``""`` as one more alternative once i ≥ m (R_k = ε): Rᵢ derives x^j for exactly
      max(m−i, 0) ≤ j ≤ k−i. xgrammar unrolls the same chain but without assertions:
      ``(name "."){0,2}`` in a SQL grammar leaves 6,000 tokens like ``a.b`` uncertain, 49 once
      the chain rules carry FOLLOW assertions.
    * ``X*`` / ``X+`` / ``X{m,k}`` with ``X ::= a₁ | … | aₙ`` using no rule: X's body in place of
      the reference (substitution keeps the language), then as above.
    * ``c+`` of one class → ``c c*``: xgrammar keeps a class's star in its automaton but lowers
      a plus into a helper ``X ::= c X | c`` ending after every character (`` x`` undecided
      after ``"=" [ \t]+``).
    * inside a starred alternation ``a+`` (or a rule with language a⁺) → ``a``: (A⁺ ∪ B)* =
      (A ∪ B)* since A ⊆ A⁺ ⊆ (A ∪ B)*; and ``U+`` → ``U``, ``U*`` → ``U?`` when U·U ⊆ U
      (``_closed_under_concat``): U⁺ = U then. Both remove ambiguity — the ways to split a run
      of U's — that an Earley engine pays for at every step (SMILES: 100-260× faster)."""
    taken = set(g.names)
    hint = lambda r: not r.pinned  # noqa: E731 - an engine's own form is never read through
    leaves = {r.name: r.body for r in g.rules
              if hint(r) and not refs(r.body) and isinstance(r.body, (Alt, CharClass, Literal))}
    bodies = {r.name: r.body for r in g.rules if not r.pinned}
    plus_rules = {r.name: e for r in g.rules if hint(r) and r.name != g.start
                  for e in [_plus_item(r.body, bodies)] if e is not None}
    made: dict[Repeat, str] = {}
    new_rules: dict[str, list[Rule]] = {}

    def lift(owner: str):
        def fn(e: Expr) -> Expr:
            if _is_char_plus(e):  # [ \t]+ as [ \t] [ \t]*: xgrammar keeps a star of a class in
                return seq(*[e.item] * e.min, Repeat(e.item, 0, None))  # its automaton, a plus it makes a rule
            if isinstance(e, Repeat) and e.min <= 1 and e.max is None and _closed_under_concat(e.item, bodies):
                return e.item if e.min == 1 else Repeat(e.item, 0, 1)  # U+ is U, U* is U?, when U·U ⊆ U
            if not (isinstance(e, Repeat) and (e.min <= 1 if e.max is None else 2 <= e.max <= MAX_CHAIN)):
                return e
            e = _unfold(e, leaves, plus_rules)
            if not (isinstance(e.item, Alt) or (e.max is not None and isinstance(e.item, Seq))):
                return e
            if e in made:
                return Ref(made[e])
            if e.max is None:
                name = _fresh(f"{owner}_{'star' if e.min == 0 else 'plus'}", taken)
                new_rules.setdefault(owner, []).append(Rule(name, _star_rule_body(e, Ref(name))))
            else:  # a{m,k}: R_i ::= a R_{i+1} (| "" once i ≥ m), R_{k-1} ::= a (| "")
                names = [_fresh(f"{owner}_rep", taken) for _ in range(e.max)]
                for i, name in enumerate(names):
                    nxt = [Ref(names[i + 1])] if i + 1 < e.max else []
                    steps = [seq(a, *nxt) for a in _alternatives(e.item)]
                    body = alt(Epsilon(), *steps) if i >= e.min else alt(*steps)
                    new_rules.setdefault(owner, []).append(Rule(name, body))
                name = names[0]
            made[e] = name
            return Ref(name)
        return fn

    until: dict[tuple, str] = {}

    def star_of_alt(e: Expr) -> Repeat | None:
        if isinstance(e, Ref) and e.name != g.start and _star_item(e.name, bodies) is not None:
            e = Repeat(_star_item(e.name, bodies), 0, None)  # a star rule: its body in its place
        e = _unfold(e, leaves, plus_rules)
        return e if isinstance(e, Repeat) and (e.min, e.max) == (0, None) and isinstance(e.item, Alt) else None

    def star_of_group(e: Expr) -> Repeat | None:
        if isinstance(e, Ref) and e.name != g.start and _star_item(e.name, bodies) is not None:
            e = Repeat(_star_item(e.name, bodies), 0, None)
        e = _unfold(e, leaves, plus_rules)
        return e if isinstance(e, Repeat) and (e.min, e.max) == (0, None) and isinstance(e.item, (Alt, Seq)) else None

    def until_body(star: Repeat, stop: Expr, me: Ref, owner: str) -> Expr:
        return alt(stop, *(seq(transform(a, lift(owner)), me) for a in _alternatives(star.item)))

    def absorb(owner: str):
        def fn(e: Expr) -> Expr:  # (a|b)* t  →  U, U ::= t | a U | b U
            if not isinstance(e, Seq):
                return e
            out, i = [], 0
            while i < len(e.items):
                star = star_of_alt(e.items[i])
                stop = e.items[i + 1] if i + 1 < len(e.items) else None
                if star is not None and isinstance(stop, (Literal, CharClass)):
                    key = (star, stop)
                    if key not in until:
                        until[key] = _fresh(f"{owner}_until", taken)
                        new_rules.setdefault(owner, []).append(
                            Rule(until[key], until_body(star, stop, Ref(until[key]), owner)))
                    out.append(Ref(until[key]))
                    i += 2
                else:
                    out.append(e.items[i])
                    i += 1
            return seq(*out) if len(out) != len(e.items) else e
        return fn

    rules, changed = [], False
    for r in g.rules:
        if r.pinned:  # kept as written (Rule.pinned)
            rules.append(r)
            rules.extend(new_rules.get(r.name, []))
            continue
        star_steps = _star_item(r.name, bodies)
        if star_steps is not None and isinstance(r.body, Alt):  # a star rule "" | a S | b+ S: as (a | b) S
            flat = [_plus_body(a, plus_rules) for a in _alternatives(star_steps)]
            if flat != list(_alternatives(star_steps)):
                r = replace(r, body=_star_rule_body(Repeat(alt(*flat), 0, None), Ref(r.name)))
        top = r.body if r.name == g.start else _unfold(r.body, leaves, plus_rules)
        head = star_of_group(top.items[0]) if isinstance(top, Seq) and r.name != g.start else None
        if head is not None:  # the rule is the star and the rest of its sequence
            rest = transform(transform(seq(*top.items[1:]), absorb(r.name)), lift(r.name))
            body = until_body(head, rest, Ref(r.name), r.name)
        elif isinstance(top, Repeat) and top.max is None and top.min <= 1 and isinstance(top.item, (Alt, Seq)):
            inner = alt(*(transform(a, lift(r.name)) for a in _alternatives(top.item)))
            body = _star_rule_body(Repeat(inner, top.min, None), Ref(r.name))  # the rule is the star
        else:
            body = transform(transform(r.body, absorb(r.name)), lift(r.name))
        changed = changed or body != r.body
        rules.append(replace(r, body=body) if body != r.body else r)
        rules.extend(new_rules.get(r.name, []))
    if not changed:
        return g, []
    out = g.replace_rules(rules)
    reachable = set(reachable_rules(g))  # a star rule whose every user became the star itself
    orphans = reachable - set(reachable_rules(out))  # is no longer reachable: dropped (it derives
    if orphans:                                      # no sentence of the start rule)
        out = out.replace_rules([r for r in out.rules if r.name not in orphans])
    return out, list(made.values()) + list(until.values())


def _star_rule_body(e: Repeat, me: Ref) -> Expr:
    """The body of a rule ``me`` equal to ``e`` = ``(a₁|…|aₙ)*`` or ``(a₁|…|aₙ)+``."""
    steps = [seq(a, me) for a in _alternatives(e.item)]
    return alt(Epsilon(), *steps) if e.min == 0 else alt(*steps, *_alternatives(e.item))


def _unfold(e: Expr, leaves: dict[str, Expr], plus_rules: dict[str, Expr]) -> Expr:
    """A repetition with a leaf rule's body in place of a reference to it, and, for an
    unbounded one over an alternation, ``a`` in place of each ``a+`` alternative."""
    if not isinstance(e, Repeat):
        return e
    if isinstance(e.item, Ref) and e.item.name in leaves:
        e = Repeat(leaves[e.item.name], e.min, e.max)
    if e.max is None and isinstance(e.item, Alt):  # (a+ | b)* is (a | b)*
        e = Repeat(alt(*(_plus_body(a, plus_rules) for a in e.item.items)), e.min, None)
    return e


def _plus_item(body: Expr, bodies: dict[str, Expr]) -> Expr | None:
    """E when ``body`` is E⁺: ``E+``, ``E E*``, or ``e₁ S | … | eₙ S`` with S a rule (e₁|…|eₙ)*
    (the shape the e-graph gives a plus over an alternation)."""
    if isinstance(body, Repeat) and (body.min, body.max) == (1, None):
        return body.item
    if isinstance(body, Seq) and len(body.items) == 2 and body.items[1] == Repeat(body.items[0], 0, None):
        return body.items[0]
    alts = body.items if isinstance(body, Alt) else (body,)
    if all(isinstance(a, Seq) and isinstance(a.items[-1], Ref) for a in alts):
        tail = alts[0].items[-1]
        heads = [seq(*a.items[:-1]) for a in alts]
        star = _star_item(tail.name, bodies) if all(a.items[-1] == tail for a in alts) else None
        if star is not None and set(_alternatives(star)) == set(heads):
            return alt(*heads)
    return None


def _plus_body(e: Expr, plus_rules: dict[str, Expr]) -> Expr:
    """``a`` for ``a+`` and for a reference to a rule X with L(X) = a⁺; anything else as it is."""
    if isinstance(e, Ref) and e.name in plus_rules:
        return plus_rules[e.name]
    if isinstance(e, Repeat) and (e.min, e.max) == (1, None):
        return e.item
    return e


def _is_char_plus(e: Expr) -> bool:
    """``c+`` (up to ``c{4,}``) of one character class or one-character literal."""
    return (isinstance(e, Repeat) and e.max is None and 1 <= e.min <= 4
            and (isinstance(e.item, CharClass) or (isinstance(e.item, Literal) and len(e.item.text) == 1)))
