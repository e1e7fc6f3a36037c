"""Read a .lark grammar into the IR with lark's own grammar loader.

    parse_lark(text, path=None, start=None, import_paths=()) -> Grammar

How lark's pre-compilation trees (still EBNF) map to the IR:

    a: x y | z -> al       Rule("a", alt(seq(x, y), z), aliases=(None, "al"))
    (a | b) -> al          the alias distributed over a and b, as lark itself does
    x? / [x]               Repeat(x, 0, 1) / Maybe(x) (a Repeat written back as [x]: an
                           absent [x] is a None in lark's tree, lark_maybe)
    x* / x+                Repeat(x, 0, None) / Repeat(x, 1, None)
    x ~ m / x ~ m..n       Repeat(x, m, m) / Repeat(x, m, n)
    "abc"                  Literal("abc") — in a rule, one anonymous lexer token
    "abc"i                 Regex("(?i:abc)") — see lark_text
    /re/flags              Regex(pattern, flags), pattern after lark's escaping
    "a".."z"               CharClass (one code point; in a rule an anonymous token)
    TERM / rule            Terminal("TERM") / Ref("rule")
    ""                     Epsilon — llguidance's meaning; stock lark refuses it
    ?rule, !rule, rule.2   Rule.flags ("?", "!", "!?"), Rule.priority; TERM.2 likewise
    %ignore X / %declare A B   Directive("ignore", (expression text,)), Directive("declare", ("A", "B"))
    %import common.X -> Y  Directive("import", ("common", "X", "Y")) — one per name
                           (alias omitted when equal to the name; ".csv" for a relative
                           path); the imported definitions are in the IR too, after the
                           file's own, under lark's names (dependencies of imported rules
                           as lark mangles them: ``csv__row``; imported terminals have
                           their references inlined by lark). The writer prints the import
                           instead of them.
    %override / %extend    folded into the definition (extend: the new alternatives
                           first, as lark does); of an imported name, the definition is
                           the file's own and Directive("override", (name,)) records it
    templates              expanded, as lark does: each distinct use ``t{a, b}`` becomes a
                           rule ``t__a__b`` (uniquified) with the template's modifiers; the
                           template definitions are not kept. Same language; the parse tree
                           names the rule differently than lark's ``t{a,b}``.

Order: the file's rules in source order, then rules created by its template uses, then
imported rules; terminals: the file's, then imported ones. ``start`` defaults to "start";
``start=""`` reads a rule library (no start rule), and Grammar.start is then "".

Errors: lark's syntax and semantic errors, bad literals and regexps, and what the IR cannot
hold (nested aliases, declared rules, ranges lark would mis-compile) raise GrammarError
with a position; nothing else escapes.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Callable, Sequence

from lark import Token, Tree
from lark.grammar import Symbol

from ..grammar import (Alt, CharClass, Directive, Epsilon, Expr, Grammar, GrammarError, Literal, Ref,
                       Regex, Repeat, Rule, SourcePos, Terminal, alt, seq)
from .lark_maybe import Maybe
from .lark_source import Statement, comments, parse_statements
from .lark_text import ci_string, range_compiles_as_written, range_endpoint, read_literal
from .lark_writer import expr_text

MAX_REPEAT = 100_000  # bound on ~ m..n: beyond it lark's own BNF expansion is the problem
MAX_TEMPLATE_USES = 10_000  # distinct template instances in one grammar
MAX_TEMPLATE_DEPTH = 40  # instances created while creating another: t{x} needing t{t{x}}…

ImportPath = str | Callable


@dataclass
class _Def:
    """A definition before conversion: a raw (local) or prepared (imported) lark tree."""

    name: str
    is_term: bool
    tree: Tree
    params: tuple[str, ...] = ()
    flags: str = ""
    priority: int | None = None
    pos: SourcePos | None = None
    comment: str = ""
    extensions: list[Tree] = field(default_factory=list)  # %extend trees, newest first


def parse_lark(text: str, path: str | None = None, start: str | None = None,
               import_paths: Sequence[ImportPath] = ()) -> Grammar:
    """The IR of the .lark grammar ``text`` (see the module docstring).

    ``path`` names the file: relative imports (``%import .csv.X``) are looked up in its
    folder. ``import_paths`` are searched first — folders, or callables
    ``(base_path, grammar_path) -> (full_path, text)`` as lark's ``import_paths`` takes.
    """
    try:
        return _parse(text, path, "start" if start is None else start, tuple(import_paths))
    except GrammarError as e:
        if e.pos is None:  # every error names a place: the file's start when nothing better
            raise GrammarError(e.message, SourcePos(1, 1)) from None
        raise
    except RecursionError:
        raise GrammarError("grammar nested too deeply", SourcePos(1, 1)) from None


def _parse(text: str, path: str | None, start: str, import_paths: tuple) -> Grammar:
    stmts = parse_statements(text)
    if not any(s.kind in ("rule", "term", "import") for s in stmts) and start:
        raise GrammarError("empty grammar: no rule defined")
    _check_relative_imports(stmts, path, import_paths)
    _check_aliases(stmts)
    builder = _lark_builder(text, path, import_paths, stmts)
    header, notes = comments(text, stmts)
    local, overridden, directives = _local_definitions(stmts, notes)
    conv = _Converter(_templates(local, builder), {str(n) for n in builder._definitions})
    rules, terms = [], []
    for d in local.values():
        if not d.params:
            (terms if d.is_term else rules).append(conv.definition(d))
    rules += conv.take_expansions()
    declared = {a for d in directives if isinstance(d, Directive) and d.name == "declare" for a in d.args}
    imported_rules, imported_terms = _imported(builder, local.keys() | declared, overridden, stmts)
    for d in imported_rules:
        rules.append(conv.definition(d))
    rules += conv.take_expansions()
    terms += [conv.definition(d) for d in imported_terms]
    directives = [_ignore_directive(d, conv) if isinstance(d, _PendingIgnore) else d for d in directives]
    if start and start not in {r.name for r in rules}:
        raise GrammarError(f"missing start rule '{start}' (pass start=NAME for another start rule, "
                           f"or start='' to read a rule library)")
    return Grammar(tuple(rules), start, tuple(terms), tuple(directives), dialect="lark", header=header)


# ---------------------------------------------------------------- lark's builder


def _lark_builder(text: str, path: str | None, import_paths: tuple, stmts: list[Statement]):
    """Lark's GrammarBuilder over ``text``: resolves imports and runs lark's own checks
    (duplicates, undefined symbols, template arity, recursion in terminals)."""
    from lark.exceptions import LarkError
    from lark.load_grammar import GrammarBuilder

    builder = GrammarBuilder(False, list(import_paths))
    name = os.path.abspath(path) if path else "<gramopt-input>"
    try:
        builder.load_grammar(text, name)
        builder.validate()
    except GrammarError:
        raise
    except (LarkError, AssertionError, OSError, RuntimeError, ValueError, KeyError, TypeError) as e:
        raise _lark_error(e, stmts) from None
    return builder


def _lark_error(e: Exception, stmts: list[Statement]) -> GrammarError:
    message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    if isinstance(e, OSError):
        target = e.filename or message
        message = f"cannot import '{target}': grammar file not found"
        pos = next((s.pos for s in stmts if s.kind == "import"), None)
        return GrammarError(message, pos)
    return GrammarError(message, _locate(message, stmts))


def _locate(message: str, stmts: list[Statement]) -> SourcePos | None:
    """Best position for a lark message that has none: the first name it quotes (or
    mentions) that is a token of the file; for 'defined more than once', the last one."""
    tokens: dict[str, list[Token]] = {}
    for st in stmts:
        for tok in st.tree.scan_values(lambda v: isinstance(v, Token)):
            if tok.type in ("RULE", "TERMINAL"):
                tokens.setdefault(str(tok), []).append(tok)
    quoted = re.findall(r"'([A-Za-z_][A-Za-z_0-9]*)'", message)
    words = re.findall(r"[A-Za-z_][A-Za-z_0-9]*", message)
    for name in (*quoted, *words):
        if name in tokens:
            tok = tokens[name][-1] if "more than once" in message else tokens[name][0]
            return SourcePos(tok.line, tok.column)
    if "import" in message.lower():
        return next((s.pos for s in stmts if s.kind == "import"), None)
    return None


def _check_relative_imports(stmts: list[Statement], path: str | None, import_paths: tuple) -> None:
    if path or import_paths:
        return
    for st in stmts:
        if st.kind == "import" and st.tree.children[0].data == "import_rel":
            raise GrammarError("a relative %import needs the grammar's file path", st.pos)


def _check_aliases(stmts: list[Statement]) -> None:
    """An alias only on a top-level alternative of a rule (lark would misreport it)."""
    for st in stmts:
        tree = st.tree.children[0] if st.kind in ("override", "extend") else st.tree
        if tree.data not in ("rule", "term"):
            continue
        top = tree.children[-1]
        for node in top.iter_subtrees():
            if node.data == "alias" and (node not in top.children or tree.data == "term"):
                what = "in a terminal" if tree.data == "term" else "inside parentheses"
                raise GrammarError(f"an alias (-> name) {what}: only a rule's top-level alternative "
                                   f"can have one", _tree_pos(node.children[1]) or st.pos)


# ---------------------------------------------------------------- the file's statements


def _local_definitions(stmts: list[Statement], notes: dict[int, str]):
    """The file's definitions (folded %override / %extend), the names overridden that
    come from imports, and its directives in source order."""
    local: dict[str, _Def] = {}
    overridden: list[str] = []
    directives: list[Directive] = []
    for i, st in enumerate(stmts):
        if st.kind in ("rule", "term"):
            d = _definition(st.tree, st.pos, notes.get(i, ""))
            local[d.name] = d
        elif st.kind in ("override", "extend"):
            d = _definition(st.tree.children[0], st.pos, notes.get(i, ""))
            if d.name in local and (d.params or local[d.name].params):
                raise GrammarError(f"%{st.kind} of the template '{d.name}' is not supported", st.pos)
            if st.kind == "extend" and d.name in local:
                local[d.name].extensions.insert(0, d.tree)
            elif st.kind == "override" and d.name in local:
                local[d.name] = _Def(d.name, d.is_term, d.tree, d.params, d.flags, d.priority,
                                     local[d.name].pos, local[d.name].comment)
            else:  # the target is imported: lark checked it exists
                overridden.append(d.name)
                directives.append(Directive("override", (d.name,), st.pos))
        elif st.kind == "declare":
            directives.append(_declare(st))
        elif st.kind == "import":
            directives.extend(_imports(st))
        elif st.kind == "ignore":  # converted once the templates are known
            directives.append(_PendingIgnore(st.tree.children[0], st.pos))
    return local, overridden, directives


@dataclass(frozen=True)
class _PendingIgnore:
    tree: Tree
    pos: SourcePos


def _definition(tree: Tree, pos: SourcePos, comment: str) -> _Def:
    if tree.data == "rule":
        mods, name_tok, params, prio, body = tree.children
        m = str(mods.children[0]) if mods.children else ""
        flags = "".join(c for c in "?!" if c in m)
        priority = int(prio.children[0]) if prio.children else None
        names = tuple(str(t) for t in params.children) if params is not None else ()
        return _Def(str(name_tok), False, body, names, flags, priority,
                    SourcePos(name_tok.line, name_tok.column), comment)
    name_tok, *rest = tree.children
    priority = int(rest[0]) if len(rest) == 2 else None
    return _Def(str(name_tok), True, rest[-1], (), "", priority or None,
                SourcePos(name_tok.line, name_tok.column), comment)


def _declare(st: Statement) -> Directive:
    names = []
    for sym in st.tree.children:
        name = str(sym.children[0])
        if sym.data == "nonterminal":
            tok = sym.children[0]
            raise GrammarError(f"%declare of the rule '{name}' is not supported: gramopt cannot know "
                               f"its language", SourcePos(tok.line, tok.column))
        names.append(name)
    return Directive("declare", tuple(names), st.pos)


def _imports(st: Statement) -> list[Directive]:
    """One Directive per imported name: (path, name) or (path, name, alias)."""
    path_node, *rest = st.tree.children
    parts = [str(t) for t in path_node.children]
    prefix = "." if path_node.data == "import_rel" else ""
    if rest and isinstance(rest[0], Tree):  # %import path (A, B)
        return [Directive("import", (prefix + ".".join(parts), str(n)), st.pos) for n in rest[0].children]
    name = parts[-1]
    alias = str(rest[0]) if rest else name
    args = (prefix + ".".join(parts[:-1]), name) + ((alias,) if alias != name else ())
    return [Directive("import", args, st.pos)]


def _ignore_directive(d: _PendingIgnore, conv: "_Converter") -> Directive:
    expr = conv.expr(d.tree, is_term=True, pos=d.pos)
    if isinstance(expr, Epsilon):
        raise GrammarError("%ignore of an empty expression", d.pos)
    return Directive("ignore", (expr_text(expr),), d.pos)


def _templates(local: dict[str, _Def], builder) -> dict[str, _Def]:
    """Every template (a rule with parameters), the file's and imported ones."""
    out = {d.name: d for d in local.values() if d.params}
    for name, d in builder._definitions.items():
        name = str(name)
        if d.params and name not in out:
            out[name] = _Def(name, False, d.tree, tuple(d.params), *_options(d))
    return out


