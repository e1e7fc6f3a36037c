"""Where the shared corpus of real grammars lives, for every test that reads it:
$GRAMOPT_CORPUS, else ``../shared/corpus`` beside the repository, else /work/shared/corpus
(the team machines' copy, so that a clone elsewhere — CI's — still finds it)."""

import os
from pathlib import Path

_CANDIDATES = [os.environ.get("GRAMOPT_CORPUS"),
               Path(__file__).resolve().parents[1].parent / "shared" / "corpus",
               "/work/shared/corpus"]
CORPUS = next((Path(c) for c in _CANDIDATES if c and Path(c).is_dir()), Path("/work/shared/corpus"))


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
