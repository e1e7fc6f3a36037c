"""xgrammar's structural tags (tool calling) → a Grammar: what a serving user passes as
``response_format = {"type": "structural_tag", "format": {...}}``.

    grammar = parse_structural_tag(json_text_or_dict)
    Matcher(grammar, vocab)             # the runtime serves it like any grammar

Formats read (xgrammar 0.2.8's ``structural_tag.py``; the others raise ``GrammarError``):

    const_string    the string
    json_schema     json_schema.py's subset (style "json" only)
    grammar         xgrammar EBNF, its rules renamed apart (``<prefix>_<name>``)
    regex           xgrammar's regex meaning (regex_macro.py)
    any_text        any text; inside a tag, text not containing the tag's end strings,
                    as xgrammar does (a TagDispatch without triggers), plus ``excludes``
    sequence, or    concatenation, union
    optional, star, plus, repeat
    tag             begin content end (end: one string or several)
    triggered_tags  free text; each trigger starts the tags whose begin it prefixes
                    (TagDispatch, grammar/tag_dispatch.py); ``at_least_one`` puts one
                    whole tag first; ``stop_after_first`` ends after the first tag;
                    ``excludes`` for the free text
    tags_with_separator  tags joined by the separator (0+, 1+ with ``at_least_one``,
                    at most 1 with ``stop_after_first``)

The shapes follow xgrammar's own lowering (printed by ``xgrammar.Grammar.from_structural_tag``),
so the language is xgrammar's, except that free text here is UTF-8 text where xgrammar's
TagDispatch takes any bytes (tests/test_structural_tag.py checks both).
"""

from __future__ import annotations

import json

from ..grammar import Epsilon, Expr, Grammar, GrammarError, Literal, Ref, Repeat, Rule, alt, rename_refs, seq
from ..grammar.expr import CharClass
from ..grammar.tag_dispatch import TagDispatch, lower_tag_dispatch
from .json_schema import JsonSchemaRules