def _options(d) -> tuple[str, int | None]:
    """(flags, priority) of a lark Definition."""
    if d.is_term:
        return "", (d.options or None) if isinstance(d.options, int) else None
    o = d.options
    flags = ("?" if o.expand1 else "") + ("!" if o.keep_all_tokens else "")
    return flags, o.priority


# ---------------------------------------------------------------- imported definitions


def _imported(builder, local: set[str], overridden: list[str], stmts: list[Statement]):
    """(rules, terminals) lark's builder holds beyond the file's own definitions, in its
    order; an overridden or extended import is the file's definition (lark folded it)."""
    import_pos = next((s.pos for s in stmts if s.kind == "import"), None)
    rules, terms = [], []
    for name, d in builder._definitions.items():
        name = str(name)
        if name in local or name.startswith("__IGNORE_") or d.params:
            continue
        if d.tree is None:
            raise GrammarError(f"the imported '{name}' is only declared (%declare): gramopt cannot know "
                               f"its language", import_pos)
        flags, priority = _options(d)
        pos = next((s.pos for s in stmts if s.kind in ("override", "extend")
                    and _definition(s.tree.children[0], s.pos, "").name == name), import_pos)
        item = _Def(name, d.is_term, d.tree, (), flags, priority, pos if name in overridden else import_pos)
        (terms if d.is_term else rules).append(item)
    return rules, terms


