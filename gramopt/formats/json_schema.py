"""A JSON Schema subset → grammar IR, in xgrammar 0.2.8's language for it (strict mode).

Used for the ``json_schema`` contents of structural tags (structural_tag.py), so that a
tool-call format reads without an engine installed. A whole schema given to ``gramopt
optimize`` goes through the target engine's own converter instead (engines/jsonschema.py):
this subset is the small, tested part whose language is known to equal xgrammar's.

    rules = JsonSchemaRules(names).value(schema)   # -> Expr; rules in .rules

What is read (anything else is a ``GrammarError`` naming the keyword, never a guess):
``type`` object / string / integer / number / boolean / null / array, ``properties``,
``required``, ``additionalProperties: false`` (the default here, as xgrammar's strict mode),
``items``, ``enum``, ``const``, and the annotations ``title``, ``description``, ``default``,
``examples``, ``$schema``. The language, written in the IR as xgrammar writes it:

    ws       [ \\n\\r\\t]*   between every two tokens, unbounded
    string   "\\"" ([^\\0-\\x1f"\\\\] | "\\\\" (["\\\\/bfnrt] | "u" [0-9A-Fa-f]{4}))* "\\""
    integer  "0" | "-"? [1-9] [0-9]*
    number   "-"? ("0" | [1-9] [0-9]*) ("." [0-9]+)? ([eE] [+-]? [0-9]+)?
    array    "[" ws item (ws "," ws item)* ws "]" | "[" ws "]"
    object   the properties in declared order, each required one present, commas between:
             "{" ws F_1 ws "}"  (| "{" ws "}" when none is required), where
             F_k = P_k S_{k+1} (| F_{k+1} when P_k is optional) is "the first present
             property is k or later" and S_k = ws "," ws P_k S_{k+1} (| S_{k+1} when
             optional) is "the properties after one already written"
    enum     the alternatives' JSON texts (json.dumps, non-ASCII kept)
"""

from __future__ import annotations

import json

from ..grammar import (CharClass, Epsilon, Expr, GrammarError, Literal, Ref, Repeat, Rule, alt,
                       char, seq)

_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$schema", "$comment"})
_WS = Repeat(CharClass(((9, 10), (13, 13), (32, 32))), 0, None)
_DIGIT = CharClass(((48, 57),))
_HEX = CharClass(((48, 57), (65, 70), (97, 102)))


class JsonSchemaRules:
    """Collects the rules a schema needs; ``fresh(base)`` names them (unique in ``taken``)."""

    def __init__(self, taken: set[str], prefix: str = "json"):
        self.taken = taken
        self.prefix = prefix
        self.rules: list[Rule] = []
        self._basic: dict[str, str] = {}

    def fresh(self, base: str) -> str:
        name, n = f"{self.prefix}_{base}", 1
        while name in self.taken:
            n += 1
            name = f"{self.prefix}_{base}_{n}"
        self.taken.add(name)
        return name

    def _rule(self, base: str, body: Expr) -> Ref:
        name = self.fresh(base)
        self.rules.append(Rule(name, body))
        return Ref(name)

    def _shared(self, kind: str) -> Ref:
        """The one rule of a basic type (string, integer, number), made on first use."""
        if kind not in self._basic:
            self._basic[kind] = self._rule(kind, _BASIC[kind]()).name
        return Ref(self._basic[kind])

    def value(self, schema, where: str = "schema") -> Expr:
        if schema is True or schema == {}:
            raise GrammarError(f"{where}: an unconstrained JSON value is not supported: give a type")
        if not isinstance(schema, dict):
            raise GrammarError(f"{where}: a JSON schema is an object, got {type(schema).__name__}")
        for key in schema:
            if key not in _KNOWN and key not in _ANNOTATIONS:
                raise GrammarError(f"{where}: JSON schema keyword '{key}' is not supported")
        if "const" in schema:
            return Literal(json.dumps(schema["const"], ensure_ascii=False))
        if "enum" in schema:
            vals = schema["enum"]
            if not isinstance(vals, list) or not vals:
                raise GrammarError(f"{where}: 'enum' must be a non-empty list")
            return alt(*(Literal(json.dumps(v, ensure_ascii=False)) for v in vals))
        kind = schema.get("type")
        if kind in ("string", "integer", "number"):
            return self._shared(kind)
        if kind == "boolean":
            return alt(Literal("true"), Literal("false"))
        if kind == "null":
            return Literal("null")
        if kind == "array":
            if "items" not in schema:
                raise GrammarError(f"{where}: an array needs 'items'")
            item = self.value(schema["items"], f"{where}.items")
            more = Repeat(seq(_WS, char(","), _WS, item), 0, None)
            return self._rule("array", alt(seq(char("["), _WS, item, more, _WS, char("]")),
                                           seq(char("["), _WS, char("]"))))
        if kind == "object":
            return self._object(schema, where)
        raise GrammarError(f"{where}: JSON schema type {kind!r} is not supported")

    def _object(self, schema: dict, where: str) -> Expr:
        if schema.get("additionalProperties", False) is not False:
            raise GrammarError(f"{where}: only 'additionalProperties': false is supported")
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        missing = required - set(props)
        if missing:
            raise GrammarError(f"{where}: required property '{sorted(missing)[0]}' has no schema")
        items = [(k, seq(Literal(json.dumps(k, ensure_ascii=False)), _WS, char(":"), _WS,
                         self.value(v, f"{where}.{k}")), k in required) for k, v in props.items()]
        rest: Expr = Epsilon()  # S_{n+1}
        first: Expr | None = None  # F_{n+1}: no property
        for k in range(len(items) - 1, -1, -1):
            _, prop, req = items[k]
            s_next = rest
            if k:  # S_k, needed only after some earlier property
                nxt = seq(_WS, char(","), _WS, prop, s_next)
                rest = self._rule("part", nxt if req else alt(s_next, nxt))
            f = seq(prop, s_next)
            first = f if req or first is None else alt(f, first)
        close = seq(_WS, char("}"))
        body = [seq(char("{"), _WS, char("}"))] if not items else []
        if items:
            body.append(seq(char("{"), _WS, self._rule("props", first), close))
            if not required:
                body.append(seq(char("{"), _WS, char("}")))
        return self._rule("object", alt(*body))


_KNOWN = frozenset({"type", "properties", "required", "additionalProperties", "items", "enum", "const"})


def _string() -> Expr:
    plain = CharClass(((0, 0x1F), (34, 34), (92, 92)), negated=True)
    escape = seq(char("\\"), alt(CharClass(((34, 34), (47, 47), (92, 92), (98, 98), (102, 102), (110, 110),
                                            (114, 114), (116, 116))),
                                 seq(char("u"), Repeat(_HEX, 4, 4))))
    return seq(char('"'), Repeat(alt(plain, escape), 0, None), char('"'))


def _integer() -> Expr:
    return alt(char("0"), seq(Repeat(char("-"), 0, 1), CharClass(((49, 57),)), Repeat(_DIGIT, 0, None)))


def _number() -> Expr:
    whole = alt(char("0"), seq(CharClass(((49, 57),)), Repeat(_DIGIT, 0, None)))
    frac = Repeat(seq(char("."), Repeat(_DIGIT, 1, None)), 0, 1)
    exp = Repeat(seq(CharClass(((69, 69), (101, 101))), Repeat(CharClass(((43, 43), (45, 45))), 0, 1),
                     Repeat(_DIGIT, 1, None)), 0, 1)
    return seq(Repeat(char("-"), 0, 1), whole, frac, exp)


_BASIC = {"string": _string, "integer": _integer, "number": _number}
