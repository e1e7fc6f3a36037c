"""Keep the lookaheads xgrammar derives for itself: a rule the input used at one place stays used
at one place.

    derived_lookaheads(g) -> set of rule names       the rules xgrammar gives an assertion of its own
    keep_derived_lookaheads(original, output) -> (output', copied rule names)

xgrammar derives a lookahead assertion for every rule (not the root, none written) that occurs
exactly once at a non-last position of a sequence and never last in a sequence of another rule
(its ``LookaheadAssertionAnalyzer``): the rest of that one sequence is all that may follow the
rule, so the mask cache may decide tokens that run past the rule's end without the parser.
Merging such a rule with a copy of itself used elsewhere (the clean-ups' duplicated rules, the
e-graph's classes) gives the merged rule two occurrences, and the assertion is gone: on three
JSONSchemaBench schemas (xgrammar's own converter writes one copy per property) xgrammar's p95
per mask grew 1.4-2x, in no other engine (``benchmarks/results/derived-lookaheads-2026-11-27``).

``keep_derived_lookaheads`` gives back to every rule of ``output`` that had a derived lookahead
in ``original`` (same name) and lost it, one copy per extra occurrence under a fresh name, so
each occurrence names its own rule again; a copy's references count as occurrences in turn
(their rules are copied too where they lose theirs), to a fixpoint. Such a rule that the output
gives a written assertion (the xgrammar target's, from FOLLOW: one character class) has it
left out again: a written assertion takes the place of the derived one, which is exact (the
whole rest of the sequence); BFCL_javascript_16 under ``--target xgrammar``: 0.77x -> 1.15x. Recursive rules are left as
they are (a copy would reference the original), and so is everything when the copies would
outnumber the original's rules (a bound, counted in rules: same input, same bytes).

Why it preserves the language: a copy ``R'`` of ``R`` has ``R``'s body, so ``L(R') = L(R)`` (the
same least fixpoint: substitute R' by R in any derivation); replacing one reference to ``R`` by
a reference to ``R'`` leaves every rule's language unchanged. A lookahead assertion is a hint
to the engine, not part of any rule's language.
"""

from __future__ import annotations

from dataclasses import replace

from ...formats import engine_reads
from ...grammar import Alt, Grammar, Ref, Repeat, Rule, Seq
from ...grammar.analysis import recursive_rules

_Place = tuple[int, tuple[int, ...]]  # (rule index, path of item indexes to the reference)


def _occurrences(g: Grammar) -> dict[str, tuple[list[_Place], list[_Place]]]:
    """rule name -> (non-last occurrences, last occurrences in a sequence of another rule), as
    xgrammar counts them once nested groups are rules of their own: a reference as the item
    of a repetition is neither (``R*`` repeats the rule)."""
    out: dict[str, tuple[list[_Place], list[_Place]]] = {}

    def sequence(items, where: int, path: tuple[int, ...], owner: str) -> None:
        for i, item in enumerate(items):
            p = path + (i,)
            if isinstance(item, Ref):
                non_last, last = out.setdefault(item.name, ([], []))
                if i < len(items) - 1:
                    non_last.append((where, p))
                elif item.name != owner:
                    last.append((where, p))
            else:
                group(item, where, p, owner)

    def group(e, where: int, path: tuple[int, ...], owner: str) -> None:
        if isinstance(e, Alt):
            for i, a in enumerate(e.items):
                sequence(a.items if isinstance(a, Seq) else (a,), where, path + (i,), owner)
        elif isinstance(e, Seq):
            sequence(e.items, where, path, owner)
        elif isinstance(e, Repeat) and not isinstance(e.item, Ref):
            group(e.item, where, path + (0,), owner)

    for k, r in enumerate(g.rules):
        body = r.body
        if isinstance(body, Alt):
            group(body, k, (), r.name)
        else:
            sequence(body.items if isinstance(body, Seq) else (body,), k, (), r.name)
    return out


