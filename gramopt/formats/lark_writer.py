"""Print a Grammar as a .lark text that lark loads.

    write_lark(grammar) -> str
    expr_text(expr) -> str          one expression, minimal parentheses

Layout: the header comment, the rules, the terminals, then the directives in their order
(consecutive ``%import``s of one path without aliases are grouped: ``%import common (A, B)``).
Definitions that ``%import`` brings in are not printed: the import is. A definition's
comment is printed above it as ``//`` lines. Lark reads the file the same in any order.

Expressions, loosest first: alternation ``a | b``, sequence ``a b``, postfix ``x? x* x+
x ~ m x ~ m..n``, atoms (``[x]`` where the reader read one: ``lark_maybe``); parentheses only where a looser expression sits inside a tighter one.
Epsilon is ``()`` (an empty top-level alternative is left empty). A top-level alternative
carries its alias ``-> name``; a rule with aliases, or a long one, puts one alternative on
each line.

Grammars from GBNF / xgrammar EBNF are converted: literals become strings (anonymous tokens:
with lark's Earley parser the language is the same strings), a character class becomes a
``"a".."z"`` range or a ``/[...]/`` regexp, ``x{m,}`` becomes ``x ~ m x*``, rule names become
lark rule names (lowercase, ``-`` → ``_``, the start rule → ``start``). A lookahead
assertion has no Lark form: GrammarError. Round trips: for a grammar read from .lark,
``parse_lark(write_lark(g)) == g``.
"""

from __future__ import annotations

import re

from ..grammar import (Alt, CharClass, Directive, Epsilon, Expr, Grammar, GrammarError, Literal, Ref,
                       Regex, Repeat, Rule, Seq, Terminal)
from ..grammar.expr import rename_refs, transform
from .lark_imports import imported_names
from .lark_maybe import is_maybe
from .lark_text import ci_string_text, class_char, quote_regexp, quote_string, range_compiles_as_written

ALT, SEQ, POSTFIX, ATOM = range(4)
LINE_WIDTH = 100
_RULE_NAME = re.compile(r"_?[a-z][_a-z0-9]*")
_TERM_NAME = re.compile(r"_?[A-Z][_A-Z0-9]*")


def write_lark(grammar: Grammar) -> str:
    """The .lark text of ``grammar`` (see the module docstring)."""
    grammar = _lark_names(grammar)
    skip = imported_names(grammar) if grammar.dialect == "lark" else set()
    overridden = {d.args[0] for d in grammar.directives if d.name == "override" and d.args}
    defs = {r.name: r for r in (*grammar.rules, *grammar.terminals)}
    out: list[str] = []
    if grammar.header:
        out += [_comment_lines(grammar.header), ""]
    sections = [[_definition(r) for r in grammar.rules if r.name not in skip | overridden],
                [_definition(t, terminal=True) for t in grammar.terminals if t.name not in skip | overridden],
                _directives(grammar.directives, defs, {t.name for t in grammar.terminals})]
    for section in sections:
        if section:
            out += section + [""]
    return "\n".join(out).rstrip("\n") + "\n"


# ---------------------------------------------------------------- definitions


def _definition(rule: Rule, terminal: bool = False) -> str:
    if rule.lookahead is not None:
        raise GrammarError(f"rule '{rule.name}' has a lookahead assertion, which Lark cannot express",
                           rule.pos)
    alts = list(rule.body.items) if isinstance(rule.body, Alt) else [rule.body]
    if rule.aliases and len(rule.aliases) != len(alts):
        raise GrammarError(f"rule '{rule.name}' has {len(rule.aliases)} aliases for {len(alts)} "
                           f"alternatives", rule.pos)
    if terminal and rule.aliases:
        raise GrammarError(f"terminal '{rule.name}' cannot have aliases", rule.pos)
    texts = [_alternative(a, al) for a, al in zip(alts, rule.aliases or [None] * len(alts))]
    head = f"{'' if terminal else _modifiers(rule.flags)}{rule.name}"
    if rule.priority is not None:
        head += f".{rule.priority}"
    one_line = f"{head}: " + " | ".join(texts)
    if len(texts) > 1 and (rule.aliases or len(one_line) > LINE_WIDTH):
        pad = " " * len(head)
        text = f"{head}: {texts[0]}".rstrip() + "".join(f"\n{pad}| {t}".rstrip() for t in texts[1:])
    else:
        text = one_line.rstrip()
    if rule.comment:
        text = _comment_lines(rule.comment) + "\n" + text
    return text


