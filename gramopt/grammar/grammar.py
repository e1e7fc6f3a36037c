"""The editable grammar: ordered rules, a start rule, dialect directives.

A ``Grammar`` is immutable; passes return new grammars (``replace_rules``). Source
positions and comments ride along for messages and printing but are not part of
equality: two grammars are equal when their rules, terminals, start and directives are.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable, Iterator

from .expr import Expr, Ref, Terminal, rename_refs, walk


@dataclass(frozen=True, slots=True)
class SourcePos:
    line: int  # 1-based
    col: int  # 1-based


class GrammarError(Exception):
    """A grammar that cannot be read or is malformed. ``format()`` gives the one-line
    ``file:line:col: error: message`` form, plus the source line and a caret when known."""

    def __init__(self, message: str, pos: SourcePos | None = None, path: str | None = None,
                 source_line: str | None = None):
        super().__init__(message)
        self.message = message
        self.pos = pos
        self.path = path
        self.source_line = source_line

    def located(self, path: str | None, text: str | None = None) -> "GrammarError":
        """This error with the file name and (from ``text``) the offending source line."""
        line = self.source_line
        if line is None and text is not None and self.pos is not None:
            lines = text.splitlines()
            if 0 < self.pos.line <= len(lines):
                line = lines[self.pos.line - 1]
        return GrammarError(self.message, self.pos, path or self.path, line)

    def format(self) -> str:
        where = self.path or "<input>"
        if self.pos is not None:
            where += f":{self.pos.line}:{self.pos.col}"
        out = f"{where}: error: {self.message}"
        if self.source_line is not None and self.pos is not None:
            shown, col = _excerpt(self.source_line.expandtabs(1), self.pos.col)
            out += f"\n  {shown}\n  {' ' * (col - 1)}^"
        return out

    def __str__(self) -> str:
        return self.format()


EXCERPT = 100  # characters of the source line shown under an error (a window around the column)


def _excerpt(line: str, col: int) -> tuple[str, int]:
    """``line`` cut to ``EXCERPT`` characters around 1-based ``col`` (``...`` marks a cut),
    and the column of the same character in the cut line."""
    if len(line) <= EXCERPT:
        return line, col
    start = max(0, min(col - 1 - EXCERPT // 2, len(line) - EXCERPT))
    head = "..." if start else ""
    tail = "..." if start + EXCERPT < len(line) else ""
    return head + line[start:start + EXCERPT] + tail, col - start + len(head)


@dataclass(frozen=True, slots=True)
class Native:
    """An engine's own construct a rule body was read from, e.g. xgrammar's
    ``Regex("…", json_string=true)``: ``text`` its source, byte for byte, and ``body`` the
    expansion it was read as (the IR expression with its language). A writer for that
    engine writes ``text`` where the rule's body still equals ``body``; other writers write
    the expansion."""

    text: str
    body: Expr


@dataclass(frozen=True, slots=True)
class Rule:
    """``name ::= body`` — optionally with an xgrammar lookahead assertion ``(= lookahead)``.

    ``flags`` and ``priority`` keep Lark's rule modifiers (``?rule``, ``!rule``, ``rule.2``)
    and ``aliases`` its ``-> alias`` per top-level alternative; they shape Lark's parse
    tree, not the language. ``native``: the engine construct the body was read from
    (``Native``), None for plain rules.
    """

    name: str
    body: Expr
    lookahead: Expr | None = None
    flags: str = ""
    priority: int | None = None
    aliases: tuple[str | None, ...] = ()
    comment: str = field(default="", compare=False)
    pos: SourcePos | None = field(default=None, compare=False)
    native: Native | None = None

    @property
    def pinned(self) -> bool:
        """Whether the passes keep this rule as it is: its name, body and assertion, never
        inlined into another rule nor merged with one (a reference to it may only replace a
        pass-through ``D ::= name``, and it may go when the start no longer reaches it).

        Pinned are the engine's own forms: a body read from an engine construct
        (``native``: xgrammar's ``Regex(...)`` macro, 75 → 760 µs p95 when expanded into
        rules) and a rule with a lookahead assertion (xgrammar's converter's string rule
        ``S ::= "\"" | c S | "\\" E S (= …)``: 87 µs → 246 ms p95 as a star). Why never
        moved: xgrammar trusts an assertion where it finds it; a rule merged with one used
        elsewhere carries its assertion into contexts whose FOLLOW need not imply it, and
        xgrammar then allows tokens the language forbids. A pass-through ``D ::= R`` is safe
        to replace by R: whatever follows D follows R, so R's FOLLOW does not grow."""
        return self.lookahead is not None or self.native is not None


