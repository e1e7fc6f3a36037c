"""NLTK context-free grammars (``.cfg``): ``LHS -> rhs1 | rhs2``, quoted terminals.

NLTK's chart parsers read whitespace-split tokens, so a ``.cfg`` grammar is a grammar over
tokens, exactly a Lark grammar whose quoted literals are anonymous tokens and whose
whitespace is ignored. The reader therefore returns a Lark-semantics ``Grammar``
(``dialect="lark"``, ``%import common.WS`` / ``%ignore WS``): every analysis, rewrite and
check that treats Lark literals as atoms applies unchanged, and ``--to lark`` is a plain
conversion.

    S -> NP VP | 'word' "other"     one rule, two alternatives; a bare name is a nonterminal
    X ->                            an empty right-hand side is ε
    %start S                        the start symbol (default: the first left-hand side)
    # comment                       whole-line comments; a line ending in ``\\`` continues

A nonterminal with no production derives nothing (NLTK accepts such grammars), so the
reader drops every alternative that mentions one — the language is unchanged — repeating
until no rule is left empty, and lists the names in ``Grammar.header``.

The writer prints the canonical BNF (``gramopt.grammar.bnf``) in this syntax, so any
grammar whose terminals are plain literal tokens can be written, repetitions included.
"""

from __future__ import annotations

import re

from ..grammar import Epsilon, Grammar, GrammarError, Literal, Ref, Rule, SourcePos, alt, seq
from ..grammar.bnf import lower

_TOKEN = re.compile(r"""\s*(?:(->)|(\|)|'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)"|([^\s'"|]+))""")


def _logical_lines(text: str):
    """(line number, column offset, text) per production line, continuations joined."""
    pending, start = "", 0
    for no, line in enumerate(text.splitlines(), 1):
        if not pending:
            start = no
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        full, pending = pending + line, ""
        stripped = full.strip()
        if stripped and not stripped.startswith("#"):
            yield start, len(full) - len(full.lstrip()), stripped


def _unescape(s: str) -> str:
    return re.sub(r"\\(.)", r"\1", s)


def parse_cfg(text: str) -> Grammar:
    """Read NLTK CFG text into a Lark-semantics grammar (see the module docstring)."""
    bodies: dict[str, list] = {}
    first_pos: dict[str, SourcePos] = {}
    start = None
    for no, indent, line in _logical_lines(text):
        pos = SourcePos(no, indent + 1)
        if line.startswith("%"):
            parts = line.split()
            if parts[0] != "%start" or len(parts) != 2:
                raise GrammarError(f"unknown directive '{line}' (NLTK grammars know only %start NAME)", pos)
            start = parts[1]
            continue
        tokens, i = [], 0
        while i < len(line):
            m = _TOKEN.match(line, i)
            if not m or m.end() == i:
                if not line[i:].strip():
                    break
                at = i + len(line[i:]) - len(line[i:].lstrip())
                raise GrammarError("unterminated quoted terminal", SourcePos(no, indent + at + 1))
            arrow, bar, sq, dq, name = m.groups()
            col = indent + m.start(m.lastindex) + 1
            tokens.append((("->" if arrow else "|" if bar else "t" if name is None else "n"),
                           _unescape(sq if sq is not None else dq) if name is None and not arrow and not bar
                           else name, col))
            i = m.end()
        if len(tokens) < 2 or tokens[0][0] != "n" or tokens[1][0] != "->":
            raise GrammarError("expected 'NAME -> right-hand side'", pos)
        lhs = tokens[0][1]
        alts, cur = [], []
        for kind, value, col in tokens[2:]:
            if kind == "->":
                raise GrammarError("unexpected '->' (one production per line)", SourcePos(no, col))
            if kind == "|":
                alts.append(cur)
                cur = []
            else:
                cur.append(Literal(value) if kind == "t" else Ref(value))
        alts.append(cur)
        first_pos.setdefault(lhs, pos)
        bodies.setdefault(lhs, []).extend(alts)
    if not bodies:
        raise GrammarError("no productions", SourcePos(1, 1))
    start = start or next(iter(bodies))
    undefined = _drop_undefined(bodies)
    if start not in bodies:
        raise GrammarError(f"start symbol '{start}' has no productions: the language is empty", SourcePos(1, 1))
    rules = tuple(Rule(n, alt(*(seq(*a) if a else Epsilon() for a in b)), pos=first_pos[n])
                  for n, b in bodies.items())
    header = (f"nonterminals without productions (their alternatives dropped): {', '.join(sorted(undefined))}"
              if undefined else "")
    g = Grammar(rules, start, *_ignore_whitespace(), dialect="lark", header=header)
    g.check()
    return g


def _drop_undefined(bodies: dict[str, list]) -> set[str]:
    """Remove, in place, alternatives that mention a nonterminal without productions."""
    gone: set[str] = set()
    while True:
        missing = {s.name for alts in bodies.values() for a in alts for s in a
                   if isinstance(s, Ref) and s.name not in bodies}
        if not missing:
            return gone
        gone |= missing
        for n in list(bodies):
            bodies[n] = [a for a in bodies[n] if not any(isinstance(s, Ref) and s.name in missing for s in a)]
            if not bodies[n]:
                del bodies[n]


def _ignore_whitespace():
    """The terminals and directives of ``%import common.WS`` / ``%ignore WS``, as the Lark
    reader produces them (so the two dialects agree on the lexer)."""
    from .lark import parse_lark
    lib = parse_lark('start: "x"\n%import common.WS\n%ignore WS\n')
    return lib.terminals, lib.directives


def write_cfg(grammar: Grammar) -> str:
    """The NLTK text of ``grammar``'s canonical BNF; its terminals must be literal tokens."""
    if grammar.dialect != "lark":
        raise GrammarError("an NLTK CFG is a grammar over whitespace-separated tokens: only a Lark "
                           "(or .cfg) grammar converts to it")
    bnf = lower(grammar)
    names = {n: _name(n) for n in bnf.nonterminals}
    if len(set(names.values())) != len(names):
        raise GrammarError("rule names collide once written as NLTK names")
    lines = [f"%start {names[bnf.start]}"]
    for p in bnf.productions:
        rhs = []
        for sym in p.rhs:
            if isinstance(sym, Ref):
                rhs.append(names[sym.name])
            elif isinstance(sym, Literal) and not any(c.isspace() for c in sym.text):
                rhs.append("'" + sym.text.replace("\\", "\\\\").replace("'", "\\'") + "'")
            else:
                raise GrammarError(f"rule '{bnf.origin[p.lhs]}': NLTK CFGs have only literal tokens, "
                                   f"not {type(sym).__name__}")
        lines.append(f"{names[p.lhs]} -> {' '.join(rhs)}".rstrip())
    return "\n".join(lines) + "\n"


def _name(n: str) -> str:
    return re.sub(r"[\s'\"|#]", "_", n.replace("#", "__"))