# ---------------------------------------------------------------- trees → IR


class _Converter:
    """Lark definition trees → IR, expanding template uses into rules on the way."""

    def __init__(self, templates: dict[str, _Def], taken: set[str]):
        self.templates = templates
        self.taken = set(taken)
        self.memo: dict[tuple, str] = {}
        self.pending: list[Rule] = []
        self.uses = 0
        self.depth = 0

    def take_expansions(self) -> list[Rule]:
        out, self.pending = self.pending, []
        return out

    # ------------------------------------------------------------ definitions
    def definition(self, d: _Def) -> Rule:
        body, aliases = self.alternatives(d.tree, d, {})
        for ext in d.extensions:
            b2, a2 = self.alternatives(ext, d, {})
            body, aliases = _join(b2, a2, body, aliases)
        if d.is_term:
            if aliases:
                raise GrammarError(f"aliases are not allowed in terminals ('{d.name}')", d.pos)
            if isinstance(body, Epsilon):
                raise GrammarError(f"terminal '{d.name}' is empty", d.pos)
        elif aliases and d.name.startswith("_"):
            raise GrammarError(f"rule '{d.name}' is inlined (its name starts with '_') and cannot "
                               f"have aliases", d.pos)
        return Rule(d.name, body, flags=d.flags, priority=d.priority, aliases=aliases,
                    comment=d.comment, pos=d.pos)

    def alternatives(self, tree: Tree, d: _Def, subst: dict) -> tuple[Expr, tuple]:
        """(body, aliases) of a definition's top-level ``expansions``."""
        pairs: list[tuple[Expr, str | None]] = []
        for child in _alternatives(tree):
            alias = None
            if isinstance(child, Tree) and child.data == "alias":
                child, alias_node = child.children
                alias = _name(alias_node)
            e = self.expr(child, d.is_term, d.pos, subst, d)
            items = e.items if isinstance(e, Alt) else (e,)
            pairs.extend((item, alias) for item in items)
        body = alt(*(e for e, _ in pairs))
        aliases = tuple(a for _, a in pairs) if any(a for _, a in pairs) else ()
        return body, aliases

    # ------------------------------------------------------------ expressions
    def expr(self, node, is_term: bool, pos: SourcePos | None, subst: dict | None = None,
             d: _Def | None = None) -> Expr:
        subst = subst or {}
        if not isinstance(node, Tree):
            return self.symbol(node, is_term, pos, subst)
        kind = node.data
        if kind == "expansions":
            return alt(*(self.expr(c, is_term, pos, subst, d) for c in _alternatives(node)))
        if kind == "expansion":
            return seq(*(self.expr(c, is_term, pos, subst, d) for c in node.children))
        if kind == "alias":
            raise GrammarError("an alias (-> name) is only allowed on a top-level alternative",
                               _tree_pos(node) or pos)
        if kind == "expr":
            return self.repeat(node, is_term, pos, subst, d)
        if kind == "maybe":
            return Maybe(self.expr(node.children[0], is_term, pos, subst, d))
        if kind == "value":
            return self.expr(node.children[0], is_term, pos, subst, d)
        if kind in ("terminal", "nonterminal"):
            return self.symbol(node, is_term, pos, subst)
        if kind == "literal":
            return _literal(node.children[0], pos)
        if kind == "range":
            return _range(*node.children, pos=pos)
        if kind == "template_usage":
            if is_term:
                raise GrammarError("templates cannot be used in terminals", _tree_pos(node) or pos)
            return self.template_use(node, pos, subst, d)
        raise GrammarError(f"unsupported lark construct '{kind}'", _tree_pos(node) or pos)

    def repeat(self, node: Tree, is_term, pos, subst, d) -> Expr:
        atom, op, *nums = node.children
        item = self.expr(atom, is_term, pos, subst, d)
        where = SourcePos(op.line, op.column) if isinstance(op, Token) and op.line else pos
        if op == "?":
            return Repeat(item, 0, 1)
        if op == "*":
            return Repeat(item, 0, None)
        if op == "+":
            return Repeat(item, 1, None)
        lo, hi = int(nums[0]), int(nums[-1])
        if lo < 0 or hi < lo:
            raise GrammarError(f"bad repetition range ~ {lo}..{hi}", where)
        if hi > MAX_REPEAT:
            raise GrammarError(f"repetition bound {hi} is too large (at most {MAX_REPEAT})", where)
        return Repeat(item, lo, hi)

    def symbol(self, node, is_term: bool, pos, subst: dict) -> Expr:
        name, term = _symbol_name(node)
        if name in subst:
            return subst[name]
        if term:
            return Terminal(name)
        if is_term:
            raise GrammarError(f"rules are not allowed inside terminals ('{name}')", _tree_pos(node) or pos)
        if name in self.templates:
            raise GrammarError(f"template '{name}' used without arguments", _tree_pos(node) or pos)
        return Ref(name)

    # ------------------------------------------------------------ templates
    def template_use(self, node: Tree, pos, subst: dict, d: _Def | None) -> Expr:
        head, *arg_nodes = node.children
        tname, _ = _symbol_name(head)
        if tname in subst:  # a template passed as an argument
            target = subst[tname]
            if not isinstance(target, Ref):
                raise GrammarError(f"'{tname}' is used as a template but bound to a non-rule",
                                   _tree_pos(node) or pos)
            tname = target.name
        template = self.templates.get(tname)
        if template is None:
            raise GrammarError(f"template '{tname}' used but not defined", _tree_pos(node) or pos)
        args = tuple(self.template_arg(a, pos, subst, d) for a in arg_nodes)
        if len(args) != len(template.params):
            raise GrammarError(f"template '{tname}' takes {len(template.params)} arguments, got {len(args)}",
                               _tree_pos(node) or pos)
        key = (tname, args)
        if key not in self.memo:
            self.uses += 1
            if self.uses > MAX_TEMPLATE_USES or self.depth >= MAX_TEMPLATE_DEPTH:
                raise GrammarError(f"template '{tname}' expands without end (over {MAX_TEMPLATE_USES} "
                                   f"instances, or nested {MAX_TEMPLATE_DEPTH} deep)", _tree_pos(node) or pos)
            name = self._fresh(tname, args)
            self.memo[key] = name
            inner = dict(zip(template.params, args))
            self.depth += 1
            try:
                body, aliases = self.alternatives(template.tree, template, inner)
            finally:
                self.depth -= 1
            if aliases and name.startswith("_"):
                raise GrammarError(f"template '{tname}' is inlined (its name starts with '_') and cannot "
                                   f"have aliases", template.pos)
            self.pending.append(Rule(name, body, flags=template.flags, priority=template.priority,
                                     aliases=aliases, pos=template.pos))
        return Ref(self.memo[key])

    def template_arg(self, node, pos, subst: dict, d: _Def | None) -> Expr:
        """An argument: any value, or a bare template name (passed on to be used as ``f{x}``)."""
        if isinstance(node, Tree) and node.data == "value":
            node = node.children[0]
        name, term = _symbol_name(node) if _is_symbol(node) else (None, False)
        if name is not None and not term and name in self.templates and name not in subst:
            return Ref(name)
        return self.expr(node, False, pos, subst, d)

    def _fresh(self, tname: str, args: tuple[Expr, ...]) -> str:
        base = "__".join([tname] + [_arg_word(a) for a in args])
        name, k = base, 2
        while name in self.taken:
            name, k = f"{base}_{k}", k + 1
        self.taken.add(name)
        return name