def parse_structural_tag(spec) -> Grammar:
    """A Grammar (start ``root``) of a structural tag: a dict or JSON text, either the whole
    ``{"type": "structural_tag", "format": ...}`` or the format alone."""
    if isinstance(spec, (str, bytes)):
        try:
            spec = json.loads(spec)
        except json.JSONDecodeError as e:
            raise GrammarError(f"structural tag is not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    if not isinstance(spec, dict):
        raise GrammarError("a structural tag is a JSON object")
    fmt = spec["format"] if spec.get("type") == "structural_tag" else spec
    b = _Builder()
    body = b.format(fmt, "format")
    return Grammar(tuple([Rule("root", body)] + b.rules), "root", dialect="ebnf")


class _Builder:
    def __init__(self) -> None:
        self.rules: list[Rule] = []
        self.taken = {"root"}
        self.json = JsonSchemaRules(self.taken)

    @property
    def all_rules(self) -> list[Rule]:
        return self.rules

    def fresh(self, base: str) -> str:
        name, n = base, 1
        while name in self.taken:
            n += 1
            name = f"{base}_{n}"
        self.taken.add(name)
        return name

    def add(self, base: str, body: Expr) -> Ref:
        name = self.fresh(base)
        self.rules.append(Rule(name, body))
        return Ref(name)

    def free_text(self, base: str, tags: tuple, loop: bool, excludes) -> Ref:
        name = self.fresh(base)
        td = TagDispatch(tuple(tags), loop, tuple(excludes))
        try:
            lowered = lower_tag_dispatch(name, td, self.taken)
        except ValueError as e:
            raise GrammarError(f"{base}: {e}") from None
        self.taken.update(r.name for r in lowered)
        self.rules.extend(lowered)
        return Ref(name)

    def format(self, f, where: str, end_strings: tuple[str, ...] = ()) -> Expr:
        if not isinstance(f, dict) or "type" not in f:
            raise GrammarError(f"{where}: a format is an object with a 'type'")
        kind = f["type"]
        method = getattr(self, "f_" + str(kind), None)
        if method is None:
            raise GrammarError(f"{where}: structural tag format '{kind}' is not supported")
        return method(f, where, end_strings)

    # ------------------------------------------------------------ basic formats
    def f_const_string(self, f, where, ends):
        return Literal(f["value"]) if f["value"] else Epsilon()

    def f_json_schema(self, f, where, ends):
        if f.get("style", "json") != "json" or f.get("any_order") or f.get("max_whitespace_cnt") is not None \
                or f.get("excludes"):
            raise GrammarError(f"{where}: only the plain JSON style of json_schema is supported")
        self.json.rules = []
        expr = self.json.value(f["json_schema"], where)
        self.rules.extend(self.json.rules)
        return expr

    def f_grammar(self, f, where, ends):
        from .ebnf import parse_ebnf
        try:
            g = parse_ebnf(f["grammar"], "ebnf")
        except GrammarError as e:
            raise GrammarError(f"{where}.grammar: {e.message}" + (f" (line {e.pos.line}, column {e.pos.col})"
                                                                   if e.pos else "")) from None
        mapping = {r.name: self.fresh(f"grammar_{r.name}") for r in g.rules}
        for r in g.rules:
            self.rules.append(Rule(mapping[r.name], rename_refs(r.body, mapping),
                                   None if r.lookahead is None else rename_refs(r.lookahead, mapping)))
        return Ref(mapping[g.start])

    def f_regex(self, f, where, ends):
        from .regex_macro import RegexMacroError, regex_to_expr
        try:
            return regex_to_expr(f["pattern"])
        except RegexMacroError as e:
            raise GrammarError(f"{where}.pattern: {e}") from None

    def f_any_text(self, f, where, ends):
        if f.get("max_tokens") is not None or f.get("max_chars") is not None:
            raise GrammarError(f"{where}: any_text with max_tokens/max_chars is not supported")
        excludes = list(f.get("excludes", [])) + [e for e in ends if e not in f.get("excludes", [])]
        if not excludes:
            return Repeat(CharClass((), negated=True), 0, None)
        return self.free_text("any_text", (), False, excludes)

    # ------------------------------------------------------------ combinators
    def f_sequence(self, f, where, ends):
        els = f["elements"]
        return seq(*(self.format(e, f"{where}.elements[{i}]", ends if i == len(els) - 1 else ())
                     for i, e in enumerate(els)))

    def f_or(self, f, where, ends):
        return alt(*(self.format(e, f"{where}.elements[{i}]", ends) for i, e in enumerate(f["elements"])))

    def f_optional(self, f, where, ends):
        return Repeat(self.format(f["content"], f"{where}.content"), 0, 1)

    def f_star(self, f, where, ends):
        return Repeat(self.format(f["content"], f"{where}.content"), 0, None)

    def f_plus(self, f, where, ends):
        return Repeat(self.format(f["content"], f"{where}.content"), 1, None)

    def f_repeat(self, f, where, ends):
        hi = None if f["max"] == -1 else f["max"]
        return Repeat(self.format(f["content"], f"{where}.content"), f["min"], hi)

    def _end(self, f, where) -> tuple[str, ...]:
        end = f["end"]
        ends = (end,) if isinstance(end, str) else tuple(end) if isinstance(end, list) else None
        if ends is None or not all(isinstance(e, str) for e in ends) or not isinstance(f["begin"], str):
            raise GrammarError(f"{where}: tags with token begin/end are not supported")
        return ends

    def f_tag(self, f, where, ends):
        tag_ends = self._end(f, where)
        content = self.format(f["content"], f"{where}.content", tuple(e for e in tag_ends if e))
        end = alt(*(Literal(e) if e else Epsilon() for e in tag_ends))
        return seq(Literal(f["begin"]) if f["begin"] else Epsilon(), content, end)

    def f_triggered_tags(self, f, where, ends):
        triggers = list(f["triggers"])
        groups: dict[str, list[Expr]] = {t: [] for t in triggers}
        wholes = []
        for i, tag in enumerate(f["tags"]):
            w = f"{where}.tags[{i}]"
            begin = tag["begin"] if isinstance(tag.get("begin"), str) else None
            hits = [t for t in triggers if begin is not None and begin.startswith(t)]
            if len(hits) != 1:
                raise GrammarError(f"{w}: the begin string must start with exactly one trigger "
                                   f"(found {len(hits)})")
            tag_ends = self._end(tag, w)
            content = self.format(tag["content"], f"{w}.content", tuple(e for e in tag_ends if e))
            end = alt(*(Literal(e) if e else Epsilon() for e in tag_ends))
            rest = begin[len(hits[0]):]
            groups[hits[0]].append(seq(Literal(rest) if rest else Epsilon(), content, end))
            wholes.append(seq(Literal(begin), content, end))
        if f.get("at_least_one") and f.get("stop_after_first"):
            return alt(*wholes)
        pairs = []
        for t in triggers:
            if groups[t]:
                pairs.append((t, self.add("triggered_tags_group", alt(*groups[t])).name))
        free = self.free_text("triggered_tags", pairs, not f.get("stop_after_first", False),
                              f.get("excludes", []))
        if f.get("at_least_one"):
            return seq(self.add("triggered_tags_first", alt(*wholes)), free)
        return free

    def f_tags_with_separator(self, f, where, ends):
        tags = alt(*(self.format(t, f"{where}.tags[{i}]") for i, t in enumerate(f["tags"])))
        tags = self.add("tags_with_separator_tags", tags)
        if f.get("stop_after_first"):
            return tags if f.get("at_least_one") else alt(Epsilon(), tags)
        sep = Literal(f["separator"]) if f["separator"] else Epsilon()
        more = Repeat(seq(sep, tags), 0, None)
        return seq(tags, more) if f.get("at_least_one") else alt(Epsilon(), seq(tags, more))
