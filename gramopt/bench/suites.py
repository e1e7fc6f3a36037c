"""What ``gramopt bench`` measures: cases (a grammar and the texts its trajectories follow).

    default_cases(corpus) -> list[Case]     the bundled selection (three suites below)
    path_cases(paths)     -> list[Case]     grammar files or folders given by the user

Suites:

    corpus         a handful of corpus grammars with their sample texts
    pathological   the seed forms whose cost an engine's form decides:
                     g4       S → S S | a | b         (Θ(t²) packed splits per step)
                     ab-star  [ab]*                    (the same language, linear: the reference
                                                        G4 is compared against at length 200)
                     infix    E → E op E | ( E ) | n   (ambiguous infix)
                     anbn     a^n b^n through delegates (S → a A b | ε, A → D1, D1 → D2, D2 → S)
                     until    right-recursive "text until end tag": B → [^<] B | "</t>"
    obfuscated     the corpus cases made worse on purpose (``obfuscate.py``: delegate chains,
                   duplicates, left-recursive helpers, R ::= R R | x), same samples

A ``Case`` holds the grammar as text (it crosses process boundaries and is hashed for the
cache) and its samples; a grammar without samples gets sentences derived from it
(``sampled_texts``), so every case has a trajectory.
"""

from __future__ import annotations

import glob
import os
import random
from dataclasses import dataclass, field

from ..formats import EXTENSIONS, parse, read, read_text, write, written_as
from ..grammar import Grammar, GrammarError
from .obfuscate import obfuscate

# The default selection: small enough that `gramopt bench` finishes in minutes on 2 cores
# (the llama.cpp JSON grammar alone costs xgrammar ~47 ms per mask: see ENGINES.md).
DEFAULT_CORPUS = ("gbnf/llamacpp__json.gbnf", "gbnf/llamacpp__arithmetic.gbnf", "gbnf/llamacpp__list.gbnf",
                  "gbnf/llamacpp__chess.gbnf", "ebnf/xgrammar__builtin_json.ebnf")
OBFUSCATE_SEED = 1
PATHOLOGICAL_LENGTH = 200


@dataclass(frozen=True)
class Case:
    """One benchmark case. ``text`` is the grammar in ``dialect``; ``samples`` the texts
    whose tokenizations are the trajectories (each must be in the grammar's language, or a
    prefix of a sentence when truncated)."""

    name: str
    suite: str
    text: str
    dialect: str
    samples: tuple[str, ...]
    source: str = ""
    note: str = ""

    def grammar(self) -> Grammar:
        return parse(self.text, self.dialect, path=self.source or self.name)


@dataclass
class Selection:
    cases: list[Case] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def corpus_dir() -> str | None:
    """The corpus of real grammars: $GRAMOPT_CORPUS, else the checkout's vendored ``corpus/``
    (None when neither is a folder: an installed wheel carries no corpus)."""
    env = os.environ.get("GRAMOPT_CORPUS")
    if env:
        return env if os.path.isdir(env) else None
    here = os.path.dirname(os.path.abspath(__file__))
    vendored = os.path.normpath(os.path.join(here, "..", "..", "corpus"))
    return vendored if os.path.isdir(vendored) else None


def samples_of(path: str, limit: int = 1) -> tuple[str, ...]:
    """The corpus samples beside a grammar file (``stem.sampleN.txt``): the ``limit``
    longest (a trajectory is cut at the token limit anyway), in file order."""
    stem = os.path.splitext(path)[0]
    texts = []
    for s in sorted(glob.glob(glob.escape(stem) + ".sample*.txt")):
        with open(s, encoding="utf-8") as f:
            texts.append(f.read())
    keep = sorted(range(len(texts)), key=lambda i: (-len(texts[i]), i))[:limit]
    return tuple(texts[i] for i in sorted(keep))


def sampled_texts(grammar: Grammar, n: int = 1, seed: int = 0, max_depth: int = 12) -> tuple[str, ...]:
    """Sentences derived from ``grammar`` (random derivations, ``gramopt.verify``): of a
    few tries per sentence the longest that decodes as UTF-8; in the language by
    construction. Empty when the language is empty or nothing decodes."""
    from ..verify.derivations import heights, random_sentence
    from ..verify.symbols import compile_grammar
    cg = compile_grammar(grammar)
    if cg.empty or cg.atoms is not None:  # Lark grammars: sentences are token atoms, not text
        return ()
    rng = random.Random(seed)
    hts = heights(cg)
    out = []
    for _ in range(n):
        best = None
        for _ in range(8):
            try:
                s = bytes(random_sentence(cg, rng, max_depth, hts)).decode("utf-8")
            except UnicodeDecodeError:
                continue
            if best is None or len(s) > len(best):
                best = s
        if best is not None:
            out.append(best)
    return tuple(out)


