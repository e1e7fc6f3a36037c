"""Merge rules equal up to renaming, and pass-through rules, before anything reshapes them.

    # A ::= "x" A | "y" ;  B ::= "x" B | "y" ;  S ::= A B      -->   A ::= "x" A | "y" ;  S ::= A A
    # D ::= E ;  E ::= "e" ;  S ::= D                           -->   E ::= "e" ;  S ::= E

Why here and not only in the e-graph (``rewrites/delegation.py`` proves the same merges
there): the later clean-ups rewrite each rule on its own — factoring ``X " " P | X " " P Q``
needs both alternatives to name the same rule — so two copies of one rule that refer to
each other under different names (a duplicated recursive rule) are factored differently
and stop being equal up to renaming before the e-graph sees them. Merging first keeps one
copy, and every later pass sees one name.

Argument (pass-through). ``D ::= E`` has L(D) = L(E) in every fixpoint of the rule
equations, so replacing each reference to D by E and dropping D leaves the least fixpoint
of the other rules unchanged. Chains are followed; a cycle of pass-throughs (no rule of it
derives anything) is left to ``unproductive``.

Argument (renaming). The blocks are the coarsest partition of rule names such that rules
of one block have bodies that are equal expressions once every reference is replaced by
its block (partition refinement, starting from one block). The quotient system (one
equation per block) then has the rules' equations as instances, so as in
``rewrites/delegation.py`` every rule of a block denotes the block's language in the least
fixpoint: replacing references to a member by its block's representative changes no
language.

Seeing through split literals. Signatures compare bodies with adjacent literals fused
(``"a" "bc"`` reads ``"abc"``: the same bytes, ``fusion.py``), so a copy whose literals were
split in pieces still matches its original before factoring reshapes the two apart.

Seeing through helpers. The signatures compare bodies with some references *unfolded*,
so that a copy of a recursive rule whose star was spelled as a helper still matches the
original (``C ::= "\"" H "," | c C | e C2 ;  C2 ::= "\"" [ ]* "," | c C | e C ;
H ::= H [ ] | ""`` makes C = C2 once H reads as ``[ ]*``). A rule is *closed* when its
reading below mentions no rule at all (a regular constant, e.g. a star helper), and the
signature of every rule is its body as written with each reference to a closed rule
replaced by that rule's reading (its own included: a self-recursive closed rule reads its
recursion solved, so a copy ``C2 ::= body(C)`` reads exactly like C):

    one-rule recursion   H ::= H w₁ | … | H m₁ H | … | T   reads   T (w₁ | … | m₁ T | …)*
                         H ::= w₁ H | … | T                 reads   (w₁ | …)* T
                         (w, m, T free of H; ``T T*`` reads ``T+``, ``ε U*`` reads ``U*``)
    other rules          their body, references to closed rules replaced by readings
                         (closed when nothing else remains, up to ``UNFOLD_LIMIT`` nodes)

Argument. (a) A reading is the least solution of the rule's own equation with the other
rules as parameters (S = T U* contains T and is closed under ·w and ·m S, so it contains
the least solution; each T U^k takes k+1 unfoldings, so it is contained); by Bekić's
theorem putting it in place of the equation keeps the least fixpoint L, and as S(Y) is a
fixpoint of H's equation for every valuation Y, ``H ::= body(S)`` is the same function as
``H ::= S``. Replacing a reference by the referred equation's right-hand side keeps L too.
So the system U of signatures has least fixpoint L, and the partition argument above
shows that, in any system whose equations equal the signatures up to blocks (a member's
equation may be a block-mate's signature, references may go to block-mates), every rule
still denotes L of its block. (b) Folding back: the written bodies differ from
signatures only by a reference to a closed rule k where the signature has k's constant
reading L(k). The closed rules form a subsystem that mentions nothing else; it keeps
least fixpoint L as long as it stays acyclic apart from solved self-recursion, which the
choice of bodies below guarantees (every reference goes from a closed rule to one of
smaller *depth*, the longest chain of references below it, even after redirection). So
the closed rules are solved first (Bekić) and the constants substituted: the merged
grammar is such a system. (c) Without (b)'s care it is wrong: ``r ::= m ; m ::= "a"``
(r pinned) read alike, and taking r's body for the merged m gives ``m ::= m`` (empty).

Bodies: the representative (named below) takes, in a block of closed rules, the body of a
member of least depth (it names no block-mate, so no cycle appears); in another block,
the body of the member that names the fewest rules outside the block (so ``v ::= "x" H v
| "y"`` merged with its copy ``v2 ::= "x" [ ]* v | "y"`` keeps the copy's body and H can
go). Members other than the representative keep their bodies when pinned.

Kept: the start rule, rules named by a directive or a lookahead, and rules with a
lookahead, Lark flags, priority or aliases stay (their references may still be redirected
to an equal rule). A pinned rule (``Rule.pinned``: a lookahead assertion or an engine macro) is
never merged: its rule would carry its assertion into the other
members' contexts, whose FOLLOW need not imply it (xgrammar then allows tokens the language
forbids); so a pinned rule starts the refinement in a block of its own, and rules naming
it are equal only to rules naming it too. A pass-through ``D ::= P`` to a pinned P still goes: D's contexts are already
P's (FOLLOW(D) ⊆ FOLLOW(P)). Lark grammars are left alone: a Lark rule name is a parse-tree node the
user's code reads. The representative of a block is its first rule in source order that is
not the start rule, so user-named rules survive their generated copies (which come later).
κ never increases: only whole rules are removed.

Into a pinned rule (``_into_pinned``). A copy ``D`` of a rule ``P`` with an assertion (an
obfuscated or converted grammar's ``S2 ::= "\"" | c S | e S`` beside ``S ::= "\"" | c S2 | e S
(= …)``) is equal to P up to renaming in the partition of the bodies as written (literals
fused, nothing unfolded) that starts pinned rules in the one block too. The equations are
then instances of the quotient system, so every member denotes its block's language (an
assertion is no part of one), and so does every member of the system where D's references
name P instead: its equations are instances of the same quotient system. (Unfolded
signatures would not do: ``r ::= m (= …) ; m ::= "a" | "b"`` read alike, and r's reference
to m made r's gives ``r ::= r``.) It is merged only when every reference to
D ends an alternative of P's own body (``_tail_refs``): there D completes exactly where P
completes, and P's assertion already holds (xgrammar trusts it) at that position, so P named
there asserts nothing new; anywhere else P's assertion would be carried into D's contexts,
which need not imply it (why pinned rules are not merged above). D is not kept (the start, a
directive's or an assertion's rule), P is no engine construct (``native``). The result is P
recursing on itself, as the input's original wrote it: built-in JSON's obfuscated string
rules keep ``characters_item ::= "\"" | [^"\\] characters_item | …`` and lose the copy.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from ...grammar import (Alt, CharClass, Epsilon, Expr, Literal, Grammar, Ref, Repeat, Rule, Seq, alt, rebuilds_as_is, refs, rename_refs,
                        seq, transform, walk)
from ...grammar.expr import count_nodes
from ...grammar.analysis import _cyclic
from ...grammar.refinement import coarsest_partition
from .common import is_lark
from .fusion import fuse_items, literal_text


def _pinned(grammar: Grammar) -> set[str]:
    pinned = {grammar.start} | {a for d in grammar.directives for a in d.args}
    for r in grammar.rules:
        if r.lookahead is not None or r.flags or r.priority is not None or any(r.aliases):
            pinned.add(r.name)
        if r.lookahead is not None:
            pinned.update(refs(r.lookahead))
    return pinned


def _pass_through(grammar: Grammar, pinned: set[str]) -> dict[str, str]:
    """Unpinned ``D ::= E`` → the end of its chain of pass-throughs (cycles left out)."""
    rules = grammar.rule_map
    step = {r.name: r.body.name for r in grammar.rules
            if r.name not in pinned and isinstance(r.body, Ref) and r.body.name in rules}
    out: dict[str, str] = {}
    for name in step:
        seen = {name}
        end = step[name]
        while end in step and end not in seen:
            seen.add(end)
            end = step[end]
        if end not in seen:
            out[name] = end
    return out


UNFOLD_LIMIT = 256
"""Largest unfolded body (in IR nodes) that replaces a reference when comparing."""


def one_rule_solution(rule: Rule) -> Expr | None:
    """The least solution of ``rule``'s own equation when it is a one-rule left recursion
    (with infix ``H m H``) or right recursion (module docstring), else None."""
    h = Ref(rule.name)
    alternatives = rule.body.items if isinstance(rule.body, Alt) else (rule.body,)
    if not any(a == h or (isinstance(a, Seq) and h in (a.items[0], a.items[-1])) for a in alternatives):
        return None  # no alternative recurses at an end: none of the forms below
    bases, lefts, infix, rights = [], [], [], []
    for a in alternatives:
        if a == h:
            continue  # H ::= H | …: adds nothing to the least solution
        items = a.items if isinstance(a, Seq) else (a,)
        starts, ends = items[0] == h, items[-1] == h
        inner = items[1 if starts else 0: len(items) - 1 if ends else len(items)]
        if any(isinstance(x, Ref) and x.name == rule.name for i in inner for x in walk(i)):
            return None
        w = seq(*inner)
        if starts and ends:
            infix.append(w)
        elif starts:
            lefts.append(w)
        elif ends:
            rights.append(w)
        else:
            bases.append(a)
    if not bases or not (lefts or infix or rights) or (rights and (lefts or infix)):
        return None
    t = alt(*bases)
    u = alt(*lefts, *(seq(m, t) for m in infix)) if not rights else alt(*rights)
    if u == t:
        return Repeat(t, 1, None)
    if isinstance(t, Epsilon):
        return Repeat(u, 0, None)
    return seq(Repeat(u, 0, None), t) if rights else seq(t, Repeat(u, 0, None))


def unfolded_bodies(grammar: Grammar) -> tuple[dict[str, Expr], dict[str, int]]:
    """The signatures' bodies (module docstring), and the depth of every rule whose
    signature is a constant (the closed rules, and rules naming only closed rules whose
    reading is over the size limit: they are never unfolded, and like closed rules share
    blocks only with each other)."""
    fused = {r.name: _fused(r.body) for r in grammar.rules}
    defs = {r.name: fused[r.name] if (s := one_rule_solution(r)) is None else _fused(s) for r in grammar.rules}
    pinned = {r.name for r in grammar.rules if r.pinned}
    named = {n: refs(d) for n, d in defs.items()}
    graph = {n: [m for m in ms if m in defs] for n, ms in named.items()}
    cyclic = {n for comp in _cyclic(graph) for n in comp}
    closed: dict[str, Expr] = {}  # readings of the closed rules
    depth: dict[str, int] = {}
    done: set[str] = set()

    for root in graph:  # depth-first, every rule after the rules it refers to
        stack = [(root, iter(graph[root]))]
        on_stack = {root}  # the names in stack
        while stack:
            n, it = stack[-1]
            if n in done:
                stack.pop()
                on_stack.discard(n)
                continue
            m = next(it, None)
            if m is not None:
                if m not in done and m not in cyclic and m not in on_stack:
                    stack.append((m, iter(graph[m])))
                    on_stack.add(m)
                continue
            stack.pop()
            on_stack.discard(n)
            done.add(n)
            if n in cyclic or not all(m in closed for m in graph[n]) or len(graph[n]) < len(named[n]):
                continue
            depth[n] = 1 + max((depth[m] for m in graph[n]), default=-1)  # its signature is a constant
            body = _unfold(defs[n], closed)
            if n not in pinned and count_nodes(body, UNFOLD_LIMIT) <= UNFOLD_LIMIT:
                closed[n] = body  # (a pinned rule is never read through: it stays a name)
    return {r.name: _unfold(fused[r.name], closed) for r in grammar.rules}, depth


def _fused(e: Expr) -> Expr:
    """``e`` with adjacent literals fused (``fusion.fuse_items``: the same language), so a copy
    whose literals are split (``"a" "bc"``) reads like the original ``"abc"``: ``transform(e,
    fuse_items on every Seq)`` written out, a sequence with no two adjacent literals kept
    as it is (``fuse_items`` would rebuild it equal)."""
    if isinstance(e, Seq):
        new = [_fused(i) for i in e.items]
        x = e if rebuilds_as_is(e, new) else seq(*new)
        return fuse_items(x) if isinstance(x, Seq) and _has_literal_run(x.items) else x
    if isinstance(e, Alt):
        new = [_fused(i) for i in e.items]
        return e if rebuilds_as_is(e, new) else alt(*new)
    if isinstance(e, Repeat):
        item = _fused(e.item)
        return e if item is e.item else type(e)(item, e.min, e.max)
    return e


def _has_literal_run(items: tuple[Expr, ...]) -> bool:
    """Whether two adjacent items are literals (``fusion.literal_text``): what ``fuse_items`` fuses."""
    before = False
    for i in items:
        now = isinstance(i, (Literal, CharClass)) and literal_text(i) is not None
        if now and before:
            return True
        before = now
    return False


def _unfold(e: Expr, closed: dict[str, Expr]) -> Expr:
    """``transform(e, sub)`` where ``sub`` replaces a reference to a closed rule by its
    reading (and leaves every other node as it is), written out: the same nodes rebuilt
    the same way (a node whose children all come back as they were, and which the smart
    constructor would rebuild equal, is kept as it is), without a call of ``sub`` per node."""
    if isinstance(e, Ref):
        return closed.get(e.name, e)
    if isinstance(e, (Seq, Alt)):
        new = [_unfold(i, closed) for i in e.items]
        if rebuilds_as_is(e, new):
            return e
        out = seq(*new) if isinstance(e, Seq) else alt(*new)
        return closed.get(out.name, out) if isinstance(out, Ref) else out
    if isinstance(e, Repeat):
        item = _unfold(e.item, closed)
        return e if item is e.item else Repeat(item, e.min, e.max)
    return e


def blocks(grammar: Grammar) -> dict[str, int]:
    """Block number of every rule: the coarsest partition stable under "unfolded bodies
    equal once references are replaced by their blocks"."""
    return _blocks(grammar, unfolded_bodies(grammar)[0])


