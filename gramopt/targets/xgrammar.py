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

``fixup`` runs, all steps language-preserving (each function states its argument):

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

from dataclasses import replace

from ..grammar import (Alt, CharClass, Epsilon, Expr, Grammar, Literal, Ref, Regex, Repeat, Rule, Seq, Terminal,
                       alt, refs, rename_refs, seq, transform, walk)
from ..grammar.analysis import nullable_expr, nullable_rules, reachable_rules
from .follow import follow_sets


def fixup(g: Grammar, notes: list[str] | None = None, fired: dict | None = None) -> Grammar:
    """The xgrammar target pass (see the module docstring). ``notes`` / ``fired`` collect
    what it did, for the pass report."""
    notes = [] if notes is None else notes
    fired = {} if fired is None else fired
    if _has_lark_atoms(g):  # Lark terminals are not code points: only the root fix-up applies
        g, wrapped = wrap_referenced_root(g)
        _count(fired, notes, "xgrammar-root-wrapper", [wrapped] if wrapped else [], "root delegates to")
        return g
    for _ in range(16):  # each step can open the way for another (an inlined ws makes its
        start = g        # caller small and regular): to a fixpoint, so the pass is idempotent
        g, names = remove_left_recursion(g)
        _count(fired, notes, "xgrammar-left-recursion", names, "left recursion as a star in")
        g, names = inline_small_regular_rules(g)
        _count(fired, notes, "xgrammar-inline", names, "inlined")
        g, names = lift_star_alternations(g)
        _count(fired, notes, "xgrammar-star-rule", names, "repetitions made rules:")
        g, wrapped = wrap_referenced_root(g)  # in the loop: the new rule may be small enough to inline
        _count(fired, notes, "xgrammar-root-wrapper", [wrapped] if wrapped else [], "root delegates to")
        if g == start:
            break
    g, n = infer_lookaheads(g)
    if n:
        fired["xgrammar-lookahead"] = n
        notes.append(f"xgrammar: {n} lookahead assertion(s) from FOLLOW sets")
    return g


# ---------------------------------------------------------------- repetitions


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
    hint = lambda r: r.lookahead is None or isinstance(r.lookahead, CharClass)  # noqa: E731 - inferred
    leaves = {r.name: r.body for r in g.rules
              if hint(r) and not refs(r.body) and isinstance(r.body, (Alt, CharClass, Literal))}
    bodies = g.bodies()
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


# ---------------------------------------------------------------- small rules inline

MAX_CHAIN = 32  # a{m,k} of an alternation becomes k rules up to this k
SMALL = 8  # expression nodes: [ \t\n]* is 2, "\"" [^"]* "\"" is 4
SMALL_ALT = 12  # ("int" | "float" | "char") [ \t\n]+ is 7


def inline_small_regular_rules(g: Grammar) -> tuple[Grammar, list[str]]:
    """Substitute the body of a small rule that uses no rule for references to it; a rule
    with no reference left is dropped. Argument: replacing a reference by the referenced
    rule's body keeps the language.

    Without an alternation (``ws ::= [ \t\n]*``) the body goes to every reference. Why: a
    shared ``ws`` rule ends wherever any of its callers continues, so its FOLLOW (and any
    assertion) is the union of every caller's next character, and a token like `` x`` stays
    undecided at every ``ws`` position; inline, the star is part of its caller's automaton,
    which knows what comes next. With an alternation (``dataType ::= ("int" | "char") ws``)
    the body goes only where something follows the reference in its sequence: xgrammar lifts
    the group into a helper rule used once and not last, for which it derives an exact
    assertion (the rest of the sequence) that decides ``int x`` inside the cache; at the end of
    a sequence the helper would get no assertion, so there the rule (with its FOLLOW
    assertion) stays. Never inlined: the start rule, rules named in an assertion, and rules
    with a sequence assertion (written by a user)."""
    pinned = {n for r in g.rules if r.lookahead is not None for n in refs(r.lookahead)}
    small, inner = {}, {}
    for r in g.rules:
        if (r.name == g.start or r.name in pinned or refs(r.body)
                or not (r.lookahead is None or isinstance(r.lookahead, CharClass))):
            continue
        size = sum(1 for _ in walk(r.body))
        if not any(isinstance(x, Alt) for x in walk(r.body)):
            if size <= SMALL:
                small[r.name] = r.body
        elif size <= SMALL_ALT:
            inner[r.name] = r.body
    if not small and not inner:
        return g, []

    def sub(e: Expr) -> Expr:
        if isinstance(e, Ref):
            return small.get(e.name, e)
        if isinstance(e, Seq) and inner:
            items = [inner[x.name] if isinstance(x, Ref) and x.name in inner and i < len(e.items) - 1 else x
                     for i, x in enumerate(e.items)]
            return seq(*items) if items != list(e.items) else e
        return e

    bodies = {r.name: transform(r.body, sub) for r in g.rules if r.name not in small}
    used = {n for b in bodies.values() for n in refs(b)} | pinned | {g.start}
    done = [n for n in g.names if n in small or (n in inner and _uses(bodies.values(), n) < _uses(g.bodies().values(), n))]
    if not done:
        return g, []
    rules = [replace(r, body=bodies[r.name]) for r in g.rules
             if r.name in bodies and not (r.name in inner and r.name not in used)]
    return g.replace_rules(rules), done


