"""Immutable grammar expressions.

An expression denotes a set of UTF-8 byte strings (for GBNF / xgrammar EBNF), or of
terminal sequences (for Lark, where ``Terminal`` and ``Regex`` are atoms of a lexer):

  Literal(text)              the UTF-8 bytes of ``text`` (one or more code points)
  CharClass(ranges, negated) one code point in the ranges (or, negated, any code point
                             outside them), as its 1-4 UTF-8 bytes
  Regex(pattern, flags)      a Lark regular-expression terminal (an atom)
  Terminal(name)             a named lexer terminal (Lark; an atom)
  Ref(name)                  the language of the rule ``name``
  Seq(items)                 concatenation, ``len(items) >= 2``
  Alt(items)                 union, ``len(items) >= 2``, order kept as written
  Repeat(item, min, max)     ``item{min,max}``; ``max is None`` means unbounded
  Epsilon()                  the empty string

Nodes are frozen and hashable, so equal expressions compare and hash equal. The smart
constructors :func:`seq` and :func:`alt` flatten nesting and drop the trivial cases; readers
build every node through them, so the IR of a grammar does not depend on redundant
parentheses, and a read → write → read round trip gives an equal IR.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Iterator

MAX_CODE_POINT = 0x10FFFF


class Expr:
    """Base of all expression nodes."""

    __slots__ = ()

    def children(self) -> tuple["Expr", ...]:
        return ()


UNHASHED = -1  # ``hash()`` never returns -1 (CPython maps it to -2)


def _remembers_hash(cls):
    """``cls`` (with a ``_hash`` field: ``UNHASHED``, not in ``__init__``, not compared) with
    its dataclass hash computed once per node and kept in ``_hash``: the same value (a hash
    of the compared fields, the children's hashes remembered in turn), so a composite's hash
    costs its size once rather than at every dict or set look-up (the clean-ups' memos and
    de-duplications hash whole rule bodies). Sound because nodes are immutable. An unpickled
    (or copied) node starts ``UNHASHED``: a ``str`` hash differs between processes."""
    fields_hash, set_fields = cls.__hash__, cls.__setstate__

    def __hash__(self) -> int:
        h = self._hash
        if h == UNHASHED:
            h = fields_hash(self)
            object.__setattr__(self, "_hash", h)
        return h

    def __setstate__(self, state) -> None:
        set_fields(self, state)
        object.__setattr__(self, "_hash", UNHASHED)

    cls.__hash__, cls.__setstate__ = __hash__, __setstate__
    return cls


def _hash_field():
    return field(default=UNHASHED, init=False, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Epsilon(Expr):
    pass


@dataclass(frozen=True, slots=True)
class Literal(Expr):
    text: str

    def __post_init__(self) -> None:
        if not self.text:
            raise ValueError("empty Literal: use Epsilon()")


@_remembers_hash
@dataclass(frozen=True, slots=True)
class CharClass(Expr):
    """One code point from ``ranges`` (sorted, disjoint, non-adjacent, inclusive) or,
    when ``negated``, one code point from the complement of ``ranges`` in [0, 0x10FFFF]."""

    ranges: tuple[tuple[int, int], ...]
    negated: bool = False
    _hash: int = _hash_field()

    def __post_init__(self) -> None:
        object.__setattr__(self, "ranges", normalize_ranges(self.ranges))

    def code_points(self) -> tuple[tuple[int, int], ...]:
        """The accepted code points as sorted, disjoint inclusive ranges."""
        return complement_ranges(self.ranges) if self.negated else self.ranges


@dataclass(frozen=True, slots=True)
class Regex(Expr):
    """A Lark regexp terminal ``/pattern/flags`` — an atom; gramopt never looks inside."""

    pattern: str
    flags: str = ""


@dataclass(frozen=True, slots=True)
class Terminal(Expr):
    name: str


@dataclass(frozen=True, slots=True)
class Ref(Expr):
    name: str


@_remembers_hash
@dataclass(frozen=True, slots=True)
class Seq(Expr):
    items: tuple[Expr, ...]
    _hash: int = _hash_field()

    def children(self) -> tuple[Expr, ...]:
        return self.items


@_remembers_hash
@dataclass(frozen=True, slots=True)
class Alt(Expr):
    items: tuple[Expr, ...]
    _hash: int = _hash_field()

    def children(self) -> tuple[Expr, ...]:
        return self.items


@_remembers_hash
@dataclass(frozen=True, slots=True)
class Repeat(Expr):
    item: Expr
    min: int = 0
    max: int | None = None
    _hash: int = _hash_field()

    def __post_init__(self) -> None:
        if self.min < 0 or (self.max is not None and self.max < self.min):
            raise ValueError(f"bad repetition bounds {{{self.min},{self.max}}}")

    def children(self) -> tuple[Expr, ...]:
        return (self.item,)


# ---------------------------------------------------------------- smart constructors


def seq(*items: Expr) -> Expr:
    """Concatenation, flattened: nested Seq spliced, Epsilon dropped, one item unwrapped."""
    flat: list[Expr] = []
    for item in items:
        if isinstance(item, Seq):
            flat.extend(item.items)
        elif not isinstance(item, Epsilon):
            flat.append(item)
    if not flat:
        return Epsilon()
    if len(flat) == 1:
        return flat[0]
    return Seq(tuple(flat))


def alt(*items: Expr) -> Expr:
    """Union, flattened: nested Alt spliced, order and duplicates kept, one item unwrapped."""
    flat: list[Expr] = []
    for item in items:
        if isinstance(item, Alt):
            flat.extend(item.items)
        else:
            flat.append(item)
    if not flat:
        raise ValueError("alt() of nothing denotes the empty language; gramopt has no node for it")
    if len(flat) == 1:
        return flat[0]
    return Alt(tuple(flat))


@lru_cache(maxsize=4096)
def char(c: str) -> CharClass:
    """The class of the one code point ``c`` (shared: nodes are immutable)."""
    return CharClass(((ord(c), ord(c)),))


# ---------------------------------------------------------------- code-point ranges


def normalize_ranges(ranges) -> tuple[tuple[int, int], ...]:
    """Sort, merge overlapping and adjacent ranges; reject bad bounds."""
    out: list[list[int]] = []
    for lo, hi in sorted((int(a), int(b)) for a, b in ranges):
        if lo > hi or lo < 0 or hi > MAX_CODE_POINT:
            raise ValueError(f"bad character range {lo:#x}-{hi:#x}")
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((a, b) for a, b in out)


def ranges_overlap(a, b) -> bool:
    """Whether two collections of inclusive code-point ranges share a code point."""
    return any(lo <= hi2 and lo2 <= hi for lo, hi in a for lo2, hi2 in b)


def complement_ranges(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    out = []
    nxt = 0
    for lo, hi in ranges:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_CODE_POINT:
        out.append((nxt, MAX_CODE_POINT))
    return tuple(out)


# ---------------------------------------------------------------- traversal


def walk(expr: Expr) -> Iterator[Expr]:
    """Every node of ``expr``, pre-order."""
    stack = [expr]
    pop, extend = stack.pop, stack.extend
    while stack:
        node = pop()
        yield node
        kids = node.children()
        if kids:
            extend(reversed(kids))


# Passes never build a rule body nested deeper than this (``depth``), and the GBNF/EBNF reader
# lifts deeper groups into rules of their own (``formats.ebnf.MAX_BODY_DEPTH``; Lark and Go EBNF
# refuse more than 100 levels of parentheses), so whatever gramopt writes it reads back, and
# every recursive walk over an expression stays far below Python's stack limit.
MAX_PASS_DEPTH = 48


def depth(expr: Expr) -> int:
    """Nesting depth of ``expr`` (a leaf is 1), computed without recursion."""
    best, stack = 0, [(expr, 1)]
    while stack:
        node, d = stack.pop()
        best = max(best, d)
        stack.extend((c, d + 1) for c in node.children())
    return best


def refs(expr: Expr) -> list[str]:
    """Names of rules referenced in ``expr``, in order of first appearance (``walk``'s
    pre-order, written out: the pipeline asks this of every body many times)."""
    seen: dict[str, None] = {}
    stack = [expr]
    pop, extend = stack.pop, stack.extend
    while stack:
        node = pop()
        if isinstance(node, Ref):
            seen.setdefault(node.name, None)
        else:
            kids = node.children()
            if kids:
                extend(reversed(kids))
    return list(seen)


def count_nodes(expr: Expr, limit: int | None = None) -> int:
    """The number of nodes of ``expr`` (``walk``'s count), or ``limit + 1`` as soon as it
    exceeds ``limit``."""
    n, stack = 0, [expr]
    pop, extend = stack.pop, stack.extend
    while stack:
        n += 1
        if limit is not None and n > limit:
            return n
        kids = pop().children()
        if kids:
            extend(kids)
    return n


def transform(expr: Expr, fn: Callable[[Expr], Expr]) -> Expr:
    """Rebuild ``expr`` bottom-up, applying ``fn`` to every node after its children. A node
    whose children all come back as the same objects, and which the smart constructor
    would rebuild equal (at least two children in a tuple, none it would splice or drop),
    is passed to ``fn`` as it is: the same value, without a copy."""
    if isinstance(expr, Seq):
        new = [transform(i, fn) for i in expr.items]
        return fn(expr if rebuilds_as_is(expr, new) else seq(*new))
    if isinstance(expr, Alt):
        new = [transform(i, fn) for i in expr.items]
        return fn(expr if rebuilds_as_is(expr, new) else alt(*new))
    if isinstance(expr, Repeat):
        item = transform(expr.item, fn)
        # type(expr): a Repeat subclass (Lark's ``[x]``, formats/lark_maybe) stays what it is
        return fn(expr if item is expr.item else type(expr)(item, expr.min, expr.max))
    return fn(expr)


_SEQ_SPLICED = (Seq, Epsilon)


def rebuilds_as_is(e: Seq | Alt, items) -> bool:
    """Whether ``seq(*items)`` (``alt``, for an ``Alt``) equals ``e``: items equal to its
    own, at least two in a tuple, none the constructor would splice or drop. A rewrite that
    finds so keeps ``e`` (no copy, and a later equality test is an identity check)."""
    old = e.items
    if len(items) != len(old) or len(old) < 2 or type(old) is not tuple:
        return False
    for a, b in zip(items, old):
        if a is not b and a != b:
            return False
    return not _splices(old, _SEQ_SPLICED if isinstance(e, Seq) else Alt)


def _splices(items: tuple, kinds) -> bool:
    for x in items:
        if isinstance(x, kinds):
            return True
    return False


def rename_refs(expr: Expr, mapping: dict[str, str]) -> Expr:
    return transform(expr, lambda e: Ref(mapping[e.name]) if isinstance(e, Ref) and e.name in mapping else e)