def _modifiers(flags: str) -> str:
    """Lark's rule modifiers in the order ``!?`` (lark reads ``?!`` too; llguidance only
    ``!?``: "expecting rule, token or statement" at the ``?`` of ``?!rule``)."""
    return ("!" if "!" in flags else "") + ("?" if "?" in flags else "")


def _alternative(e: Expr, alias: str | None) -> str:
    text = "" if isinstance(e, Epsilon) else expr_text(e, SEQ)
    return f"{text} -> {alias}".strip() if alias else text


def _comment_lines(text: str) -> str:
    return "\n".join(f"// {line}".rstrip() for line in text.split("\n"))


# ---------------------------------------------------------------- expressions


def expr_text(e: Expr, context: int = ALT) -> str:
    """``e`` as a Lark expression, parenthesized for a ``context`` of the given tightness."""
    if isinstance(e, Alt):
        text = " | ".join("" if isinstance(i, Epsilon) else expr_text(i, SEQ) for i in e.items)
        return f"({text.strip()})" if context > ALT else text.strip()
    if isinstance(e, Seq):
        text = " ".join(expr_text(i, POSTFIX) for i in e.items)
        return f"({text})" if context > SEQ else text
    if isinstance(e, Repeat):
        return _repeat(e, context)
    if isinstance(e, Epsilon):
        return "()"
    if isinstance(e, Literal):
        return quote_string(e.text)
    if isinstance(e, Regex):
        text = ci_string_text(e)
        return quote_string(text) + "i" if text is not None else quote_regexp(e.pattern, e.flags)
    if isinstance(e, (Ref, Terminal)):
        return e.name
    if isinstance(e, CharClass):
        return _char_class(e)
    raise GrammarError(f"cannot write {type(e).__name__} in Lark")


def _repeat(e: Repeat, context: int) -> str:
    if is_maybe(e):  # read as [x]: lark's tree has a None where it is absent (lark_maybe)
        return f"[{expr_text(e.item, ALT)}]"
    lo, hi = e.min, e.max
    if hi is None and lo >= 2:  # x{m,}: no Lark operator
        return expr_text(Seq((Repeat(e.item, lo, lo), Repeat(e.item, 0, None))), context)
    inner = expr_text(e.item, ATOM)
    if (lo, hi) == (0, 1):
        op = "?"
    elif (lo, hi) == (0, None):
        op = "*"
    elif (lo, hi) == (1, None):
        op = "+"
    elif lo == hi:
        op = f" ~ {lo}"
    else:
        op = f" ~ {lo}..{hi}"
    text = inner + op
    return f"({text})" if context > POSTFIX else text


def _char_class(c: CharClass) -> str:
    if not c.negated and len(c.ranges) == 1:
        lo, hi = c.ranges[0]
        raw_lo, raw_hi = quote_string(chr(lo))[1:-1], quote_string(chr(hi))[1:-1]
        if range_compiles_as_written(raw_lo, raw_hi, lo, hi):
            return f'"{raw_lo}".."{raw_hi}"'
    if not c.ranges:
        if not c.negated:
            raise GrammarError("an empty character class has no Lark form")
        return quote_regexp("[\\x00-\\U0010ffff]")
    body = "".join(class_char(lo) if lo == hi else f"{class_char(lo)}-{class_char(hi)}" for lo, hi in c.ranges)
    return quote_regexp(f"[{'^' if c.negated else ''}{body}]")


# ---------------------------------------------------------------- directives