def _uses(bodies, name: str) -> int:
    return sum(1 for b in bodies for x in walk(b) if isinstance(x, Ref) and x.name == name)


# ---------------------------------------------------------------- direct left recursion


def remove_left_recursion(g: Grammar) -> tuple[Grammar, list[str]]:
    """``A ::= A α₁ | … | A αₘ | β₁ | … | βₖ`` becomes ``A ::= β₁ (α₁|…|αₘ)* | … | βₖ
    (α₁|…|αₘ)*`` (a leading ``(A x)? y`` counts as ``A x y | y``). Argument: L(A) is the least
    solution of A = A·α ∪ β, which is β·α* (the classic removal of immediate left recursion,
    A → β A′, A′ → α A′ | ε, with A′ written as a star). Rules where some αᵢ is nullable (an
    unguarded or ambiguous loop) or no βⱼ exists are left alone. Returns the grammar and the
    rules changed. xgrammar parses a left-recursive rule by re-completing it at every item,
    and its mask cache sees the rule's end after every item; the star form has neither."""
    nullable = nullable_rules(g)
    changed: list[str] = []
    rules = []
    for r in g.rules:
        alts = [x for a in _alternatives(r.body) for x in _split_leading_optional(a, r.name)]
        rec = [_after_left_ref(a, r.name) for a in alts]
        alphas = [x for x in rec if x is not None]
        betas = [a for a, x in zip(alts, rec) if x is None]
        if not alphas or not betas or any(nullable_expr(x, nullable) for x in alphas):
            rules.append(r)
            continue
        star = Repeat(alt(*alphas), 0, None)
        rules.append(replace(r, body=alt(*(seq(b, star) for b in betas))))
        changed.append(r.name)
    return (g.replace_rules(rules), changed) if changed else (g, [])


def _alternatives(e: Expr) -> tuple[Expr, ...]:
    return e.items if isinstance(e, Alt) else (e,)


def _after_left_ref(e: Expr, name: str) -> Expr | None:
    """α when ``e`` is ``name α`` (ε when ``e`` is just ``name``), else None."""
    if e == Ref(name):
        return Epsilon()
    if isinstance(e, Seq) and e.items[0] == Ref(name):
        return seq(*e.items[1:])
    return None


def _split_leading_optional(e: Expr, name: str) -> tuple[Expr, ...]:
    """``(name x)? y`` as the two alternatives ``name x y`` and ``y`` (same language); any
    other expression as itself."""
    if isinstance(e, Seq) and isinstance(e.items[0], Repeat) and (e.items[0].min, e.items[0].max) == (0, 1):
        inner = e.items[0].item
        if _after_left_ref(inner, name) is not None:
            return (seq(inner, *e.items[1:]), seq(*e.items[1:]))
    return (e,)


# ---------------------------------------------------------------- lookahead assertions