@dataclass(frozen=True, slots=True)
class Directive:
    """A dialect directive kept verbatim in meaning, e.g. Lark ``%ignore WS`` →
    ``Directive("ignore", ("WS",))``."""

    name: str
    args: tuple[str, ...] = ()
    pos: SourcePos | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Grammar:
    """Rules in source order; ``start`` names the start rule. ``terminals`` are Lark's
    terminal definitions (rule-like, bodies of literals, regexps and other terminals);
    GBNF/EBNF grammars have none. ``dialect`` records where the grammar came from."""

    rules: tuple[Rule, ...]
    start: str
    terminals: tuple[Rule, ...] = ()
    directives: tuple[Directive, ...] = ()
    dialect: str = field(default="ebnf", compare=False)
    header: str = field(default="", compare=False)

    # ------------------------------------------------------------ lookups
    @property
    def rule_map(self) -> dict[str, Rule]:
        return {r.name: r for r in self.rules}

    def rule(self, name: str) -> Rule:
        for r in self.rules:
            if r.name == name:
                return r
        raise KeyError(name)

    def __contains__(self, name: str) -> bool:
        return any(r.name == name for r in self.rules)

    @property
    def names(self) -> list[str]:
        return [r.name for r in self.rules]

    def bodies(self) -> dict[str, Expr]:
        return {r.name: r.body for r in self.rules}

    # ------------------------------------------------------------ edits
    def replace_rules(self, rules: Iterable[Rule], start: str | None = None) -> "Grammar":
        return replace(self, rules=tuple(rules), start=start or self.start)

    def with_bodies(self, bodies: dict[str, Expr]) -> "Grammar":
        """Same rules, with the bodies named in ``bodies`` replaced."""
        return self.replace_rules(replace(r, body=bodies.get(r.name, r.body)) for r in self.rules)

    def renamed(self, mapping: dict[str, str]) -> "Grammar":
        """The rules renamed by ``mapping`` (definitions, references, lookaheads and the
        start). Argument: a consistent renaming of nonterminals is a grammar isomorphism, so
        the language is unchanged (``mapping`` must not merge two names)."""
        if not mapping:
            return self
        rules = (replace(r, name=mapping.get(r.name, r.name), body=rename_refs(r.body, mapping),
                         lookahead=None if r.lookahead is None else rename_refs(r.lookahead, mapping))
                 for r in self.rules)
        return self.replace_rules(rules, start=mapping.get(self.start, self.start))

    # ------------------------------------------------------------ checks
    def check(self) -> "Grammar":
        """Raise GrammarError for a duplicate rule, a missing start rule, or a reference
        to an undefined rule or terminal; return self otherwise."""
        seen: dict[str, Rule] = {}
        for r in self.rules:
            if r.name in seen:
                raise GrammarError(f"duplicate rule '{r.name}' (first defined at line "
                                   f"{seen[r.name].pos.line if seen[r.name].pos else '?'})", r.pos)
            seen[r.name] = r
        if self.start not in seen:
            raise GrammarError(f"missing start rule '{self.start}'")
        terms = {t.name for t in self.terminals}
        declared = {a for d in self.directives if d.name == "declare" for a in d.args}
        for r in (*self.rules, *self.terminals):
            for node, where in _nodes_with_rule(r):
                if isinstance(node, Ref) and node.name not in seen:
                    raise GrammarError(f"undefined rule '{node.name}' referenced in '{r.name}'", where)
                if isinstance(node, Terminal) and node.name not in terms and node.name not in declared:
                    raise GrammarError(f"undefined terminal '{node.name}' referenced in '{r.name}'", where)
        return self


def _nodes_with_rule(rule: Rule) -> Iterator[tuple[Expr, SourcePos | None]]:
    for node in walk(rule.body):
        yield node, rule.pos
    if rule.lookahead is not None:
        for node in walk(rule.lookahead):
            yield node, rule.pos
