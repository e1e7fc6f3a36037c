"""Lark's ``[x]``: the optional that leaves a ``None`` in the parse tree when absent.

    Maybe(x)         == Repeat(x, 0, 1), and hashes alike

In Lark (``maybe_placeholders=True``, its default since 1.0) ``[x]`` and ``x?`` accept the
same strings but build different trees: an absent ``[x]`` is a ``None`` child, an absent
``x?`` is no child, so a user's ``Transformer`` that unpacks children sees a different
arity. The reader builds ``Maybe`` for ``[x]`` and the writer prints it back as ``[x]``.

``Maybe`` is a ``Repeat`` for every pass (same fields, equal to and hashing like the
``Repeat`` it stands for), so the language and every comparison are unchanged; a pass that
rebuilds the node makes a plain ``Repeat`` (written ``x?``). Where a rule is left as it
was, its ``[x]`` is written as it was read.
"""

from __future__ import annotations

from ..grammar import Expr, Repeat


class Maybe(Repeat):
    """``[item]``: ``Repeat(item, 0, 1)`` written with brackets (module docstring)."""

    __slots__ = ()

    def __init__(self, item: Expr, min: int = 0, max: int | None = 1) -> None:  # noqa: A002 - Repeat's names
        if (min, max) != (0, 1):
            raise ValueError(f"Maybe is x{{0,1}}, not x{{{min},{max}}}")
        super().__init__(item, 0, 1)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Repeat):
            return NotImplemented
        return (self.item, self.min, self.max) == (other.item, other.min, other.max)

    __hash__ = Repeat.__hash__

    def __repr__(self) -> str:
        return f"Maybe({self.item!r})"

    def __reduce__(self):
        return (Maybe, (self.item,))


def is_maybe(e: Expr) -> bool:
    """Whether ``e`` was written ``[x]``."""
    return isinstance(e, Maybe)


__all__ = ["Maybe", "is_maybe"]