def _directives(directives: tuple[Directive, ...], defs: dict[str, Rule], terminals: set[str]) -> list[str]:
    out: list[str] = []
    group: list[Directive] = []

    def flush() -> None:
        if group:
            out.append(_import_line(group))
            group.clear()

    for d in directives:
        if d.name == "import" and len(d.args) == 2 and (not group or group[0].args[0] == d.args[0]):
            group.append(d)
            continue
        flush()
        if d.name == "import" and len(d.args) == 2:
            group.append(d)
        elif d.name == "import" and len(d.args) == 3:
            path, name, alias = d.args
            out.append(f"%import {_dotted(path, name)} -> {alias}")
        elif d.name == "ignore" and len(d.args) == 1:
            out.append(f"%ignore {d.args[0]}")
        elif d.name == "declare" and d.args:
            out.append("%declare " + " ".join(d.args))
        elif d.name == "override" and len(d.args) == 1 and d.args[0] in defs:
            rule = defs[d.args[0]]
            out.append("%override " + _definition(rule, terminal=rule.name in terminals))
        else:
            raise GrammarError(f"cannot write the directive %{d.name} {' '.join(d.args)} in Lark", d.pos)
    flush()
    return out


def _import_line(group: list[Directive]) -> str:
    path = group[0].args[0]
    if len(group) == 1:
        return f"%import {_dotted(path, group[0].args[1])}"
    return f"%import {path} ({', '.join(d.args[1] for d in group)})"


def _dotted(path: str, name: str) -> str:
    return f"{path}.{name}" if path not in ("", ".") else f"{path}{name}"


# ---------------------------------------------------------------- names


def _lark_names(grammar: Grammar) -> Grammar:
    """``grammar`` with rule and terminal names Lark accepts; a grammar from another
    dialect also gets its start rule named ``start``. Names already valid are kept."""
    keep = imported_names(grammar) if grammar.dialect == "lark" else set()
    taken = {r.name for r in (*grammar.rules, *grammar.terminals)}
    rules_map: dict[str, str] = {}
    if grammar.dialect != "lark" and grammar.start and grammar.start != "start":
        rules_map[grammar.start] = "start"
    used = set(taken) | set(rules_map.values())
    for r in grammar.rules:
        if r.name in keep or r.name in rules_map:
            continue
        if r.name == "start" and grammar.dialect != "lark" and grammar.start != "start":
            rules_map[r.name] = _unique("start_", used)
        elif not _RULE_NAME.fullmatch(r.name) or r.name.startswith("__"):
            rules_map[r.name] = _unique(_sanitize(r.name, lower=True), used)
    terms_map = {t.name: _unique(_sanitize(t.name, lower=False), used) for t in grammar.terminals
                 if t.name not in keep and (not _TERM_NAME.fullmatch(t.name) or t.name.startswith("__"))}
    if not rules_map and not terms_map:
        return grammar
    rename_t = (lambda e: Terminal(terms_map.get(e.name, e.name)) if isinstance(e, Terminal) else e)

    def fix(r: Rule, mapping: dict[str, str]) -> Rule:
        from dataclasses import replace

        body = transform(rename_refs(r.body, rules_map), rename_t)
        return replace(r, name=mapping.get(r.name, r.name), body=body)

    return Grammar(tuple(fix(r, rules_map) for r in grammar.rules), rules_map.get(grammar.start, grammar.start),
                   tuple(fix(t, terms_map) for t in grammar.terminals), grammar.directives,
                   grammar.dialect, grammar.header)


def _sanitize(name: str, lower: bool) -> str:
    text = re.sub(r"[^A-Za-z0-9_]", "_", name)
    text = text.lower() if lower else text.upper()
    text = text.lstrip("_")
    if not text or not text[0].isalpha():
        text = ("r_" if lower else "T_") + text
    return text


def _unique(base: str, used: set[str]) -> str:
    name, k = base, 2
    while name in used:
        name, k = f"{base}_{k}", k + 1
    used.add(name)
    return name
