"""The ambiguous suite: grammars no rewrite makes unambiguous, and their token trajectories.

    G4        S → S S | a | b                        (Θ(t²) packed nodes per symbol)
    expr      E → E + E | E * E | ( E ) | n
    english   an English CFG with PP attachment (NP → NP PP, VP → VP PP) and coordination
              (S/NP/VP → X and X): Catalan-many parses of a long sentence
    commandtalk  NLTK's commandtalk.cfg (SRI, 4,721 rules) over bytes: every quoted word
              becomes the literal " word" (one space before each word), the corpus's
              ``%ignore WS`` made concrete so byte-level engines can run it
    SMILES    the transformers-CFG SMILES grammars of the corpus, as written

A trajectory is a deterministic random text of the grammar (seeded), tokenized by the
vocabulary's tokenizer; every engine replays the same ids.
"""

from __future__ import annotations

import dataclasses
import os
import random

from ..grammar import Grammar, Literal, transform

G4 = 'root ::= S\nS ::= S S | "a" | "b"\n'

EXPR = 'root ::= E\nE ::= E "+" E | E "*" E | "(" E ")" | "n"\n'

ENGLISH = r'''# An English CFG with the classic attachment ambiguities (written for gramopt's bench).
root ::= S
S ::= NP VP | S Conj S
NP ::= Det Nom | PropN | NP PP | NP Conj NP
Nom ::= N | Adj Nom
VP ::= V NP | Vi | VP PP | VP Conj VP | V NP NP
PP ::= P NP
Det ::= " the" | " a" | " every" | " some" | " my"
N ::= " man" | " dog" | " telescope" | " park" | " hill" | " woman" | " cat" | " bench" | " garden" | " boy" | " book" | " table"
PropN ::= " John" | " Mary" | " Alice" | " Bob"
Adj ::= " big" | " old" | " small" | " red" | " quiet"
V ::= " saw" | " liked" | " chased" | " gave" | " found" | " watched"
Vi ::= " slept" | " ran" | " waited" | " laughed"
P ::= " with" | " in" | " on" | " near" | " under" | " behind"
Conj ::= " and" | " or"
'''

COMMANDTALK = "cfg/nltk__commandtalk.cfg"
SMILES = ("ebnf/transformers-cfg__SMILES_generic.ebnf", "ebnf/transformers-cfg__SMILES_acrylates.ebnf",
          "ebnf/transformers-cfg__SMILES_chain_extenders.ebnf", "ebnf/transformers-cfg__SMILES_isocyanates.ebnf")


def parse_text(text: str) -> Grammar:
    from ..formats import parse
    return parse(text, "gbnf")


def words_as_bytes(grammar: Grammar) -> Grammar:
    """A grammar over whitespace-separated tokens (NLTK ``.cfg``, read with Lark semantics)
    as a byte-level GBNF grammar: each literal token ``w`` becomes ``" w"``; terminals and
    ``%ignore`` go. The byte language is {" w1 w2 … wn" : w1 … wn in the token language}."""
    def spaced(e):
        return Literal(" " + e.text) if isinstance(e, Literal) else e
    rules = tuple(dataclasses.replace(r, body=transform(r.body, spaced)) for r in grammar.rules)
    return Grammar(rules, grammar.start, dialect="gbnf")


def g4_text(n: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice("ab") for _ in range(n))


def expr_text(n: int, seed: int = 0) -> str:
    """A random expression of about n bytes."""
    rng = random.Random(seed)
    out, depth = [], 0
    while True:
        if rng.random() < 0.2 and len(out) < n - 4:
            out.append("(")
            depth += 1
            continue
        out.append("n")
        while depth and rng.random() < 0.3:
            out.append(")")
            depth -= 1
        if len(out) + depth >= n:
            break
        out.append(rng.choice("+*"))
    return "".join(out) + ")" * depth


def english_text(n_words: int, seed: int = 0) -> str:
    """Random English sentences joined by " and" until about n_words words."""
    rng = random.Random(seed)
    det = ["the", "a", "every", "some", "my"]
    noun = ["man", "dog", "telescope", "park", "hill", "woman", "cat", "bench", "garden", "boy"]
    verb = ["saw", "liked", "chased", "found", "watched"]
    prep = ["with", "in", "on", "near", "under", "behind"]

    def np_(d: int) -> list[str]:
        w = [rng.choice(det)] + (["old"] if rng.random() < 0.2 else []) + [rng.choice(noun)]
        if d < 2 and rng.random() < 0.5:
            w += [rng.choice(prep)] + np_(d + 1)
        return w

    words: list[str] = []
    while len(words) < n_words:
        if words:
            words.append("and")
        words += np_(0) + [rng.choice(verb)] + np_(0)
        while rng.random() < 0.6:
            words += [rng.choice(prep)] + np_(1)
    return "".join(" " + w for w in words)


def corpus_path(rel: str) -> str | None:
    from .suites import corpus_dir
    d = corpus_dir()
    p = os.path.join(d, rel) if d else None
    return p if p and os.path.exists(p) else None