def infer_lookaheads(g: Grammar) -> tuple[Grammar, int]:
    """Set ``(= [F])``, F = FOLLOW's code points, on every non-start rule whose assertion is
    absent or a character class, when F is non-empty ASCII; returns the grammar and how many
    assertions changed.

    ASCII only: xgrammar *accepts without re-checking* a token whose rest is consumed by an
    assertion it deems exact (a rule used once, not last) without completing it. A non-empty
    rest against one ASCII class either matches its first byte (the assertion completes: the
    token stays uncertain and is re-checked) or fails, so that case never arises; against a
    class with multi-byte code points a rest cut inside a code point would be accepted on
    the strength of F, a union over all of R's contexts, not this one's.

    A character-class assertion already there is *recomputed*, not kept: an earlier round
    may have inferred it for a grammar whose FOLLOW sets the later rewrites changed (a rule
    merged with an equal one used elsewhere), and a stale class narrower than FOLLOW would
    reject allowed tokens. Where no class is inferred, a class already there is kept only if
    it covers F; where F is empty (the rule ends only at the end of input) any assertion is
    sound and the one there is kept. Sequence assertions (written by a user, as
    in xgrammar's built-in JSON) are kept as written; gramopt reads every assertion as a hint
    (ε), so replacing a user's class by FOLLOW keeps the language."""
    follows = follow_sets(g)
    n = 0
    rules = []
    for r in g.rules:
        f = follows.get(r.name)
        la = r.lookahead
        if r.name == g.start or f is None or not (la is None or isinstance(la, CharClass)) or not f.ranges:
            rules.append(r)
            continue
        if f.covers_everything() or f.ranges[-1][1] > 0x7F:
            new = la if la is not None and _covers(la.code_points(), f.ranges) else None
        else:
            new = CharClass(f.ranges)
        if new != la:
            r = replace(r, lookahead=new)
            n += 1
        rules.append(r)
    return (g.replace_rules(rules), n) if n else (g, 0)


# ---------------------------------------------------------------- a referenced root


def wrap_referenced_root(g: Grammar) -> tuple[Grammar, str | None]:
    """A start rule that some rule references (itself included) delegates to a fresh rule
    holding its body, and every reference to it points there; returns (grammar, the new
    rule's name or None when nothing changed)."""
    root = g.rule(g.start)
    if not any(g.start in refs(r.body) for r in g.rules):
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


# ---------------------------------------------------------------- syntactic language facts
# All conservative: True / an expression only when the fact holds for every grammar with these
# rules; False / None when unsure.


def _star_item(name: str, bodies: dict[str, Expr]) -> Expr | None:
    """T when rule ``name`` is ``T*``: written so, or as ``"" | t₁ name | … | tₙ name``."""
    body = bodies.get(name)
    if isinstance(body, Repeat) and (body.min, body.max) == (0, None):
        return body.item
    if isinstance(body, Alt) and Epsilon() in body.items:
        steps = [a for a in body.items if a != Epsilon()]
        if steps and all(isinstance(a, Seq) and a.items[-1] == Ref(name) for a in steps):
            return alt(*(seq(*a.items[:-1]) for a in steps))
    return None


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


def _closed_under_concat(u: Expr, bodies: dict[str, Expr]) -> bool:
    """L(u)·L(u) ⊆ L(u), shown as u = P·T*·Q with Q·P ⊆ T: then u·u = P T* (Q P) T* Q ⊆
    P T* T T* Q ⊆ P T* Q (Q may be empty). References are unfolded (a rule's body put in its
    place, at most three times) to find the star."""
    items = _items(u)
    for _ in range(4):
        k = next((i for i, x in enumerate(items) if i > 0 and _star_of(x, bodies) is not None), None)
        if k is not None:
            return _subsumed(seq(*items[k + 1:], *items[:k]), _star_of(items[k], bodies), bodies, 3)
        j = next((i for i, x in enumerate(items) if isinstance(x, Ref) and x.name in bodies
                  and isinstance(bodies[x.name], Seq)), None)
        if j is None:
            return False
        items = items[:j] + list(bodies[items[j].name].items) + items[j + 1:]
    return False


def _star_of(e: Expr, bodies: dict[str, Expr]) -> Expr | None:
    """T when ``e`` is ``T*`` or a reference to a rule that is T*."""
    if isinstance(e, Repeat) and (e.min, e.max) == (0, None):
        return e.item
    return _star_item(e.name, bodies) if isinstance(e, Ref) else None


def _nullable(e: Expr, bodies: dict[str, Expr]) -> bool:
    """ε ∈ L(e), shown without a fixpoint: a star, an optional, ε, or a star rule."""
    if isinstance(e, Epsilon) or (isinstance(e, Repeat) and e.min == 0):
        return True
    if isinstance(e, Alt):
        return any(_nullable(a, bodies) for a in e.items)
    return isinstance(e, Ref) and _star_item(e.name, bodies) is not None