def derived_lookaheads(g: Grammar) -> set[str]:
    """The rules of ``g`` xgrammar derives a lookahead assertion for (module docstring)."""
    occ = _occurrences(g)
    return {r.name for r in g.rules
            if r.name != g.start and r.lookahead is None and r.name in occ
            and len(occ[r.name][0]) == 1 and not occ[r.name][1]}


def _redirect(r: Rule, path: tuple[int, ...], name: str) -> Rule:
    """``r`` with the reference at ``path`` (as ``_occurrences`` records it) renamed ``name``."""
    def as_sequence(e, p):
        if isinstance(e, Seq):
            items = list(e.items)
            items[p[0]] = item(items[p[0]], p[1:])
            return Seq(tuple(items))
        return item(e, p[1:])

    def item(e, p):
        return Ref(name) if not p else group(e, p)

    def group(e, p):
        if isinstance(e, Alt):
            items = list(e.items)
            items[p[0]] = as_sequence(items[p[0]], p[1:])
            return Alt(tuple(items))
        if isinstance(e, Seq):
            return as_sequence(e, p)
        return replace(e, item=group(e.item, p[1:]))  # a repetition of a group

    return replace(r, body=group(r.body, path) if isinstance(r.body, Alt) else as_sequence(r.body, path))


def _extra(non_last: list[_Place], last: list[_Place]) -> list[_Place]:
    """The occurrences to give copies: all but the first non-last one (every one when the rule
    occurs only last: it keeps one, no copy can give it an assertion back)."""
    return non_last[1:] + last if non_last else []


def keep_derived_lookaheads(original: Grammar, output: Grammar, separator: str = "_") -> tuple[Grammar, list[str]]:
    """(``output`` with the derived lookaheads of ``original`` given back, what was done: the
    copies made, then ``-(= …) R`` for each rule whose written assertion was left out so that
    xgrammar derives its own again). Nothing for a grammar xgrammar never gets (a Lark grammar
    with a lexer of its own, ``formats.engine_reads``)."""
    if not engine_reads("xgrammar", output):
        return output, []
    wanted = derived_lookaheads(original) - recursive_rules(output)
    if not wanted:
        return output, []
    budget = len(original.rules)
    taken = {r.name for r in output.rules} | {r.name for r in original.rules}
    rules = list(output.rules)
    copied: list[str] = []
    while True:  # one round copies every rule that lost its assertion; a copy's children next round
        occ = _occurrences(output.replace_rules(rules))
        lost = [(r, _extra(*occ[r.name])) for r in rules if r.name in wanted and r.name in occ]
        lost = [(r, extra) for r, extra in lost if extra]
        if not lost:
            break
        if len(copied) + sum(len(extra) for _, extra in lost) > budget:
            return output, []
        for body, extra in lost:
            for where, path in extra:
                k = 2
                while f"{body.name}{separator}{k}" in taken:
                    k += 1
                fresh = f"{body.name}{separator}{k}"
                taken.add(fresh)
                copied.append(fresh)
                rules[where] = _redirect(rules[where], path, fresh)
                rules.append(replace(body, name=fresh, lookahead=None, comment="", pos=None))
    # an assertion written on such a rule (a target's FOLLOW set: one character class) takes the
    # place of the exact one xgrammar derives (the rest of the sequence): 0.77x -> 1.15x at p95
    occ = _occurrences(output.replace_rules(rules))
    unhinted = []
    for k, r in enumerate(rules):
        non_last, last = occ.get(r.name, ([], []))
        if r.name in wanted and r.lookahead is not None and len(non_last) == 1 and not last:
            rules[k] = replace(r, lookahead=None)
            unhinted.append(f"-(= …) {r.name}")
    if not copied and not unhinted:
        return output, []
    return output.replace_rules(rules), copied + unhinted


__all__ = ["derived_lookaheads", "keep_derived_lookaheads"]
