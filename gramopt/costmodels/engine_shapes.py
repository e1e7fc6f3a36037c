"""Per-engine static costs of a grammar form: what the "never slower" guard compares.

    engine_costs(grammar, weights) -> {engine: EngineCost}     counted over the rules the start reaches
    worse_for(before, after) -> [(engine, what, before, after)]  every count that grew
    clearly_better_for(before, after) -> [(engine, what, before, after)]  every clear gain
    compile_work(grammar) -> int          xgrammar's compile, quadratic in the rules: the engine check's size

An engine's cost here is a vector, not a number: its calibrated cost model's static cost
(``cost``: κ·w_κ + Σ node weights × shape counts + W_RECURSION per recursive reference, the
objective its extractor minimizes, ``costmodels.calibration``) *and* the counts of the shapes
measured to make that engine slow. A form is no worse for an engine when no component grew.
The shapes, each with the measurement behind it (``../shared/ENGINES.md``,
``gramopt/targets/xgrammar``, ``benchmarks/results``):

    shape            engines              why
    ---------------  -------------------  ---------------------------------------------------
    star_groups      xgrammar             a repetition of a group or rule (``(a | "\\" e)*``)
                                          becomes a helper rule whose end is inside nearly every
                                          token: ~130,000 uncertain tokens per step (llama.cpp
                                          JSON strings, 47 ms per mask)
    class_plus       xgrammar             ``[a-z]+`` becomes ``X ::= c X | c``, ending after
                                          every character
    nullable_refs    xgrammar             a shared nullable rule (``ws``) ends wherever any caller
                                          goes on: its FOLLOW is the union, tokens stay uncertain
    shared_rules     xgrammar             rules referenced from more than one place: merging two
                                          equal rules of a JSON-schema grammar into one shared
                                          rule took xgrammar's p50 from 2.2 to 4.5 μs
                                          (BFCL_parallel_multiple_121.gbnf)
    lookaheads (↓)   xgrammar             an assertion lets the mask cache reject tokens; fewer
                                          assertions, more re-checked tokens (650× on JSON)
    recursions       llguidance           a rule call per item where a repetition runs in its
                                          lexer (121× for json.gbnf's stars as helper rules;
                                          right recursion hits its 50,000-item step limit)
    left_recursions  llama.cpp, xgrammar  llama.cpp refuses them; xgrammar re-completes the rule
                                          at every item (9× for ``[ \\t\\n]*`` as ``W ::= W c``)
    ambiguity        all three            the SAC proxy's shapes (A → A A, E → E op E, (x?)*,
                                          nullable alternatives): parse forests or llama.cpp's
                                          stacks multiply (1→7→15→35→75)

Unbounded (``unbounded_rules``): a self-concatenation X → X X or X → α X* (``grammar.ambiguity.
self_concatenations``) makes xgrammar's (0.2.8) mask time grow with every byte read (an
obfuscated corpus grammar, ``rep ::= rep rep | c``: 0.2 s for the first mask, 2.7 s at the
third token, 12 s at the seventh). A lexeme that may end inside a repetition the next lexeme
may continue (``endless_lexemes``) makes llguidance (1.9.1) loop forever in a mask
(``root ::= A "ab"``, ``A ::= "ab"*``: the mask after ``aba`` never returns). No count prices
either: the guard takes any candidate without one as no slower there, and the judge does not
step that engine on such an input.

Lowered stars (``lowered_stars``): a repetition whose body is not flat and whose iteration may
be one character of a wide class is a helper rule in xgrammar (0.2.8) that ends inside nearly
every token of a string: ~62-89 ms a Qwen mask against 0.10 ms flat, 0.05 ms as xgrammar's own
right recursion. A model fitted on the EBNF forms never saw one (the default target's GBNF
outputs of 65 of 220 JSONSchemaBench schemas had one); the guard counts them itself
(``targets.guard``), and the portable target's fix-up writes them flat
(``transforms.reshape.flat_stars``).

Counts are over the rules reachable from the start (unreachable rules cost no engine a step).
``lookaheads`` counts the other way (more is better); ``worse_for`` knows. ``star_groups`` and
``class_plus`` are one budget for xgrammar (``ONE_BUDGET``: both become a helper rule that ends
after every item): one grown is worse only when their sum grew.

A form is *clearly* better for an engine (``clearly_better_for``) when its model cost is at
most ``CLEAR_GAIN`` of the other's, or one of the engine's ``DECISIVE`` shapes (each measured
at a multiple of the time, above) is fewer. Smaller static gains do not show in the engines:
the 17 corpus outputs whose model cost fell by 2–23% measured 0.88–1.08× the input's time
per mask (xgrammar and llguidance, p50 and p95: ``benchmarks/results/safe-target-2026-11-25-
idle-changed.md``), those whose cost fell by a third or more 28–850× faster in xgrammar.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..grammar import Alt, CharClass, Epsilon, Expr, Grammar, Literal, Repeat, Ref, Seq, refs, walk
from ..grammar.ambiguity import self_concatenations
from ..grammar.expr import ranges_overlap
from ..grammar.analysis import nullable_expr, nullable_rules, reachable_rules, recursive_references, structure
from .calibration import generic_node_weights, static_features
from .objective import W_RECURSION

ENGINE_SHAPES = {
    "xgrammar": ("star_groups", "class_plus", "nullable_refs", "shared_rules", "lookaheads", "left_recursions",
                 "ambiguity"),
    "llguidance": ("recursions", "ambiguity"),
    "llama.cpp": ("left_recursions", "ambiguity"),
}
HIGHER_IS_BETTER = frozenset({"lookaheads"})
# shapes an engine pays for alike, judged as one count: xgrammar lowers a group's star and a
# class's plus into the same thing, a helper rule that ends after every item, so a form that
# trades one for the other (``R ::= R R | [0-9]`` fixed up as ``[0-9] R*`` against ``[0-9]+``)
# is no worse for it
ONE_BUDGET = {"xgrammar": ("star_groups", "class_plus")}
CLEAR_GAIN = 0.75
DECISIVE = {"xgrammar": ("left_recursions", "ambiguity"), "llguidance": ("recursions", "ambiguity"),
            "llama.cpp": ("left_recursions", "ambiguity")}


UNBOUNDED_ENGINES = ("xgrammar", "llguidance")
LOWERED_STAR_ENGINES = ("xgrammar",)


def flat_body(e: Expr) -> bool:
    """Whether ``e`` is flat: an atom (a literal, a class, or an unbounded or counted
    repetition of one), a sequence of atoms, or an alternation of those. xgrammar 0.2.8 keeps
    a repetition of a flat body in its automaton."""
    items = e.items if isinstance(e, Alt) else (e,)
    return all(flat_atom(x) or (isinstance(x, Seq) and all(flat_atom(y) for y in x.items)) for x in items)


def flat_atom(e: Expr) -> bool:
    """A literal, a class, or a repetition of one: what a flat body is made of."""
    return isinstance(e, (Literal, CharClass)) or (isinstance(e, Repeat) and isinstance(e.item, (Literal, CharClass)))


WIDE = 128  # code points an iteration's one-character class must span (or be negated) to count


def wide_class(c: CharClass) -> bool:
    """Whether ``c`` is negated or spans ``WIDE`` code points or more (a string's character,
    not a digit's or an identifier's)."""
    return c.negated or sum(b - a + 1 for a, b in c.ranges) >= WIDE


def lowered_stars(g: Grammar) -> list[str]:
    """The rules of ``g`` (those its start reaches) holding a repetition xgrammar 0.2.8 lowers
    into helper rules whose end lies inside nearly every token: unbounded, its body not flat
    (``flat_body``: a rule reference or a nested group) and one iteration possibly a single
    character of a wide class (``one_character``: negated, or ``WIDE`` code points or more).
    ``"\\"" ([^"\\\\] | "\\\\" e)* "\\""`` and llama.cpp's ``char*``: ~62 ms a Qwen mask inside the
    string, 0.18 ms flat (``transforms.reshape.flat_stars``, ``benchmarks/star_forms.py``).
    Narrow classes cost little: an identifier's ``[a-z0-9_]`` as ``ic*`` 0.3 ms a mask, a
    ``digit*`` nothing (Qwen's digits are one-digit tokens); ``("," v)*`` is none either (each
    iteration starts with its comma)."""
    return _lowered_stars_in(reachable_part(g))


def _lowered_stars_in(part: Grammar) -> list[str]:
    """``lowered_stars`` of a grammar that is its own reachable part."""
    ones = one_character_rules(part.bodies())
    return [r.name for r in part.rules if any(
        isinstance(x, Repeat) and x.max is None and not flat_body(x.item) and one_character(x.item, ones)
        for x in walk(r.body))]


def counted_group(e: Expr, bodies: dict) -> bool:
    """Whether ``e`` is a counted repetition (``x{2,}``, ``x{0,40}``: at least two iterations
    required or a finite bound above one) of what is not a literal or a class, nor a reference
    to a rule that is one: xgrammar (0.2.8) takes 187-362 ms a Qwen mask inside such a string
    (``("\\" esc | [^"\\]){8,}``, ``c{8,}``, ``(…){0,40}``) against 0.12 ms written out
    (``"…" F F F F F F F F F* "…"``) and 0.21 ms for ``[^"\\]{8,}``; xgrammar's own converter's
    ``chars{4,30}`` (a rule of one class) costs nothing."""
    if not isinstance(e, Repeat) or (e.min <= 1 and (e.max is None or e.max <= 1)):
        return False
    item = bodies.get(e.item.name, e.item) if isinstance(e.item, Ref) else e.item
    return not isinstance(item, (Literal, CharClass))


def lowered_repetitions(g: Grammar) -> list[str]:
    """The rules of ``g`` (those its start reaches) holding a repetition xgrammar 0.2.8 lowers
    into helper rules inside a string, one name per such repetition: ``lowered_stars`` and the
    counted repetitions of a group (``counted_group``)."""
    part = reachable_part(g)
    bodies = part.bodies()
    return _lowered_stars_in(part) + [r.name for r in part.rules for x in walk(r.body) if counted_group(x, bodies)]


def one_character_rules(bodies: dict) -> frozenset:
    """The rules of ``bodies`` whose body derives one character of a wide class
    (``one_character``): the least fixpoint of that test with each reference read as its
    rule's current answer, from none (a cycle alone derives nothing). Every alternative is
    judged on its own, whichever rules an earlier one named. A worklist: a rule is judged
    again only when a rule it names joins, so the work is the grammar's size times its
    references at most (linear on grammars whose rules name few others)."""
    users: dict[str, set] = {}
    for n, b in bodies.items():
        for m in refs(b):
            users.setdefault(m, set()).add(n)
    ones: set = set()
    todo = [n for n, b in bodies.items() if one_character(b, ones)]
    while todo:
        n = todo.pop()
        if n in ones:
            continue
        ones.add(n)
        todo += [u for u in sorted(users.get(n, ())) if u not in ones and one_character(bodies[u], ones)]
    return frozenset(ones)


def one_character(e: Expr, ones) -> bool:
    """Whether ``e`` derives some string of exactly one character from a wide class (negated,
    or ``WIDE`` code points or more; a sequence: one item does and the others may be empty,
    judged by their being ``""`` or a star); a reference does when its rule is among ``ones``
    (``one_character_rules``, computed once per grammar)."""
    if isinstance(e, CharClass):
        return wide_class(e)
    if isinstance(e, Alt):
        return any(one_character(x, ones) for x in e.items)
    if isinstance(e, Repeat):
        return e.min <= 1 and (e.max is None or e.max >= 1) and one_character(e.item, ones)
    if isinstance(e, Ref):
        return e.name in ones
    if isinstance(e, Seq):
        empty = [isinstance(x, Epsilon) or (isinstance(x, Repeat) and x.min == 0) for x in e.items]
        return any(one_character(x, ones) and all(empty[:i] + empty[i + 1:]) for i, x in enumerate(e.items))
    return False


def unbounded_rules(g: Grammar, engine: str) -> list[str]:
    """The rules of ``g`` whose shape leaves ``engine``'s mask time unbounded (the module
    docstring's "Unbounded"): its self-concatenations for xgrammar, its endless lexemes for
    llguidance, none elsewhere."""
    if engine == "xgrammar":
        return self_concatenations(g)
    if engine == "llguidance":
        return endless_lexemes(g)
    return []


def endless_lexemes(g: Grammar) -> list[str]:
    """The reachable rules llguidance lexes (``grammar.analysis.lexical_rules``: one greedy
    lexeme each) whose string may end inside an unbounded repetition of one literal (``s*``,
    ``s+``, a class of one code point as well; nothing but nullable parts after it) whose first
    code point may follow the rule (``grammar.follow.follow_sets``). On such a rule llguidance
    1.9.1 may loop forever in a mask once the text is where the lexeme could go on or end, when
    the literal that follows and ``s`` begin alike: ``root ::= A "ab"``, ``A ::= "ab"*`` after
    ``aba`` (found by a random grammar of ``tests/test_optimize_hypothesis.py``); ``A ::= "b"+``
    or ``"a" [b]*`` before ``"b"``. Measured to return: a repetition of a class of several code
    points or of an alternation (``[a-b]*`` before ``"ab"``, ``("a" | "b")*`` before ``"b"``:
    white space before a newline), and ``"ab"*`` before ``"b"``. The test is wider than the loop
    (``"b"*`` before ``[a-b]`` returns; FOLLOW is over every rule): a rule it names is only
    one that engine is not asked about. Lark grammars (their own terminals) have none."""
    from ..grammar.analysis import lexical_order
    from ..grammar.dialects import token_atoms
    if token_atoms(g.dialect):
        return []
    order = lexical_order(g)  # each after the rules it names: none recursive
    if not order:
        return []
    nullable = nullable_rules(g)
    bodies = {r.name: r.body for r in g.rules}
    tails: dict[str, set] = {}
    for name in order:
        tails[name] = _tail_literals(bodies[name], nullable, tails)
    ending = [n for n in reachable_rules(g) if tails.get(n)]
    if not ending:
        return []
    from ..grammar.follow import follow_sets
    follow = follow_sets(g)
    return [n for n in ending if ranges_overlap(follow[n].ranges, tails[n])]


def _tail_literals(e: Expr, nullable: set[str], tails: dict[str, set]) -> set:
    """The first code points (as ranges) of the literals whose unbounded repetitions a string
    of ``e`` may end inside (``_one_literal``; a rule named at the end adds its ``tails``).
    Iterative: the bounded repetitions llama.cpp's converter writes nest thousands deep."""
    out: set = set()
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, Repeat):
            stack.append(x.item)
            lit = _one_literal(x.item) if x.max is None else None
            if lit is not None:
                out.add((lit, lit))
        elif isinstance(x, Seq):
            for item in reversed(x.items):
                stack.append(item)
                if not nullable_expr(item, nullable):
                    break
        elif isinstance(x, Alt):
            stack.extend(x.items)
        elif isinstance(x, Ref):
            out |= tails.get(x.name, set())
    return out


def _one_literal(e: Expr) -> int | None:
    """The first code point of a literal, or of a class of one code point (the same lexeme
    to llguidance); None for anything else."""
    if isinstance(e, CharClass):
        points = e.code_points()
        return points[0][0] if len(points) == 1 and points[0][0] == points[0][1] else None
    return ord(e.text[0]) if isinstance(e, Literal) and e.text else None


@dataclass(frozen=True)
class EngineCost:
    """One engine's view of a grammar form: its cost model's static cost and its shapes."""

    engine: str
    cost: float
    shapes: dict = field(default_factory=dict)


def reachable_part(g: Grammar) -> Grammar:
    """``g`` without the rules its start cannot reach."""
    keep = set(reachable_rules(g))
    return g if len(keep) == len(g.rules) else g.replace_rules([r for r in g.rules if r.name in keep])


def shape_counts(g: Grammar) -> dict:
    """The shape counts of the table above, over ``g`` (callers pass the reachable part)."""
    from .sac_proxy import sac_proxy
    nullable = nullable_rules(g)
    counts = dict.fromkeys(("star_groups", "class_plus", "nullable_refs", "lookaheads"), 0)
    for r in g.rules:
        counts["lookaheads"] += r.lookahead is not None
        for node in walk(r.body):
            if isinstance(node, Repeat) and node.max is None:
                if isinstance(node.item, CharClass) or (isinstance(node.item, Literal) and len(node.item.text) == 1):
                    counts["class_plus"] += node.min >= 1
                elif not isinstance(node.item, Literal):
                    counts["star_groups"] += 1
            elif isinstance(node, Ref) and node.name in nullable:
                counts["nullable_refs"] += 1
    uses: dict = {}
    for r in g.rules:
        for node in walk(r.body):
            if isinstance(node, Ref):
                uses[node.name] = uses.get(node.name, 0) + 1
    counts["shared_rules"] = sum(1 for n in uses.values() if n > 1)
    counts["recursions"] = recursive_references(g)
    counts["left_recursions"] = len(structure(g).left_recursive)
    counts["ambiguity"] = sac_proxy(g)
    return counts


def model_cost(g: Grammar, weights: dict | None) -> float:
    """The static cost an engine's calibrated model gives ``g`` (generic weights when the
    engine has none): what its extractor minimizes, κ and shape counts weighted, plus
    ``W_RECURSION`` per recursive reference."""
    w = weights or generic_node_weights()
    f = static_features(g)
    return (w.get("kappa", 1.0) * f["kappa"] + sum(w.get(k, 0.0) * f[k] for k in
                                                 ("concat", "infix", "nullrep", "nullalt", "left_rec", "right_rec"))
            + W_RECURSION * recursive_references(g))


def engine_costs(g: Grammar, weights: dict | None = None) -> dict:
    """``{engine: EngineCost}`` for every engine of ``ENGINE_SHAPES``; ``weights`` maps an
    engine to its calibrated node weights (missing: generic)."""
    part = reachable_part(g)
    counts = shape_counts(part)
    return {e: EngineCost(e, model_cost(part, (weights or {}).get(e)), {k: counts[k] for k in shapes})
            for e, shapes in ENGINE_SHAPES.items()}


def worse_for(before: dict, after: dict) -> list[tuple]:
    """Every (engine, what, before, after) where ``after`` costs more than ``before``
    (``what`` is "cost model" or a shape), in a fixed order; empty when no engine's cost grew."""
    out = []
    for e in ENGINE_SHAPES:
        b, a = before[e], after[e]
        if a.cost > b.cost + 1e-9:
            out.append((e, "cost model", b.cost, a.cost))
        budget = ONE_BUDGET.get(e, ())
        budget_grew = sum(a.shapes[k] for k in budget) > sum(b.shapes[k] for k in budget)
        for k in ENGINE_SHAPES[e]:
            grew = a.shapes[k] < b.shapes[k] if k in HIGHER_IS_BETTER else a.shapes[k] > b.shapes[k] + 1e-9
            if grew and (k not in budget or budget_grew):
                out.append((e, k, b.shapes[k], a.shapes[k]))
    return out


def clearly_better_for(before: dict, after: dict) -> list[tuple]:
    """Every (engine, what, before, after) where ``after`` is clearly cheaper than ``before``
    (module docstring: model cost ≤ ``CLEAR_GAIN`` of it, or a ``DECISIVE`` shape fewer), in a
    fixed order; empty when no engine gains clearly."""
    out = []
    for e in ENGINE_SHAPES:
        b, a = before[e], after[e]
        if b.cost > 0 and a.cost <= CLEAR_GAIN * b.cost:
            out.append((e, "cost model", b.cost, a.cost))
        out += [(e, k, b.shapes[k], a.shapes[k]) for k in DECISIVE[e] if a.shapes[k] < b.shapes[k] - 1e-9]
    return out


def compile_work(grammar: Grammar) -> int:
    """What compiling ``grammar`` costs the engines the check compiles it in, in work units:
    rules × positions, the rules as xgrammar counts them (each rule, and each nested
    alternation or repetition, which it lifts into a rule of its own) and the positions its
    atoms (literals, classes, references). xgrammar builds its token-mask cache with one
    Earley parser per position, and each parser's construction is linear in the rules: its
    compile is quadratic (with a 257-token vocabulary, a tree of 5,000 small rules compiles
    in 2.9 s, of 10,000 in 15 s; 81% of it in ``EarleyParser::EarleyParser``), where
    llguidance's and llama.cpp's are near-linear and far below it. The engine check compiles
    the input and every candidate once per engine; ``egraph.Limits.engine_check_size``
    bounds this figure of the input (``benchmarks/results/engine-check-size-2026-11-28.md``).
    It is the rules term only: the vocabulary term, each position's scan of the 151,644
    tokens, grows with a repetition of a broad class (Github_easy---o21459, 23 rules, work
    5,408, has ``[^\\n\\r"\\\\]{5,160}`` and compiles in ~7 s) and is bounded by the expanded
    size alone (``grammar.size.MAX_EXPANDED``)."""
    def count(e, top: bool) -> tuple[int, int]:  # (lifted rules, atoms)
        if isinstance(e, (Alt, Seq)):
            rules, atoms = (0 if top or isinstance(e, Seq) else 1), 0
            for x in e.items:
                r, a = count(x, False)
                rules, atoms = rules + r, atoms + a
            return rules, atoms
        if isinstance(e, Repeat):
            r, a = count(e.item, False)
            return r + 1, a
        return 0, 1

    rules = atoms = 0
    for r in grammar.rules:
        lifted, n = count(r.body, True)
        rules, atoms = rules + 1 + lifted, atoms + n
    return rules * atoms


__all__ = ["CLEAR_GAIN", "DECISIVE", "ENGINE_SHAPES", "LOWERED_STAR_ENGINES", "ONE_BUDGET", "WIDE", "EngineCost",
           "clearly_better_for", "compile_work", "counted_group", "engine_costs", "flat_atom", "flat_body",
           "lowered_repetitions", "lowered_stars", "model_cost", "one_character", "one_character_rules", "reachable_part",
           "shape_counts", "wide_class", "worse_for"]