def file_case(path: str, suite: str = "corpus", limit: int = 1) -> Case:
    """A case from a grammar file (raises GrammarError when it does not read)."""
    g = read(path)
    text = read_text(path)
    name = os.path.splitext(os.path.basename(path))[0]
    samples = samples_of(path, limit)
    note = ""
    if not samples:
        samples, note = sampled_texts(g), "samples derived from the grammar"
    return Case(name, suite, text, g.dialect, samples, path, note)


def obfuscated_case(case: Case, seed: int = OBFUSCATE_SEED) -> Case:
    """``case`` made worse on purpose (same language, same samples)."""
    g = obfuscate(case.grammar(), seed=seed)
    return Case(f"{case.name}~obf", "obfuscated", write(g, written_as(case.dialect)),
                written_as(case.dialect), case.samples, case.source,
                f"obfuscate(seed={seed})")


def _ab(n: int, seed: int = 7) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice("ab") for _ in range(n))


def _arith(n: int, seed: int = 7) -> str:
    rng = random.Random(seed)
    parts = [str(rng.randint(0, 99))]
    while sum(map(len, parts)) < n:
        op = rng.choice("+*")
        parts.append(op + (f"({rng.randint(0, 9)}+{rng.randint(0, 9)})" if rng.random() < 0.2
                           else str(rng.randint(0, 99))))
    return "".join(parts)


def pathological_cases(length: int = PATHOLOGICAL_LENGTH) -> list[Case]:
    """The seed forms (module docstring), each with one sample of about ``length`` bytes."""
    half = length // 2
    text = "hello " * (length // 6)
    forms = [
        ("g4", 'root ::= s\ns ::= s s | "a" | "b"\n', _ab(length), "S → S S | a | b"),
        ("ab-star", 'root ::= [ab]*\n', _ab(length), "[ab]*: G4's language, linear reference"),
        ("infix", 'root ::= e\ne ::= e "+" e | e "*" e | "(" e ")" | [0-9]+\n', _arith(length),
         "E → E op E"),
        ("anbn", 'root ::= s\ns ::= "a" a "b" | ""\na ::= d1\nd1 ::= d2\nd2 ::= s\n',
         "a" * half + "b" * half, "a^n b^n with delegates"),
        ("until", 'root ::= "<t>" body\nbody ::= [^<] body | "</t>"\n', "<t>" + text + "</t>",
         "right-recursive text until end tag"),
    ]
    return [Case(name, "pathological", src, "gbnf", (sample,), "", note) for name, src, sample, note in forms]


def default_cases(corpus: str | None = None, files=DEFAULT_CORPUS, obfuscated: bool = True,
                  pathological: bool = True) -> Selection:
    """The bundled selection: ``files`` from the corpus (skipped with a note when the corpus
    is absent), the pathological forms, and the corpus cases obfuscated."""
    sel = Selection()
    corpus = corpus or corpus_dir()
    base: list[Case] = []
    if corpus is None:
        sel.notes.append("corpus not found (set GRAMOPT_CORPUS): corpus and obfuscated suites skipped")
    else:
        for rel in files:
            path = os.path.join(corpus, rel)
            try:
                base.append(file_case(path))
            except (OSError, GrammarError) as e:
                sel.notes.append(f"{rel}: skipped ({str(e).splitlines()[0]})")
    sel.cases += base
    if pathological:
        sel.cases += pathological_cases()
    if obfuscated:
        sel.cases += [obfuscated_case(c) for c in base]
    return sel


def path_cases(paths: list[str]) -> Selection:
    """Cases from files and folders (folders walked in sorted order); unreadable files are
    skipped with a note."""
    sel = Selection()
    files = []
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, names in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                files += [os.path.join(root, n) for n in sorted(names) if n.endswith(tuple(EXTENSIONS))]
        elif os.path.exists(p):
            files.append(p)
        else:
            sel.notes.append(f"{p}: no such file or folder")
    for f in files:
        try:
            c = file_case(f)
        except (OSError, GrammarError) as e:
            sel.notes.append(f"{f}: skipped ({str(e).splitlines()[0]})")
            continue
        if not c.samples:
            sel.notes.append(f"{f}: skipped (no samples and none could be derived)")
            continue
        sel.cases.append(c)
    return sel
