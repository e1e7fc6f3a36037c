"""Where the corpus of real grammars lives, for every test that reads it: $GRAMOPT_CORPUS,
else the repository's own ``corpus/`` (vendored with its sources and licences, so a fresh
clone runs the same tests on any machine)."""

import os
from pathlib import Path

_REPOSITORY_CORPUS = Path(__file__).resolve().parents[1] / "corpus"
CORPUS = Path(os.environ.get("GRAMOPT_CORPUS") or _REPOSITORY_CORPUS)


def validate_module(corpus: Path = CORPUS):
    """The corpus's own ``validate.py`` (its engine drivers: xgrammar, lark, llguidance)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("corpus_validate", Path(corpus) / "validate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def own_engine(validate, path: Path, text: str):
    """``(engine name, accept(sample) -> bool)`` for grammar ``text`` in the engine that
    owns ``path``'s dialect, driven as validate.py drives it: xgrammar for gbnf/ebnf, lark
    for .lark, llguidance for llguidance's own Lark files."""
    stem = path.name[: -len(path.suffix)]
    if path.suffix == ".lark":
        if stem.startswith("llguidance__"):
            return "llguidance", validate.llguidance_engine("lark", text)
        return "lark", validate.lark_engine(str(path), stem, text)
    return "xgrammar", validate.xgrammar_engine(validate.gbnf_fill_empty_alternatives(text))
