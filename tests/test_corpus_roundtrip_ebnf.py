"""Every .gbnf / .ebnf / .goebnf grammar of the real corpus, against its own engine.

A grammar that xgrammar loads (GBNF's bare empty alternatives first filled with ``""``, Go
EBNF translated, both as the corpus's validate.py does) must read → write → read to an equal
Grammar, and the written text must load in xgrammar and accept every sample of the grammar.
A grammar xgrammar rejects must be rejected by gramopt too, with a located GrammarError.
The corpus is the repository's vendored ``corpus/``, or $GRAMOPT_CORPUS.
"""

from corpus_location import CORPUS as _CORPUS_DIR
import importlib.util
from pathlib import Path

import pytest

from gramopt.formats.ebnf import parse_ebnf, with_llamacpp_names, write_ebnf
from gramopt.formats.goebnf import parse_goebnf
from gramopt.grammar import GrammarError

CORPUS = _CORPUS_DIR
FILES = sorted(p for pattern in ("gbnf/*.gbnf", "ebnf/*.ebnf", "ebnf/*.goebnf") for p in CORPUS.glob(pattern))

# Grammars xgrammar loads that use what gramopt does not represent, with the reason.
UNSUPPORTED: dict[str, str] = {}


def _validate_module():
    spec = importlib.util.spec_from_file_location("corpus_validate", CORPUS / "validate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _samples(path: Path) -> list[str]:
    stem = path.name.rsplit(".", 1)[0]
    return [s.read_text(encoding="utf-8") for s in sorted(path.parent.glob(f"{stem}.sample*.txt"))]


def _engine_text(path: Path, text: str, validate) -> str:
    """What the corpus feeds xgrammar for this file (start rule ``root``)."""
    if path.suffix == ".goebnf":
        translated, first = validate.goebnf_to_xgrammar(text)
        return translated + ("" if first == "root" else f"root ::= {first}\n")
    return validate.gbnf_fill_empty_alternatives(text)


@pytest.mark.engines
@pytest.mark.parametrize("path", FILES or [pytest.param(None, marks=pytest.mark.skip("no corpus"))],
                         ids=lambda p: p.name if p else "none")
def test_corpus_grammar_round_trips(path):
    xgrammar = pytest.importorskip("xgrammar")
    from xgrammar.testing import _is_grammar_accept_string

    validate = _validate_module()
    text = path.read_text(encoding="utf-8")
    dialect = path.suffix[1:]
    try:
        xgrammar.Grammar.from_ebnf(_engine_text(path, text, validate), root_rule_name="root")
        engine_loads = True
    except Exception:  # noqa: BLE001 - xgrammar raises RuntimeError / TVM errors
        engine_loads = False

    if not engine_loads or path.name in UNSUPPORTED:
        with pytest.raises(GrammarError) as info:
            parse_goebnf(text) if dialect == "goebnf" else parse_ebnf(text, dialect)
        assert info.value.pos is not None
        assert path.name not in UNSUPPORTED or UNSUPPORTED[path.name] in info.value.message
        return

    grammar = parse_goebnf(text) if dialect == "goebnf" else parse_ebnf(text, dialect)
    target = "ebnf" if dialect == "goebnf" else dialect
    written = write_ebnf(grammar, target)
    again = parse_ebnf(written, target)
    # GBNF is written with llama.cpp's rule-name alphabet ('_' becomes '-')
    assert again == (with_llamacpp_names(grammar) if target == "gbnf" else grammar)
    assert write_ebnf(again, target) == written
    compiled = xgrammar.Grammar.from_ebnf(written, root_rule_name="root")
    for sample in _samples(path):
        assert _is_grammar_accept_string(compiled, sample), sample[:80]
