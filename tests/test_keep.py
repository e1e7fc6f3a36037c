"""``optimize --keep RULE`` / ``passes.optimize(keep=...)``: extra entry points survive.

whisper.cpp's ``command`` example starts decoding from ``prompt`` and then from ``root``;
without ``--keep prompt`` the default target removes ``prompt`` as unreachable (or merges
it with ``init``). A kept rule is never removed, inlined away or renamed, and its own
language is the input's (checked like the start rule's).
"""

from __future__ import annotations

import pytest

from gramopt import targets
from gramopt.cli.batch import Item, item_key
from gramopt.cli import main
from gramopt.formats import parse, write
from gramopt.grammar import GrammarError
from gramopt.passes import optimize
from gramopt.verify import check_equivalence

ASSISTANT = '''# a whisper.cpp-style command grammar: the app starts from `prompt` first, then `root`
root   ::= init " " (command | question) "."
prompt ::= init

# leading space is very important!
init ::= " Ok Whisper, start listening for commands."

command ::= "Turn " ("on" | "off") " " device | "Set " device " to " value
question ::= "What is the " device " set to?"
device ::= "light" | "heater" | "TV"
value ::= [0-9]+
'''


def _as_start(g, name):
    from dataclasses import replace
    return replace(g, start=name)


@pytest.fixture(scope="module")
def assistant():
    return parse(ASSISTANT, "gbnf")


@pytest.mark.parametrize("target", targets.NAMES)
def test_kept_rule_survives_with_its_language(assistant, target):
    out = optimize(assistant, target=target, keep=["prompt", "device"]).grammar
    for name in ("prompt", "device"):
        assert name in out, (target, write(out))
        assert check_equivalence(_as_start(assistant, name), _as_start(out, name)).ok
    assert check_equivalence(assistant, out).ok


@pytest.mark.parametrize("target", ["portable", "xgrammar"])
def test_without_keep_the_entry_point_goes(assistant, target):
    """The reason for --keep: a rule only an engine starts from is unreachable."""
    assert "prompt" not in optimize(assistant, target=target).grammar


def test_kept_rule_gets_no_follow_assertion(assistant):
    """xgrammar's FOLLOW lookaheads assume the uses in the grammar; an entry point ends anywhere."""
    out = optimize(assistant, target="xgrammar", keep=["device"]).grammar
    assert out.rule("device").lookahead is None


def test_keep_names_an_existing_rule(assistant):
    with pytest.raises(GrammarError, match="no rule named 'nope'"):
        optimize(assistant, keep=["nope"])


def test_cli_keep(tmp_path, capsys):
    src = tmp_path / "assistant.gbnf"
    src.write_text(ASSISTANT)
    out = tmp_path / "out.gbnf"
    assert main(["optimize", str(src), "--keep", "prompt", "-o", str(out)]) == 0
    assert "\nprompt ::= " in out.read_text()
    assert main(["optimize", str(src), "--keep", "nope", "-o", str(out)]) == 2
    assert "--keep nope: no rule named 'nope'" in capsys.readouterr().err


def test_keep_is_part_of_the_batch_cache_key():
    item = Item("a.gbnf", "gbnf", ASSISTANT, "a.gbnf", 0, "out/a.gbnf")
    assert item_key(item, {"keep": ["prompt"]}) != item_key(item, {})