def _blocks(grammar: Grammar, bodies: dict[str, Expr], separate_pinned: bool = True) -> dict[str, int]:
    """Partition refinement. A body's signature under a partition is its template (the
    body with every rule reference replaced by one placeholder) and the blocks of the
    rules it names, in walk order: two bodies are equal once references are replaced by
    their blocks exactly when their signatures are. Templates are built once; the
    refinement is Hopcroft-style (``grammar.refinement``: a rule's signature is recomputed
    only when a rule it names changes block, so a chain of n rules costs O(n log n), not
    the n rounds of n signatures of naive refinement). Blocks numbered in the order of
    their first rule. ``separate_pinned=False``: a pinned rule starts in the one block too
    (``_into_pinned``)."""
    names = grammar.names
    known = set(names)
    templates: dict[tuple, int] = {}
    shape: dict[str, int] = {}
    named: dict[str, tuple[str, ...]] = {}
    memo: dict[int, tuple[tuple, tuple[str, ...]]] = {}  # by node identity: readings are shared
    for r in grammar.rules:
        template, named[r.name] = _template(bodies[r.name], known, memo)
        shape[r.name] = templates.setdefault(template, len(templates))
    # a pinned rule starts (so stays) in a block of its own: merging a rule that names it
    # with an equal one naming another rule would move it into that rule's contexts
    pinned = [r.name for r in grammar.rules if r.pinned] if separate_pinned else []
    initial = {n: 0 for n in names} | {n: i for i, n in enumerate(pinned, 1)}
    return coarsest_partition(list(names), named, lambda n, block: (shape[n], tuple(block[m] for m in named[n])),
                              initial)


