"""Grammars and vocabularies whose μ* can be computed exactly: bounded Dyck and a finite JSON schema.

``bounded_dyck(kinds, max_len)`` is D(kinds, max_len): balanced strings over ``kinds`` bracket
pairs of at most ``max_len`` characters, written as a finite grammar so that the matcher's
mask itself knows the bound (a locally valid token can always be completed in time)::

    E0 = ""                                   (not a rule: the empty alternative)
    En ::= P0 E(n-2) | P2 E(n-4) | ... | P(n-2)   (first prime of length a+2, the rest)
    Pa ::= "(" Ea ")" | "[" Ea "]" | ...
    root ::= "" | E2 | E4 | ... | E(max_len)

Unambiguous: the first prime ends at the bracket that matches the first one, so ``a`` is
fixed by the string. ``bracket_vocab`` has one token per bracket, a BOS token (no bytes, never
allowed by a mask) and an EOS token.

``json_records()`` is a schema-like finite language of 36 JSON objects; ``json_vocab()`` mixes
single characters with a few multi-character tokens (``{"``, ``":``, ``admin``, ``true`` …), so
most strings have several tokenizations, as with a real BPE vocabulary.
"""

from __future__ import annotations

import numpy as np

from ..grammar import Epsilon, Grammar, Literal, Ref, Rule, alt, seq
from ..runtime import Vocab

BRACKETS = ("()", "[]", "{}", "<>")

JSON_KINDS = ("user", "admin", "guest")
JSON_IDS = ("1", "2", "3", "42")
JSON_ACTIVE = ("", ',"active":true', ',"active":false')
JSON_TOKENS = ('{"', '":', "kind", "admin", "true", "42")


def bounded_dyck(kinds: int = 3, max_len: int = 12) -> Grammar:
    """D(kinds, max_len) as a finite grammar (module docstring)."""
    if not 1 <= kinds <= len(BRACKETS):
        raise ValueError(f"kinds is 1..{len(BRACKETS)}")
    top = max_len - max_len % 2

    def exact(n: int):
        return Epsilon() if n == 0 else Ref(f"E{n}")

    rules = [Rule("root", alt(Epsilon(), *(Ref(f"E{n}") for n in range(2, top + 1, 2))))]
    for n in range(2, top + 1, 2):
        rules.append(Rule(f"E{n}", alt(*(seq(Ref(f"P{a}"), exact(n - 2 - a)) for a in range(0, n - 1, 2)))))
    for a in range(0, top - 1, 2):
        rules.append(Rule(f"P{a}", alt(*(seq(Literal(b[0]), exact(a), Literal(b[1]))
                                         for b in BRACKETS[:kinds]))))
    return Grammar(tuple(rules), "root")


def bracket_vocab(kinds: int = 3) -> Vocab:
    """One token per bracket character, then BOS (no bytes) and EOS."""
    toks = [c.encode() for b in BRACKETS[:kinds] for c in b]
    return Vocab(toks + [b"", b""], eos_ids=(len(toks) + 1,), special={"<bos>": len(toks), "<eos>": len(toks) + 1},
                 name=f"brackets{kinds}")


def dyck_depth(text: bytes) -> int:
    """Maximum nesting depth of a bracket string."""
    d = best = 0
    for c in text:
        d += 1 if chr(c) in "([{<" else -1
        best = max(best, d)
    return best


def json_strings() -> list[str]:
    """The 36 strings of ``json_records()``."""
    return [f'{{"kind":"{k}","id":{i}{a}}}' for k in JSON_KINDS for i in JSON_IDS for a in JSON_ACTIVE]


def json_records() -> Grammar:
    """root ::= '{"kind":"' KIND '","id":' ID ACTIVE? '}' — 3 × 4 × 3 = 36 strings."""
    kind = alt(*(Literal(k) for k in JSON_KINDS))
    ident = alt(*(Literal(i) for i in JSON_IDS))
    active = alt(*(Literal(a) if a else Epsilon() for a in JSON_ACTIVE))
    body = seq(Literal('{"kind":"'), Ref("kind"), Literal('","id":'), Ref("id"), Ref("active"), Literal("}"))
    return Grammar((Rule("root", body), Rule("kind", kind), Rule("id", ident), Rule("active", active)), "root")


def json_vocab() -> Vocab:
    """Every character of the language and every digit, a few multi-character tokens, then BOS
    and EOS."""
    chars = sorted({c for s in json_strings() for c in s} | set("0123456789"))
    toks = [c.encode() for c in chars] + [t.encode() for t in JSON_TOKENS if len(t) > 1]
    return Vocab(toks + [b"", b""], eos_ids=(len(toks) + 1,), special={"<bos>": len(toks), "<eos>": len(toks) + 1},
                 name="json-records")


def bos_id(vocab: Vocab) -> int:
    """The vocabulary's BOS token (``special['<bos>']``)."""
    return vocab.special["<bos>"]


def sloppy_brackets(n: int, kinds: int = 3, max_len: int = 12, *, stop: float = 0.3, close: float = 0.35,
                    match: float = 0.8, seed: int = 0) -> list[list[int]]:
    """Training token sequences (``bracket_vocab`` ids) that are *almost* bounded Dyck: each
    step after the first stops with probability ``stop`` whatever the depth, otherwise closes (when open, with
    probability ``close``: the matching bracket with probability ``match``, else another) or
    opens a random bracket. A model fit on them often wants to stop or close wrongly where the
    grammar forbids it: masking then moves that mass onto longer, deeper strings."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        stack: list[int] = []
        toks: list[int] = []
        while len(toks) < max_len:
            u = rng.random()
            if toks and u < stop:
                break
            if stack and u < stop + close:
                k = stack.pop() if rng.random() < match else int(rng.integers(kinds))
                toks.append(2 * k + 1)
            else:
                k = int(rng.integers(kinds))
                stack.append(k)
                toks.append(2 * k)
        out.append(toks)
    return out


def greedy_tokenize(vocab: Vocab, text: bytes) -> list[int]:
    """Longest-match tokenization of ``text`` over ``vocab``'s non-empty tokens."""
    toks = {b: i for i, b in enumerate(vocab.token_bytes) if b}
    longest = max(len(b) for b in toks)
    out, i = [], 0
    while i < len(text):
        for n in range(min(longest, len(text) - i), 0, -1):
            t = toks.get(text[i:i + n])
            if t is not None:
                out.append(t)
                i += n
                break
        else:
            raise ValueError(f"no token for {text[i:i + 1]!r}")
    return out


def sloppy_json(n: int, *, seed: int = 0) -> list[list[int]]:
    """Training sequences (``json_vocab`` ids, longest-match tokenized) of records like the
    schema's, with skewed field values, some truncated and some with an unknown id."""
    rng = np.random.default_rng(seed)
    vocab = json_vocab()
    out = []
    for _ in range(n):
        kind = JSON_KINDS[rng.choice(3, p=[0.6, 0.3, 0.1])]
        ident = rng.choice(["1", "2", "3", "42", "7", "12"], p=[0.3, 0.1, 0.1, 0.2, 0.15, 0.15])
        active = JSON_ACTIVE[rng.choice(3, p=[0.5, 0.3, 0.2])]
        text = f'{{"kind":"{kind}","id":{ident}{active}}}'
        if rng.random() < 0.25:
            text = text[:int(rng.integers(1, len(text)))]
        out.append(greedy_tokenize(vocab, text.encode()))
    return out