def _join(b1: Expr, a1: tuple, b2: Expr, a2: tuple) -> tuple[Expr, tuple]:
    """Alternatives ``b1`` then ``b2``, with their aliases."""
    n1 = len(b1.items) if isinstance(b1, Alt) else 1
    n2 = len(b2.items) if isinstance(b2, Alt) else 1
    if a1 or a2:
        return alt(b1, b2), (a1 or (None,) * n1) + (a2 or (None,) * n2)
    return alt(b1, b2), ()


def _alternatives(tree: Tree) -> list:
    if isinstance(tree, Tree) and tree.data == "expansions":
        out = []
        for c in tree.children:  # %extend nests an expansions tree in lark's folded trees
            out.extend(_alternatives(c) if isinstance(c, Tree) and c.data == "expansions" else [c])
        return out
    return [tree]


def _arg_word(e: Expr) -> str:
    if isinstance(e, (Ref, Terminal)):
        word = e.name.lower()
    elif isinstance(e, Literal):
        word = "".join(c if c.isalnum() and c.isascii() else "_" for c in e.text.lower()).strip("_") or "lit"
    else:
        word = type(e).__name__.lower()
    return re.sub(r"[^a-z0-9_]", "_", word).lstrip("_") or "arg"


def _symbol_name(node) -> tuple[str, bool]:
    """(name, is_terminal) of a prepared Symbol or a raw terminal/nonterminal tree."""
    if isinstance(node, Symbol):
        return node.name, node.is_term
    if isinstance(node, Tree) and node.data in ("terminal", "nonterminal"):
        return str(node.children[0]), node.data == "terminal"
    if isinstance(node, Tree) and node.data == "value":
        return _symbol_name(node.children[0])
    raise GrammarError(f"expected a rule or terminal name, got {node!r}"[:200])


