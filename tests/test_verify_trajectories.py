"""``verify --decode``'s trajectories (issue 13): spelled sentences (samples, and sentences
derived from the grammar) walk long, varied paths, and the report counts the productions
of the original grammar they went through."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from gramopt.cli import main  # noqa: E402
from gramopt.formats import parse  # noqa: E402
from gramopt.runtime import Vocab  # noqa: E402
from gramopt.decoding.model import ForcedLM, TinyCausalLM  # noqa: E402
from gramopt.verify import Recognizer  # noqa: E402
from gramopt.verify.coverage import productions_exercised  # noqa: E402
from gramopt.verify.derivations import derived_texts  # noqa: E402
from gramopt.decoding.lockstep import decode_check  # noqa: E402

DATA = Path(__file__).parent / "data" / "gbnf"
SMALL = 'root ::= "a" x | "b" y\nx ::= "c" | "d"\ny ::= "e"\n'


def bytes_vocab() -> Vocab:
    return Vocab.from_bytes([bytes([b]) for b in range(256)] + [b"ab", b"cd"], eos=258)


def test_productions_exercised_counts_exactly():
    g = parse(SMALL, "gbnf")
    # root -> "a" x, x -> "c" | root -> "b" y; a dead input counts up to where it died
    assert productions_exercised(g, [b"ac", b"b"]) == (3, 5, 6)
    assert productions_exercised(g, [b"ac", b"ad", b"be"]) == (5, 5, 6)
    assert productions_exercised(g, [b"zz"]) == (0, 5, 6)


def test_the_production_tags_do_not_change_what_is_recognized():
    g = parse(SMALL, "gbnf")
    plain, tagged = Recognizer(g), Recognizer(g, leo=False, by_production=True)
    for w in (b"ac", b"ad", b"be", b"ae", b"a", b""):
        assert plain.accepts(w) == tagged.accepts(w)
        assert plain.is_viable_prefix(w) == tagged.is_viable_prefix(w)


def test_derived_texts_are_distinct_sentences_and_reproducible():
    g = parse((DATA / "llamacpp__json.gbnf").read_text(encoding="utf-8"), "gbnf")
    texts = derived_texts(g, 6)
    assert texts == derived_texts(g, 6) and len(texts) == len(set(texts)) >= 4
    r = Recognizer(g)
    assert all(r.accepts(t.encode("utf-8")) for t in texts)
    assert derived_texts(parse('root ::= "a" root\n', "gbnf"), 3) == []  # the empty language


def test_forced_model_spells_its_rows_then_stops():
    m = ForcedLM([[3, 1], [2]], vocab_size=5, stop=4)
    past = m.new_cache(2)
    steps = [m(None, past).argmax(dim=1).tolist() for _ in range(3)]
    assert steps == [[3, 2], [1, 4], [4, 4]]


def test_spelled_sentences_are_decoded_exactly_and_cover_productions():
    g = parse(SMALL, "gbnf")
    vocab = bytes_vocab()
    model = TinyCausalLM(len(vocab), d_model=16, n_heads=2, seed=0)
    report = decode_check(g, g, vocab, model, steps=8, seeds=1, measure=False,
                          sentences=["ac", "ad", "be"])
    assert report.ok and report.settings["sentences"] == 3
    spelled = [r for r in report.results if r.seed < 0]
    assert len(spelled) == 1
    texts = [b"".join(vocab.token_bytes[t] for t in row if t not in vocab.eos_ids)
             for row in spelled[0].generation.tokens]
    assert texts == [b"ac", b"ad", b"be"] and spelled[0].generation.finished == ["eos"] * 3
    assert report.productions == (5, 5, 6)
    assert "went through 5 of the original grammar's 5 productions with terminals" in report.format(vocab)


def test_cli_reports_coverage_and_runs_the_sentences(tmp_path, capsys):
    src = DATA / "llamacpp__json.gbnf"
    rc = main(["verify", str(src), str(src), "--decode", "--vocab", "bytes", "--steps", "16", "--seeds", "1",
               "--sentences", "4", "--no-measure", "--no-xgrammar", "-q"])
    out = capsys.readouterr().out
    assert rc == 0, out
    samples = len(list(DATA.glob("llamacpp__json.sample*.txt")))  # spelled too
    assert f"+ {4 + samples} spelled sentence(s)" in out and "productions with terminals" in out


def test_negative_sentences_are_refused(capsys):
    src = DATA / "llamacpp__json.gbnf"
    assert main(["verify", str(src), str(src), "--decode", "--sentences", "-1", "--vocab", "bytes"]) == 2
    assert "--sentences must not be negative" in capsys.readouterr().err
