"""The one pass registry: every pass production runs, by the name ``--passes`` takes.

    PASSES[name] -> Pass(name, kind, run, step)
        "cleanup"            the clean-ups in ``CLEANUP_ORDER``, rounds to their fixpoint (a work budget)
        "cleanup-<name>"     one clean-up (gramopt/transforms/cleanup)
        "saturate"           lower into the e-graph, saturate every rewrite family, extract
        "<family>"           the same with one family of gramopt.rewrites ("delegation", …)
        "inline"             inline non-start rules as the target's inlining policy says
        "target"             the target's fix-ups (gramopt.targets), which compose the reshapings
        "reshape-<name>"     one reshaping (gramopt/transforms/reshape), as the targets' fix-ups run it
    DEFAULT_PASSES, REQUEST_PASSES     the pipelines (names in this registry)
    pass(grammar) / pass(grammar, ctx, report)   standalone (the law tests) / in the pass manager

Production (``gramopt.passes.PassManager``), the command line's ``--passes``, the targets'
fix-ups (``reshaping(name)``) and the law tests all read this one table; the one loop that
reruns passes until nothing changes is ``transforms.fixpoint``. Each pass preserves the
language: its argument is in the docstring of the function it wraps (``step``) or of
``run``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..egraph import ExtractionError, Extractor, GrammarEGraph, Limits, Runner, StopReason
from ..egraph.frozen import hide_frozen
from ..grammar import Grammar, GrammarError, Literal, Regex, Terminal, walk
from ..grammar.memo import remembered_pass
from ..grammar.dialects import token_atoms
from ..rewrites import FAMILIES, rules as rewrite_rules
from .cleanup import (canonicalize_repetition, factor_alternatives, fuse_literals, merge_char_alternatives,
                      merge_equivalent_rules, remove_duplicate_alternatives, remove_unproductive, remove_unreachable,
                      simplify_epsilon)
from .fixpoint import fixpoint
from .inline import (INLINE_LEAVES, INLINE_LEXICAL, INLINE_NONE, Budget as InlineBudget, inline_rules, is_leaf,
                     keeps_lexemes)
from .reshape import (flatten_character_rules, flatten_repetition_bodies, gbnf_rule_names, infer_lookaheads,
                      lift_deep_groups,
                      inline_small_regular_rules, lift_star_alternations, order_alternatives_widest_last,
                      remove_left_recursion, spell_any_char, wrap_referenced_root, write_out_counted_groups,
                      write_repetitions_empty_first)

CLEANUP, EGRAPH, INLINE, TARGET, RESHAPE = "cleanup", "egraph", "inline", "target", "reshape"
"""The kinds of pass (``Pass.kind``)."""

CLEANUP_ROUNDS = 16  # rounds of the clean-ups to their fixpoint (a work bound: same input, same round)
# A rule with more expression nodes than this is not lowered into the e-graph (egglog 13.2
# parses a rule as one term, in time and memory superlinear in its length; the largest rule
# of the corpus has 747 nodes, 2,000 alternatives saturate in ~1 s)
MAX_RULE_NODES = 4_000


@dataclass
class PassContext:
    """What a pass reads besides the grammar. ``target``: a ``gramopt.targets.Target``
    record; None is no target (nothing skipped, inlining by κ, no recursion penalty, no
    fix-ups: the generic target's behaviour)."""

    target: object | None = None
    limits: Limits = field(default_factory=Limits)
    cost_model: str | None = None  # a calibrated model named explicitly (file or folder); None: the shipped one
    keep: tuple[str, ...] = ()  # rules kept as entry points (``optimize(keep=...)``)


@dataclass
class Scratch:
    """What a pass records (the fields of ``report.PassReport`` it writes), for a pass run
    on its own."""

    name: str = ""
    fired: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    stops: list = field(default_factory=list)
    saturation: dict | None = None


PassFn = Callable[[Grammar, PassContext, object], Grammar]
"""``run(grammar, ctx, report) -> grammar``: ``report`` is a ``PassReport`` (or ``Scratch``)."""


@dataclass(frozen=True)
class Pass:
    """A named pass: ``run(grammar, ctx, report)``; ``step`` the function it wraps, whose
    docstring (or its module's) is the argument (a clean-up's ``Grammar -> Grammar``, a
    reshaping's ``Grammar -> (Grammar, what changed)``; None for the composite passes)."""

    name: str
    kind: str
    run: PassFn
    step: Callable | None = None

    def __call__(self, grammar: Grammar, ctx: PassContext | None = None, report=None) -> Grammar:
        return self.run(grammar, PassContext() if ctx is None else ctx, Scratch(self.name) if report is None else report)


def has_token_atoms(g: Grammar) -> bool:
    """Whether ``g`` has Lark terminal atoms (terminal definitions, references to them, or
    regular expressions): its literals are then lexer tokens, not code points, and the
    reshapings that read code points (``RESHAPE_STEPS``) leave it alone."""
    return bool(g.terminals) or any(isinstance(n, (Terminal, Regex)) for r in g.rules for n in walk(r.body))


# ---------------------------------------------------------------- the clean-ups

CLEANUP_ORDER = (  # (name, clean-up): the order of a round (transforms/cleanup/__init__.py says why)
    ("equivalent-rules", merge_equivalent_rules),
    ("unproductive", remove_unproductive),
    ("unreachable", remove_unreachable),
    ("epsilon", simplify_epsilon),
    ("repetition", canonicalize_repetition),
    ("duplicates", remove_duplicate_alternatives),
    ("char-classes", merge_char_alternatives),
    ("fusion", fuse_literals),
    ("factoring", factor_alternatives),
)
_REMEMBERED = {name: remembered_pass(2)(fn) for name, fn in CLEANUP_ORDER}
"""Each clean-up remembers its last outputs (``grammar.memo.remembered_pass``: a pure function
run again on the very same objects — the pipeline, the guard's baseline and the judge's
fallbacks all start from the input — returns what it gave)."""


class _Spent(Exception):
    """A budget ran out inside a round; ``grammar`` is what was reached (kept as it is)."""

    def __init__(self, grammar: Grammar):
        super().__init__()
        self.grammar = grammar


def cleanup_work(g: Grammar) -> int:
    """What one clean-up run over ``g`` is charged: its expression nodes plus the code
    points of its literals (factoring splits literals into code points)."""
    return sum(1 + (len(x.text) if isinstance(x, Literal) else 0) for r in g.rules for x in walk(r.body))


def _cleanup(g: Grammar, ctx: PassContext, rep) -> Grammar:
    """Every clean-up the target does not skip, in ``CLEANUP_ORDER``, in rounds to their
    fixpoint (at most ``CLEANUP_ROUNDS``), charged ``cleanup_work`` per run against
    ``ctx.limits.cleanup_work``. Each clean-up keeps the language, so their composition does;
    a spent budget keeps the grammar reached."""
    cleanups = dict(_REMEMBERED)
    for name in ctx.target.skips_cleanups if ctx.target is not None else ():  # e.g. xgrammar: no factoring
        if cleanups.pop(name, None) is not None:
            rep.notes.append(f"{ctx.target.name}: no {name}")
    spent, runs = 0, 0
    measured, work = None, 0  # the grammar last charged, and its charge (most runs change nothing)
    returned: dict = {}  # each clean-up's last output (every clean-up is idempotent: cleanup/__init__.py)

    def round_(g: Grammar) -> Grammar:
        nonlocal spent, runs, measured, work
        for n, fn in cleanups.items():
            if g is not measured:
                measured, work = g, cleanup_work(g)
            if spent + work > ctx.limits.cleanup_work:
                rep.stops.append(f"stopped: its work budget ({ctx.limits.cleanup_work:,} expression nodes and "
                                 f"code points over its runs) was spent after {runs} clean-up runs, before "
                                 f"'{n}'; the grammar so far is kept")
                raise _Spent(g)
            spent, runs = spent + work, runs + 1
            if returned.get(n) is g:  # its own output, untouched since: idempotent, nothing to do
                continue
            before = g
            g = returned[n] = fn(g)
            if g != before:
                rep.fired[n] = rep.fired.get(n, 0) + 1
        return g
    try:
        return fixpoint(round_, g, CLEANUP_ROUNDS)
    except _Spent as stop:
        return stop.grammar


def _one_cleanup(name: str) -> PassFn:
    def run(g: Grammar, ctx: PassContext, rep) -> Grammar:
        out = _REMEMBERED[name](g)
        if out != g:
            rep.fired[name] = 1
        return out
    run.__doc__ = _REMEMBERED[name].__doc__
    return run


REDUNDANCY = ("equivalent-rules", "unreachable", "fusion")
"""The clean-ups that only remove redundancy: pass-through and duplicated rules (merged),
rules the start cannot reach, literals split in pieces (``"a" "bc"`` → ``"abc"``). Each keeps
the language (its module's argument) and leaves pinned rules as written."""


@remembered_pass(2)
def remove_redundancy(grammar: Grammar) -> Grammar:
    """``grammar`` with the ``REDUNDANCY`` clean-ups run to their fixpoint (at most 64
    rounds): what the default target keeps when its optimized output is rejected
    (``targets.portable``)."""
    def once(g: Grammar) -> Grammar:
        for name in REDUNDANCY:
            g = _REMEMBERED[name](g)
        return g
    return fixpoint(once, grammar, 64)


# ---------------------------------------------------------------- the e-graph


def cost_model_used(t, named: str | None) -> tuple[dict | None, str | None]:
    """(the extractor's node weights for target ``t``, the model's name for the report and
    cache key): its engine's calibrated model — the one shipped, or the one ``named``; never
    one found in the environment. (None, None) for a target without a calibrated engine."""
    if t is None or t.calibrated_engine is None:
        return None, None
    from ..costmodels.calibration import engine_node_weights
    w = engine_node_weights(t.calibrated_engine, named)
    return w.weights, w.source


def _egraph_pass(families: list[str] | None) -> PassFn:
    def run(g: Grammar, ctx: PassContext, rep) -> Grammar:
        """Lower into the e-graph, saturate (every rewrite keeps each class's language: its
        family's argument, ``gramopt.rewrites``), extract one term per class for the target."""
        sizes = [sum(1 for _ in walk(r.body)) for r in g.rules]
        if sum(sizes) > ctx.limits.nodes or max(sizes, default=0) > MAX_RULE_NODES:
            # the e-graph starts at about one node per IR node and would only be stopped
            # once built, and egglog parses one rule as one term (an enum of 10,000 words:
            # 8 GB): such a grammar is not lowered at all, deterministically
            rep.stops.append(f"skipped: {sum(sizes):,} expression nodes (largest rule "
                             f"{max(sizes, default=0):,}) > the e-graph's limits "
                             f"({ctx.limits.nodes:,}, {MAX_RULE_NODES:,} per rule): not saturated")
            return g
        hidden, thaw = hide_frozen(g)  # Lark rules with -> aliases: opaque atoms (egraph/frozen.py)
        eg = GrammarEGraph(hidden)
        runner = Runner(rewrite_rules(families), ctx.limits)
        rr = runner.run(eg)
        rep.saturation = rr.to_json()
        rep.fired.update(rr.fired)
        if rr.stop_reason is StopReason.SAFETY_LIMIT:  # keeping the input would be other bytes: refuse
            raise GrammarError(f"saturation stopped at its safety time limit ({ctx.limits.safety_seconds:g} s): "
                               f"nothing written (its budgets are work units; this machine is too slow or "
                               f"too loaded for this limit)")
        if rr.stop_reason is not StopReason.SATURATED:
            rep.notes.append(f"stopped: {rr.stop_reason.value}")
        t = ctx.target
        try:
            ex = Extractor(eg, recursion_penalty=t.recursion_penalty if t is not None else 0.0,
                           left_recursion=t.left_recursion if t is not None else True,
                           weights=cost_model_used(t, ctx.cost_model)[0],
                           name_nullable=t.names_nullable if t is not None else True,
                           name_lexemes=t.names_lexemes if t is not None else True).extract()
        except ExtractionError as e:
            rep.notes.append(f"extraction failed ({e}); input kept")
            return g
        return thaw(ex.grammar)
    return run


# ---------------------------------------------------------------- inlining, the target


def _inline(g: Grammar, ctx: PassContext, rep) -> Grammar:
    """Inline non-start rules as the target's inlining policy says (``inline.inline_rules``,
    whose docstring is the argument), within ``ctx.limits.inline_work``."""
    t = ctx.target
    lexical = t is not None and t.inlining == INLINE_LEXICAL
    if t is not None and (t.inlining == INLINE_NONE or (lexical and token_atoms(g.dialect))):
        # (pass-through and duplicate rules are merged by the other passes; a Lark grammar's
        # lexemes are its terminals, so its rules are kept as written under INLINE_LEXICAL)
        rep.notes.append(f"{t.name}: rules kept")
        return g
    budget = InlineBudget(ctx.limits.inline_work)
    leaves = t is not None and t.inlining == INLINE_LEAVES
    out, names = inline_rules(g, always=is_leaf if leaves else None, budget=budget,
                              may=keeps_lexemes(g) if lexical else None)
    if names:
        rep.fired["inline"] = len(names)
    if budget.spent:
        rep.stops.append(f"stopped: its work budget ({ctx.limits.inline_work:,} κ of the bodies rewritten) was "
                         f"spent after {len(names)} inlinings; the other rules are kept")
    return out


def _target(g: Grammar, ctx: PassContext, rep) -> Grammar:
    """The target's own fix-ups (``gramopt.targets``), each language-preserving; none without
    a target."""
    return g if ctx.target is None else ctx.target.apply_fixups(g, rep.notes, rep.fired)


# ---------------------------------------------------------------- the reshapings

RESHAPE_STEPS = (  # (name, step, reads code points: skipped on a grammar with Lark terminal atoms)
    ("left-recursion", remove_left_recursion, False),
    ("any-char", spell_any_char, True),
    ("inline-regular", inline_small_regular_rules, True),
    ("star-rules", lift_star_alternations, True),
    ("counted-groups", write_out_counted_groups, True),
    ("flat-stars", flatten_repetition_bodies, True),
    ("flat-characters", flatten_character_rules, True),
    ("deep-groups", lift_deep_groups, False),
    ("root-wrapper", wrap_referenced_root, False),
    ("rule-names", gbnf_rule_names, False),
    ("lookaheads", infer_lookaheads, True),
    ("empty-first", write_repetitions_empty_first, True),
    ("widest-last", order_alternatives_widest_last, True),
)


def changed_count(what) -> int:
    """How much a reshaping's report of what it changed counts: a number, names, or one name."""
    if isinstance(what, int):
        return what
    if isinstance(what, str):
        return 1
    return len(what) if what else 0


def _reshape(name: str, step, code_points: bool) -> PassFn:
    def run(g: Grammar, ctx: PassContext, rep) -> Grammar:
        if code_points and has_token_atoms(g):
            return g
        out, what = step(g)
        if changed_count(what):
            rep.fired[name] = rep.fired.get(name, 0) + changed_count(what)
        return out
    run.__doc__ = step.__doc__
    return run


def reshaping(name: str):
    """The step ``Grammar -> (Grammar, what changed)`` of reshaping ``name`` (what the
    targets' fix-ups compose)."""
    return PASSES[f"{RESHAPE}-{name}"].step


PASSES: dict[str, Pass] = {
    CLEANUP: Pass(CLEANUP, CLEANUP, _cleanup),
    **{f"cleanup-{n}": Pass(f"cleanup-{n}", CLEANUP, _one_cleanup(n), _REMEMBERED[n]) for n, _ in CLEANUP_ORDER},
    "saturate": Pass("saturate", EGRAPH, _egraph_pass(None)),
    **{fam: Pass(fam, EGRAPH, _egraph_pass([fam])) for fam in FAMILIES},
    INLINE: Pass(INLINE, INLINE, _inline),
    TARGET: Pass(TARGET, TARGET, _target),
    **{f"{RESHAPE}-{n}": Pass(f"{RESHAPE}-{n}", RESHAPE, _reshape(n, fn, cp), fn) for n, fn, cp in RESHAPE_STEPS},
}
EGRAPH_PASSES = frozenset(n for n, p in PASSES.items() if p.kind == EGRAPH)

DEFAULT_PASSES = ("cleanup", "saturate", "inline", "target")
REQUEST_PASSES = ("cleanup", "inline", "target")  # fast=True: no e-graph (gramopt.passes)

__all__ = ["CLEANUP_ORDER", "DEFAULT_PASSES", "EGRAPH_PASSES", "MAX_RULE_NODES", "PASSES", "Pass", "PassContext",
           "PassFn", "REDUNDANCY", "REQUEST_PASSES", "Scratch", "cleanup_work", "cost_model_used",
           "has_token_atoms", "remove_redundancy", "reshaping"]