def _is_symbol(node) -> bool:
    return isinstance(node, Symbol) or (isinstance(node, Tree) and node.data in ("terminal", "nonterminal"))


def _name(node) -> str:
    return _symbol_name(node)[0]


def _tree_pos(node) -> SourcePos | None:
    if isinstance(node, Token) and node.line:
        return SourcePos(node.line, node.column)
    if isinstance(node, Tree):
        for tok in node.scan_values(lambda v: isinstance(v, Token)):
            if tok.line:
                return SourcePos(tok.line, tok.column)
    return None


def _literal(tok: Token, pos: SourcePos | None) -> Expr:
    where = _tree_pos(tok) or pos
    raw = str(tok)
    if tok.type == "STRING" and raw in ('""', '""i'):
        return Epsilon()  # llguidance's empty string; stock lark refuses it
    try:
        value, flags = read_literal(raw, tok.type)
    except GrammarError as e:
        raise GrammarError(e.message, where) from None
    if tok.type == "STRING":
        return ci_string(value) if "i" in flags else Literal(value)
    _check_regexp(value, flags, where)
    return Regex(value, flags)


def _check_regexp(pattern: str, flags: str, where: SourcePos | None) -> None:
    """The regexp compiles as lark compiles it (Python re, each flag a scoped group); a
    Unicode property ``\\p{XID_Start}`` as ``Lark(..., regex=True)`` compiles it (the
    ``regex`` module). gramopt never looks inside a Lark regexp (an atom of the lexer)."""
    wrapped = pattern
    for f in flags:
        wrapped = f"(?{f}:{wrapped})"
    try:
        re.compile(wrapped)
    except (re.error, OverflowError, RecursionError, ValueError) as e:
        if _UNICODE_PROPERTY.search(pattern) and _compiles_with_regex(wrapped):
            return
        raise GrammarError(f"bad regular expression /{pattern}/{flags}: {e}", where) from None