_HOLE = object()


def _template(body: Expr, known: set[str], memo: dict[int, tuple[tuple, tuple[str, ...]]]
              ) -> tuple[tuple, tuple[str, ...]]:
    """(the body's template, the rules it names in walk order): the template is the body in
    pre-order, each inner node as its kind and arity (a Repeat with its bounds), each leaf
    as itself and each reference to a rule of ``known`` as one placeholder. Bodies here are
    built by the smart constructors (``unfolded_bodies``), so equal templates are equal
    bodies once every such reference is replaced by the placeholder. ``memo`` holds the
    answer per inner node by identity (the caller keeps the nodes alive): an unfolded
    reading appears, as one object, in every body that names its rule."""
    if isinstance(body, (Seq, Alt, Repeat)):
        hit = memo.get(id(body))
        if hit is not None:
            return hit
        kids = body.items if isinstance(body, (Seq, Alt)) else (body.item,)
        template: list = [(type(body), len(kids)) if isinstance(body, (Seq, Alt)) else (Repeat, body.min, body.max)]
        named: list[str] = []
        for k in kids:
            t, n = _template(k, known, memo)
            template.extend(t)
            named.extend(n)
        hit = memo[id(body)] = (tuple(template), tuple(named))
        return hit
    if isinstance(body, Ref) and body.name in known:
        return (_HOLE,), (body.name,)
    return (body,), ()


