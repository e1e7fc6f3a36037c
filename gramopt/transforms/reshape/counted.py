"""Counted repetitions of a group written out: ``G{3,}`` as ``G G G G*``."""

from __future__ import annotations

from dataclasses import replace

from ...costmodels.engine_shapes import counted_group
from ...grammar import Grammar, Repeat, seq, transform

MAX_COPIES = 64  # iterations written out (a JSON string's minLength: 8 in the sample that showed it)


def write_out_counted_groups(g: Grammar) -> tuple[Grammar, list[str]]:
    """A repetition ``G{m,}`` with 2 ≤ m ≤ ``MAX_COPIES`` of what is not a literal or a class,
    nor a reference to a rule that is one (``costmodels.engine_shapes.counted_group``), is
    written ``G … G G*`` (m copies). Bounded ones (``G{m,n}``) and ``G+`` are left as they
    are. Returns the grammar and the rules rewritten; not in pinned rules.

    Argument: L{m,} = L^m · L* (each word of L^k, k ≥ m, splits into m words of L and k − m
    more; each concatenation of m words and a word of L* is in some L^k, k ≥ m).

    Why: the clean-ups merge ``c c c c*`` into ``c{3,}`` (``cleanup.repetition.merge_powers``),
    and xgrammar 0.2.8 takes 325-362 ms a Qwen mask inside a string written ``c{8,}`` or
    ``("\\\\" esc | [^"\\\\]){8,}`` (llama.cpp's converter's ``minLength: 8``, JSONSchemaBench
    Github_easy---o68311), 0.12 ms written out with the group flat; llama.cpp reads ``{m,}`` as
    these copies anyway, and llguidance decides both alike."""
    bodies = g.bodies()

    def out(e):
        if isinstance(e, Repeat) and e.max is None and e.min <= MAX_COPIES and counted_group(e, bodies):
            return seq(*([e.item] * e.min), type(e)(e.item, 0, None))
        return e

    done, rules = [], []
    for r in g.rules:
        body = r.body if r.pinned else transform(r.body, out)
        if body != r.body:
            done.append(r.name)
        rules.append(replace(r, body=body))
    return (g.replace_rules(rules), done) if done else (g, [])


__all__ = ["MAX_COPIES", "write_out_counted_groups"]