_UNICODE_PROPERTY = re.compile(r"\\[pP]\{")


def _compiles_with_regex(pattern: str) -> bool:
    """Whether the ``regex`` module (lark's ``regex=True``) compiles ``pattern``; False
    when it is not installed."""
    try:
        import regex
    except ImportError:
        return False
    try:
        regex.compile(pattern)
    except Exception:  # noqa: BLE001 - regex.error, or its limits
        return False
    return True


def _range(lo_tok: Token, hi_tok: Token, pos: SourcePos | None) -> CharClass:
    where = _tree_pos(lo_tok) or pos
    raws = []
    for tok in (lo_tok, hi_tok):
        raw = str(tok)
        if not raw.endswith('"'):
            raise GrammarError(f"a range endpoint cannot have flags ({raw})", _tree_pos(tok) or where)
        value = range_endpoint(raw[1:-1])
        if value is None:
            raise GrammarError(f"a range endpoint must be one character, got {raw}", _tree_pos(tok) or where)
        raws.append((raw[1:-1], ord(value)))
    (raw_lo, lo), (raw_hi, hi) = raws
    if lo > hi:
        raise GrammarError(f"bad range {lo_tok}..{hi_tok}: first character after the second", where)
    if not range_compiles_as_written(raw_lo, raw_hi, lo, hi):
        raise GrammarError(f"lark compiles the range {lo_tok}..{hi_tok} to the regexp [{raw_lo}-{raw_hi}], "
                           f"which is not that range: write a /[...]/ regexp", where)
    return CharClass(((lo, hi),))