def _items(e: Expr) -> list[Expr]:
    return list(e.items) if isinstance(e, Seq) else [e]


def _subsumed(x: Expr, y: Expr, bodies: dict[str, Expr], depth: int) -> bool:
    """L(x) ⊆ L(y), by structure (False when unsure)."""
    if x == y:
        return True
    if depth < 0:
        return False
    ys = _items(y)
    if len(ys) >= 2 and _nullable(ys[-1], bodies) and _subsumed(x, seq(*ys[:-1]), bodies, depth):
        return True  # y = z n with n ⇒* ε: L(z) ⊆ L(y)
    if isinstance(x, Alt):
        return all(_subsumed(a, y, bodies, depth) for a in x.items)
    xs, ys = _items(x), _items(y)
    if isinstance(xs[0], Repeat) and (xs[0].min, xs[0].max) == (0, 1):  # q? r: both r and q r
        return _subsumed(seq(*xs[1:]), y, bodies, depth) and _subsumed(seq(xs[0].item, *xs[1:]), y, bodies, depth)
    if isinstance(y, Alt):
        if any(_subsumed(x, a, bodies, depth) for a in y.items):
            return True
        return _split_head(xs, y, bodies, depth)
    if isinstance(ys[0], Repeat) and (ys[0].min, ys[0].max) == (0, 1):  # y = r? s
        if _subsumed(x, seq(*ys[1:]), bodies, depth):
            return True
        return len(xs) >= 2 and _subsumed(xs[0], ys[0].item, bodies, depth) and \
            _subsumed(seq(*xs[1:]), seq(*ys[1:]), bodies, depth)
    if len(xs) == len(ys) >= 2:
        return all(_subsumed(a, b, bodies, depth) for a, b in zip(xs, ys))
    if isinstance(y, Repeat) and y.min <= 1 and (y.max is None or y.max >= 1):
        return _subsumed(x, y.item, bodies, depth)
    cx, cy = _as_class(x), _as_class(y)
    if cx is not None and cy is not None:
        return _covers(cy, cx)
    if isinstance(y, Ref) and y.name in bodies:
        return _subsumed(x, bodies[y.name], bodies, depth - 1)
    if isinstance(x, Ref) and x.name in bodies:
        return _subsumed(bodies[x.name], y, bodies, depth - 1)
    return False


def _split_head(xs: list[Expr], y: Alt, bodies, depth: int) -> bool:
    """x = c·rest with c a class: each of c's characters is the head of some alternative of
    y whose rest covers x's rest."""
    c = _as_class(xs[0])
    if c is None:
        return False
    rest = seq(*xs[1:])
    covered: list[tuple[int, int]] = []
    for a in y.items:
        ys = _items(bodies.get(a.name, a) if isinstance(a, Ref) else a)
        head = ys[0].item if isinstance(ys[0], Repeat) and (ys[0].min, ys[0].max) == (0, 1) else ys[0]
        hc = _as_class(head)
        if hc is not None and _subsumed(rest, seq(*ys[1:]), bodies, depth):
            covered.extend(hc)
    return _covers(tuple(covered), c)


def _as_class(e: Expr) -> tuple[tuple[int, int], ...] | None:
    if isinstance(e, CharClass):
        return e.code_points()
    if isinstance(e, Literal) and len(e.text) == 1:
        return ((ord(e.text), ord(e.text)),)
    return None


def _covers(big, small) -> bool:
    big = CharClass(tuple(big)).ranges if big else ()
    return all(any(lo <= a and b <= hi for lo, hi in big) for a, b in small)


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


def _count(fired: dict, notes: list[str], key: str, names: list[str], what: str) -> None:
    if names:
        fired[key] = fired.get(key, 0) + len(names)
        notes.append(f"xgrammar: {what} {', '.join(names[:6])}{' …' if len(names) > 6 else ''}")


def _fresh(base: str, taken: set[str]) -> str:
    name, k = base, 1
    while name in taken:
        k += 1
        name = f"{base}{k}"
    taken.add(name)
    return name


def _has_lark_atoms(g: Grammar) -> bool:
    return bool(g.terminals) or any(isinstance(n, (Terminal, Regex)) for r in g.rules for n in walk(r.body))
