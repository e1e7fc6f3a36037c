"""One front door (issue 25): ``gramopt optimize FILE`` and a batch holding that one file run
the same ``optimizer.run_job``, so every case of the hostile-input table (issue 13,
``benchmarks/hostile_inputs.py``) and every refusal of the single-file path (``--strict``
included) gives the same exit status and the same output bytes in both modes."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from gramopt.cli import main
from gramopt.cli.batch import batch_items
from gramopt.optimizer import Options, WorkLimits
from gramopt.optimizer.limits import NAMES

ROOT = Path(__file__).resolve().parent.parent


def chain(n: int) -> str:
    """``root ::= r0``, ``r_i ::= "x_i" r_{i+1} | "y"``: inlining it nests n deep."""
    lines = ["root ::= r0"] + [f'r{i} ::= "x{i}" r{i + 1} | "y"' for i in range(n - 1)] + [f'r{n - 1} ::= "z"']
    return "\n".join(lines) + "\n"


def alternatives(n: int) -> str:
    rng = random.Random(0)
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice("abcdefghij") for _ in range(rng.randint(3, 8))))
    return "root ::= " + " | ".join(f'"{w}"' for w in sorted(words)) + "\n"


IGNORED = {"type": "object", "properties": {
    "c": {"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"type": "number"}},
    "n": {"type": "number", "multipleOf": 2}}, "required": ["n"]}
LOOP = {"$defs": {"e": {"anyOf": [{"allOf": [{"$ref": "#/$defs/e"}]}, {"type": "integer"}]}}, "$ref": "#/$defs/e"}
PORTABLE = ("--target", "portable")

# case -> (input file name, its bytes, flags, the exit status both modes give)
CASES = {
    "rep": ("rep.gbnf", b'root ::= "a"{0,100000000}\n', PORTABLE, 2),
    "nest1000": ("nest.gbnf", b'root ::= ((("a"{0,1000}){0,1000}){0,1000})\n', PORTABLE, 2),
    "alt300": ("alt.gbnf", alternatives(300).encode(), PORTABLE, 0),
    "chain120": ("chain120.gbnf", chain(120).encode(), ("--target", "generic"), 0),
    "chain150": ("chain150.gbnf", chain(150).encode(), ("--target", "generic"), 0),
    "latin": ("latin.cfg", 'S -> "caf\xe9" | "na\xefve" S\n'.encode("latin-1"), PORTABLE, 0),
    "bom": ("bom.gbnf", b'\xef\xbb\xbfroot ::= "a" | "b"\n', PORTABLE, 0),
    "nul": ("nul.gbnf", b'root ::= "a"\x00\n', PORTABLE, 2),
    "not-utf8": ("bad.gbnf", b'root ::= "\xff"\n', PORTABLE, 2),
    "syntax": ("syntax.gbnf", b'root ::= "a\n', PORTABLE, 2),
    "empty": ("empty.gbnf", b'root ::= "a" root\n', PORTABLE, 0),
    # --strict refuses after the optimize, whatever the target: under generic, so that only "empty"
    # pays the default target's judge on an empty language (~2.3 CPU s an optimize, in each mode)
    "empty-strict": ("empty.gbnf", b'root ::= "a" root\n', ("--target", "generic", "--strict"), 2),
    "neg-limit": ("x.gbnf", b'root ::= "a" | "b"\n', PORTABLE + ("--max-nodes", "-1"), 2),
    "cleanup-work": ("alt.gbnf", alternatives(300).encode(), ("--target", "generic", "--max-cleanup-work", "2000"), 0),
    "inline-work": ("chain.gbnf", chain(60).encode(), ("--target", "generic", "--max-inline-work", "50"), 0),
    "verify-work": ("xy.gbnf", b'root ::= "x" "y" | "x" "z"\n', PORTABLE + ("--max-verify-work", "30"), 0),
    "unknown-pass": ("x.gbnf", b'root ::= "a" | "b"\n', PORTABLE + ("--passes", "nosuch"), 2),
    "keep-missing": ("x.gbnf", b'root ::= "a" | "b"\n', PORTABLE + ("--keep", "nosuch"), 2),
    "keep": ("k.gbnf", b'root ::= a "b"\na ::= "a"\n', PORTABLE + ("--keep", "a"), 0),
    "lark-lexer-as-gbnf": ("l.lark", b'start: WORD\nWORD: /[a-z]+/\n', PORTABLE + ("--to", "gbnf"), 2),
    "fast": ("xy.gbnf", b'root ::= "x" "y" | "x" "z"\n', ("--target", "generic", "--fast"), 0),
    "schema-ignored": ("s.json", json.dumps(IGNORED).encode(), ("--target", "xgrammar", "--no-verify"), 0),
    "schema-left-recursive": ("s.json", json.dumps(LOOP).encode(),
                              ("--converter", "xgrammar", "--target", "llama.cpp"), 2),
    "default-target": ("xy.gbnf", b'root ::= "x" "y" | "x" "z"\n', (), 0),
}


def _both(tmp_path: Path, case: str, capsys):
    """(exit, output bytes or None, stderr) of the single-file run and of the batch run."""
    name, data, flags, _ = CASES[case]
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / name).write_bytes(data)
    target = flags[flags.index("--target") + 1] if "--target" in flags else "portable"
    to = flags[flags.index("--to") + 1] if "--to" in flags else None
    dst = Path(batch_items(str(folder), str(tmp_path / "batch"), to=to, target=target)[0].dst)
    single_out = tmp_path / "single" / dst.name
    single_out.parent.mkdir()
    runs = []
    for argv in (["optimize", folder / name, "-o", single_out, *flags],
                 ["optimize", folder, "-o", tmp_path / "batch", "-q", "-j", "1", "--cache", tmp_path / "cache",
                  *flags]):
        code = main([str(a) for a in argv])
        out = single_out if argv[1] != folder else dst
        runs.append((code, out.read_bytes() if out.exists() else None, capsys.readouterr().err))
    return runs


@pytest.mark.parametrize("case", sorted(CASES))
def test_single_file_and_batch_give_the_same_bytes_and_exit(tmp_path, capsys, case, one_batch_worker):
    """(The batches of this module share one spawned worker: conftest's ``one_batch_worker``.)"""
    (code1, bytes1, err1), (code2, bytes2, err2) = _both(tmp_path, case, capsys)
    assert (code1, code2) == (CASES[case][3], CASES[case][3]), (err1, err2)
    assert bytes1 == bytes2, (err1, err2)
    assert (bytes1 is None) == (code1 != 0)
    assert "Traceback" not in err1 + err2
    if code2 == 0:  # the item reached a worker: through the shared executor, not around it
        assert one_batch_worker.built >= 1, "the batch driver no longer builds concurrent.futures' executor"


def test_options_are_the_cache_key_and_every_limit_is_in_it():
    """Every field of ``Options`` and every work limit reaches the key; what shapes nothing
    does not exist on the record."""
    base = Options().key()
    assert set(NAMES) <= set(base)
    for name in NAMES:
        assert Options(limits=WorkLimits(**{name: 7})).key()[name] == 7
    assert Options.of({"target": "portable", "report": True, "max_memory": "1G"}) == Options(target="portable")
    assert Options(keep=("b", "a", "b")).keep == ("a", "b")


def test_the_limit_flags_are_generated_from_the_record(capsys):
    with pytest.raises(SystemExit):
        main(["optimize", "--help"])
    help_text = capsys.readouterr().out
    for name in NAMES:
        assert "--" + name.replace("_", "-") in help_text


def test_cli_and_the_batch_driver_import_one_front_door():
    """No second copy of "optimize one input": the batch worker and the single-file command
    both call ``optimizer.run_job``, and no module calls ``passes.optimize`` on a read input
    besides it."""
    import ast
    callers = set()
    for path in (ROOT / "gramopt").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "run_job":
                callers.add(str(path.relative_to(ROOT)))
    assert {"gramopt/cli/optimize.py", "gramopt/cli/batch.py"} <= callers
    assert not (ROOT / "gramopt" / "batch.py").exists()
