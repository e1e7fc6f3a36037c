"""Every .lark grammar of the shared corpus: read → write → read gives an equal Grammar, the
written text loads in lark the way validate.py loads the original, and accepts every
sample of that grammar.

The corpus is the repository's vendored corpus/, or $GRAMOPT_CORPUS; without it the
test skips. Sibling imports follow the corpus naming (``%import common.X`` / ``%import
.csv.X`` → ``PREFIX__common.lark`` / ``PREFIX__ex_composition_csv.lark``), through lark's
import-loader hook, as validate.py does; the product knows nothing of that naming.

Outcomes that are not "loads and accepts every sample" (lark itself refuses the original):
  syncode__php_old   zero-width regexps: lark refuses the original and the written grammar
                     alike (dynamic and basic lexers); no samples.
  llguidance__rfc    llguidance's dialect: stock lark refuses the original's "" (read here
                     as the empty string, llguidance's meaning) and the written grammar's
                     zero-width TEXT terminal; llguidance loads the written grammar and
                     accepts its sample.
"""

from corpus_location import CORPUS as _CORPUS_DIR
import os
from pathlib import Path

import pytest

from gramopt.formats.lark import parse_lark, write_lark

CORPUS = _CORPUS_DIR
FILES = sorted((CORPUS / "lark").glob("*.lark")) if (CORPUS / "lark").is_dir() else []

START = {"lark__python": "file_input", "lark__ex_advanced_python2": "file_input", "syncode__php_old": "file_input"}
LIBRARIES = {"lark__common", "outlines__common", "lark__unicode"}  # read with start=""
LARK_REFUSES = {"syncode__php_old": "zero-width", "llguidance__rfc": "zero-width"}


def _loader(folder: Path, stem: str):
    prefix = stem.split("__")[0]

    def load(base_path, grammar_path):
        name = os.path.basename(grammar_path)
        for candidate in (f"{prefix}__{name}", f"{prefix}__ex_composition_{name}"):
            full = folder / candidate
            if full.exists():
                return str(full), full.read_text(encoding="utf-8")
        raise OSError(grammar_path)

    return load


def _lark_parser(text: str, start: str, loader):
    """Lark loaded as validate.py loads the corpus grammar."""
    import lark

    kw = dict(start=start, import_paths=[loader])
    if "_INDENT" in text and "%declare" in text:  # the Python grammars need the indenter
        from lark.indenter import PythonIndenter

        kw.update(parser="lalr", postlex=PythonIndenter())
    else:
        kw.update(parser="earley")
    try:
        return lark.Lark(text, **kw), kw["parser"]
    except lark.exceptions.GrammarError as e:
        if "zero-width" not in str(e):
            raise
        kw.update(parser="earley", lexer="basic")
        return lark.Lark(text, **kw), "earley"


def _samples(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.stem + ".sample*.txt"))


@pytest.mark.parametrize("path", FILES or [pytest.param(None, marks=pytest.mark.skip("no corpus"))],
                         ids=[p.stem for p in FILES] or ["no-corpus"])
def test_lark_corpus_round_trip(path: Path):
    stem = path.stem
    loader = _loader(path.parent, stem)
    start = "" if stem in LIBRARIES else START.get(stem, "start")
    text = path.read_text(encoding="utf-8")

    g = parse_lark(text, path=str(path), start=start, import_paths=[loader])

    out = write_lark(g)
    again = parse_lark(out, path=str(path), start=start, import_paths=[loader])
    assert again == g
    assert write_lark(again) == out

    source = out + "\nlibstart:\n" if not start else out
    if stem in LARK_REFUSES:
        with pytest.raises(Exception, match=LARK_REFUSES[stem]):
            _lark_parser(source, start or "libstart", loader)
        if stem.startswith("llguidance__"):
            _check_llguidance(out, _samples(path))
        return
    parser, kind = _lark_parser(source, start or "libstart", loader)
    for sample in _samples(path):
        data = sample.read_text(encoding="utf-8")
        if kind == "lalr" and not data.endswith("\n"):
            data += "\n"  # lark's Python grammar wants a final newline
        parser.parse(data)  # raises if the written grammar rejects the sample


def _check_llguidance(text: str, samples: list[Path]) -> None:
    llg = pytest.importorskip("llguidance")
    tok = llg.LLTokenizer.from_tiktoken(encoder={bytes([i]): i for i in range(256)},
                                        special_tokens={"<eos>": 256}, pattern=r".", eos_token=256)
    grammar = llg.grammar_from("lark", text)
    is_error, messages = llg.LLMatcher.validate_grammar_with_warnings(grammar, tok)
    assert not is_error, messages
    for sample in samples:
        matcher = llg.LLMatcher(tok, grammar, log_level=0)
        data = sample.read_text(encoding="utf-8").encode("utf-8")
        assert matcher.consume_tokens(list(data)) and matcher.is_accepting(), sample.name