def _redirect(grammar: Grammar, mapping: dict[str, str]) -> Grammar:
    """Drop the rules ``mapping`` names; every reference to one goes to its image."""
    return grammar.replace_rules(_renamed_body(r, mapping) for r in grammar.rules if r.name not in mapping)


def _renamed_body(r: Rule, mapping: dict[str, str]) -> Rule:
    body = rename_refs(r.body, mapping)
    return r if body is r.body else replace(r, body=body)


def merge_equivalent_rules(grammar: Grammar) -> Grammar:
    """Pass-through rules and rules equal up to renaming, merged (see the module docstring)."""
    if is_lark(grammar) or len(grammar.rules) < 2:
        return grammar
    pinned = _pinned(grammar)
    through = _pass_through(grammar, pinned)
    if through:
        grammar = _redirect(grammar, through)
    bodies, depth = unfolded_bodies(grammar)
    members: dict[int, list[str]] = {}
    for name, b in _blocks(grammar, bodies).items():
        members.setdefault(b, []).append(name)
    mapping: dict[str, str] = {}
    body: dict[str, Expr] = {}
    rules = grammar.rule_map
    for names in members.values():
        reps = [n for n in names if n != grammar.start]
        if len(names) < 2 or not reps:
            continue
        rep = reps[0]
        mapping.update({n: rep for n in names if n != rep and n not in pinned})
        if all(n in depth for n in names):  # closed: a member of least depth
            best = min(names, key=lambda n: depth[n])
        else:  # the member naming the fewest rules outside the block
            best = min(names, key=lambda n: len(set(refs(rules[n].body)).difference(names)))
        body[rep] = rules[best].body
    if mapping:
        grammar = grammar.replace_rules(replace(r, body=body.get(r.name, r.body)) for r in grammar.rules)
        grammar = _redirect(grammar, mapping)
    return _into_pinned(grammar)


