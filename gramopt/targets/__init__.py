"""Per-engine fix-up passes, run last (the ``target`` pass of ``gramopt.passes``).

    apply(grammar, target, notes, fired) -> Grammar

Each engine's module holds the language-preserving reshapings that engine needs to be fast
or correct; targets without one get the grammar back unchanged. ``llguidance.py`` holds no reshaping but
the engine check that ``gramopt.passes.optimize`` runs for that target.
"""

from __future__ import annotations

from ..grammar import Grammar


def apply(grammar: Grammar, target: str, notes: list[str] | None = None, fired: dict | None = None) -> Grammar:
    """``grammar`` fixed up for ``target``; ``notes`` / ``fired`` collect what was done."""
    if target == "xgrammar":
        from .xgrammar import fixup
        return fixup(grammar, notes, fired)
    return grammar


__all__ = ["apply"]