def _into_pinned(grammar: Grammar) -> Grammar:
    """Each rule equal to a rule with an assertion (``(= …)``, pinned) up to renaming, and
    named only at the ends of that rule's own alternatives, merged into it (module docstring,
    "Into a pinned rule")."""
    rules = grammar.rule_map
    if not any(r.lookahead is not None and r.native is None for r in grammar.rules):
        return grammar
    kept = _pinned(grammar)
    members: dict[int, list[str]] = {}
    written = {r.name: _fused(r.body) for r in grammar.rules}  # not unfolded: see the docstring
    for name, b in _blocks(grammar, written, separate_pinned=False).items():
        members.setdefault(b, []).append(name)
    uses = Counter(x.name for r in grammar.rules for x in walk(r.body) if isinstance(x, Ref))
    mapping: dict[str, str] = {}
    for names in members.values():
        pins = [n for n in names if rules[n].pinned]
        if len(pins) != 1 or rules[pins[0]].lookahead is None or rules[pins[0]].native is not None:
            continue
        tails = Counter(_tail_refs(rules[pins[0]].body))
        mapping.update({n: pins[0] for n in names if n not in kept and uses[n] and uses[n] == tails[n]})
    return _redirect(grammar, mapping) if mapping else grammar


def _tail_refs(e: Expr) -> list[str]:
    """The references that end an alternative of ``e`` (the last item of a sequence, each
    alternative of a group there; not inside a repetition, nor before a nullable item)."""
    if isinstance(e, Ref):
        return [e.name]
    if isinstance(e, Alt):
        return [n for a in e.items for n in _tail_refs(a)]
    if isinstance(e, Seq):
        return _tail_refs(e.items[-1])
    return []
