"""Hostile and unusual inputs (issue 13): each ends with a correct output (exit 0) or a
one-line error (exit 2), within bounded time and memory; never exit 70 or a traceback."""

from __future__ import annotations

import os
import random
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gramopt.cli import main
from gramopt.formats import parse, read
from gramopt.grammar import MAX_PASS_DEPTH, GrammarError, Literal, Repeat, depth, expanded_size, lower
from gramopt.passes import optimize
from gramopt.verify import check_equivalence

ROOT = Path(__file__).resolve().parent.parent


def run(*argv) -> int:
    return main([str(a) for a in argv])


def chain(n: int) -> str:
    """``root ::= r0``, ``r_i ::= "x_i" r_{i+1} | "y"``: inlining it nests n deep."""
    lines = ["root ::= r0"]
    lines += [f'r{i} ::= "x{i}" r{i + 1} | "y"' for i in range(n - 1)]
    lines.append(f'r{n - 1} ::= "z"')
    return "\n".join(lines) + "\n"


def words(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out: set[str] = set()
    while len(out) < n:
        out.add("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 10))))
    return sorted(out)


# ---------------------------------------------------------------- repetition bounds


def test_expanded_size_multiplies_nested_repetitions():
    assert expanded_size(Repeat(Literal("ab"), 0, 3)) == 6
    nested = parse('root ::= ((("a"{0,1000}){0,1000}){0,1000})\n', "gbnf")
    assert expanded_size(nested.rule("root").body) == 10 ** 9
    with pytest.raises(GrammarError, match="expands to 1,000,000,000 symbols"):
        lower(nested)


# Runs argv[2:] as its child and writes the child's CPU seconds and peak resident KB to
# argv[1]. A small fresh process forks the command: a child forked straight from the test's
# worker (~1 GB of torch and numba) reports the worker's pages as its own peak (ru_maxrss
# counts the time before exec), and RUSAGE_CHILDREN would count the worker's other children.
_MEASURED = ("import os, subprocess, sys\n"
             "p = subprocess.Popen(sys.argv[2:])\n"
             "_, status, u = os.wait4(p.pid, 0)\n"
             "open(sys.argv[1], 'w').write(f'{u.ru_utime + u.ru_stime} {u.ru_maxrss}')\n"
             "sys.exit(os.waitstatus_to_exitcode(status))\n")


def test_a_hundred_million_repetitions_are_refused_fast_and_small(tmp_path):
    src, usage = tmp_path / "rep.gbnf", tmp_path / "usage.txt"
    src.write_text('root ::= "a"{0,100000000}\n', encoding="utf-8")
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", _MEASURED, str(usage), sys.executable, "-m", "gramopt.cli",
                        "optimize", str(src), "-o", str(tmp_path / "o.gbnf")],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    seconds = time.perf_counter() - t
    assert p.returncode == 2, p.stderr
    assert p.stderr.startswith(f"{src}:1:1: error: rule 'root' expands to 100,000,000 symbols")
    assert "Traceback" not in p.stderr and not (tmp_path / "o.gbnf").exists()
    cpu, peak_kb = usage.read_text().split()
    # CPU seconds, not wall-clock: a loaded CI box stretches the wall time of the imports
    # (seen: > 15 s at load 5), not the work (0.4 s here)
    assert float(cpu) < 10, seconds
    assert int(peak_kb) < 1024 * 1024  # < 1 GB resident (50 MB here; ru_maxrss is in KB)


@pytest.mark.parametrize("command", ["optimize", "analyze", "verify"])
def test_nested_repetitions_are_refused_by_every_command(tmp_path, capsys, command):
    src = tmp_path / "nest.gbnf"
    src.write_text('root ::= ((("a"{0,1000}){0,1000}){0,1000})\n', encoding="utf-8")
    argv = {"optimize": ["optimize", src, "-o", tmp_path / "o.gbnf"], "analyze": ["analyze", src],
            "verify": ["verify", src, src]}[command]
    t = time.process_time()  # CPU seconds: the load of a shared CI box does not stretch them
    assert run(*argv) == 2
    assert time.process_time() - t < 5
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith(f"{src}:1:1: error: rule 'root' expands to 1,000,000,000 symbols")


def test_moderate_repetitions_still_optimize_and_verify():
    g = parse('root ::= "a"{2,50} "b"{3}\n', "gbnf")
    res = optimize(g)
    assert res.report.verified == "ok"
    assert check_equivalence(g, res.grammar).ok


# ---------------------------------------------------------------- long chains, deep nesting


def test_a_300_rule_chain_optimizes_within_the_depth_bound_and_reads_back(tmp_path):
    src, out = tmp_path / "chain.gbnf", tmp_path / "out.gbnf"
    src.write_text(chain(300), encoding="utf-8")
    assert run("optimize", src, "-o", out) == 0
    back = read(str(out))
    assert max(depth(r.body) for r in back.rules) <= MAX_PASS_DEPTH
    assert check_equivalence(read(str(src)), back).ok


@pytest.mark.slow
def test_a_1000_rule_chain_optimizes_and_reads_back(tmp_path):
    src, out = tmp_path / "chain.gbnf", tmp_path / "out.gbnf"
    src.write_text(chain(1000), encoding="utf-8")
    assert run("optimize", src, "-o", out) == 0
    assert run("analyze", out) == 0
    assert check_equivalence(read(str(src)), read(str(out))).ok


def test_inlining_never_nests_past_the_bound():
    g = parse(chain(120), "gbnf")
    res = optimize(g, verify=False)
    assert max(depth(r.body) for r in res.grammar.rules) <= MAX_PASS_DEPTH


# ---------------------------------------------------------------- large alternations


def test_2000_alternatives_factor_into_a_trie_quickly():
    g = parse("root ::= " + " | ".join(f'"{w}"' for w in words(2000)) + "\n", "gbnf")
    t = time.process_time()  # CPU seconds, whatever the load
    res = optimize(g, target="generic")  # factoring (the portable target keeps alternatives as written)
    assert time.process_time() - t < 30  # ~2 s; was 23 s (n^2.2)
    assert res.report.verified == "ok" and res.report.kappa_after < res.report.kappa_before


@pytest.mark.slow
def test_50000_alternatives_optimize(tmp_path):
    src, out = tmp_path / "enum.gbnf", tmp_path / "out.gbnf"
    src.write_text("root ::= " + " | ".join(f'"{w}"' for w in words(50_000)) + "\n", encoding="utf-8")
    t = time.process_time()  # CPU seconds (all threads), whatever the load
    assert run("optimize", src, "-o", out) == 0
    assert time.process_time() - t < 60  # < 10 s (benchmarks/hostile_inputs.py)
    assert check_equivalence(read(str(src)), read(str(out))).ok


# ---------------------------------------------------------------- the passes' own work budgets


def test_the_cleanup_budget_stops_deterministically_and_says_so():
    from gramopt.egraph import Limits
    g = parse("root ::= " + " | ".join(f'"{w}"' for w in words(300)) + "\n", "gbnf")
    runs = [optimize(g, target="generic", limits=Limits(cleanup_work=3_000)) for _ in range(2)]
    for r in runs:
        assert r.report.verified == "ok"
        assert any(s.startswith("pass cleanup: stopped: its work budget (3,000 ") for s in r.report.stops)
    assert runs[0].grammar == runs[1].grammar
    free = optimize(g, target="generic")
    assert not any("pass cleanup: stopped" in s for s in free.report.stops)
    assert free.grammar != runs[0].grammar  # the budget did cut the clean-ups short


def test_the_inline_budget_stops_deterministically_and_says_so(tmp_path, capsys):
    src = tmp_path / "chain.gbnf"
    src.write_text(chain(200), encoding="utf-8")
    outs = []
    for k in range(2):
        out = tmp_path / f"out{k}.gbnf"
        assert run("optimize", src, "-o", out, "--target", "generic", "--max-inline-work", "500") == 0
        assert "pass inline: stopped: its work budget (500 κ of the bodies rewritten)" in capsys.readouterr().err
        outs.append(out.read_text(encoding="utf-8"))
    assert outs[0] == outs[1]
    assert check_equivalence(read(str(src)), read(str(tmp_path / "out0.gbnf"))).ok
    assert run("optimize", src, "-o", tmp_path / "o.gbnf", "--max-cleanup-work", "-1") == 2


# ---------------------------------------------------------------- encodings


def test_utf8_bom_is_accepted(tmp_path, capsys):
    src = tmp_path / "bom.gbnf"
    src.write_bytes(b'\xef\xbb\xbfroot ::= "a" | "b"\n')
    plain = tmp_path / "plain.gbnf"
    plain.write_bytes(b'root ::= "a" | "b"\n')
    assert run("optimize", plain, "-o", "-") == 0
    without_bom = capsys.readouterr().out
    assert run("optimize", src, "-o", "-") == 0
    out = capsys.readouterr().out
    assert out == without_bom and out.startswith("root ::= ") and "\ufeff" not in out
    assert run("analyze", src) == 0 and run("convert", src) == 0


def test_latin1_cfg_is_read_by_every_command(tmp_path, capsys):
    src = tmp_path / "latin.cfg"
    src.write_bytes('S -> "caf\xe9" | "na\xefve" S\n'.encode("latin-1"))
    for argv in (["analyze", src], ["convert", src], ["optimize", src, "-o", tmp_path / "out.cfg"]):
        assert run(*argv) == 0, argv
    assert "café" in repr(read(str(tmp_path / "out.cfg")))


def test_latin1_is_refused_outside_cfg_with_a_position(tmp_path, capsys):
    src = tmp_path / "latin.gbnf"
    src.write_bytes('root ::= "caf\xe9"\n'.encode("latin-1"))
    assert run("optimize", src, "-o", "-") == 2
    assert capsys.readouterr().err.startswith(f"{src}:1:14: error: file is not valid UTF-8 text")


# ---------------------------------------------------------------- empty language


def test_an_empty_language_warns_and_fails_under_strict(tmp_path, capsys):
    """The warning and the refusal are the optimizer's and the command's, whatever the target:
    the generic one here (the default target's judge takes ~2.3 CPU s an optimize on this input);
    test_front_door runs this input under --target portable, --strict too, in both modes."""
    src, out = tmp_path / "empty.gbnf", tmp_path / "out.gbnf"
    src.write_text('root ::= "a" root\n', encoding="utf-8")
    assert run("optimize", src, "-o", out, "--target", "generic") == 0
    err = capsys.readouterr().err
    assert f"{src}: warning: the language is empty: rule 'root' derives no finite string" in err
    assert run("optimize", src, "-o", tmp_path / "strict.gbnf", "--strict", "--target", "generic") == 2
    assert capsys.readouterr().err.startswith(f"{src}: error: the language is empty")
    assert not (tmp_path / "strict.gbnf").exists()


# ---------------------------------------------------------------- output files


@pytest.fixture
def small(tmp_path) -> Path:
    p = tmp_path / "g.gbnf"
    p.write_text('root ::= "a" | "b"\n', encoding="utf-8")
    return p


def test_a_missing_output_folder_is_refused_before_the_work(small, tmp_path, capsys, monkeypatch):
    import gramopt.passes as passes_mod
    monkeypatch.setattr(passes_mod, "optimize", lambda *a, **k: pytest.fail("optimized before checking"))
    assert run("optimize", small, "-o", tmp_path / "nope" / "out.gbnf") == 2
    err = capsys.readouterr().err
    assert "error: output folder" in err and "does not exist" in err and "internal" not in err


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes anywhere")
def test_a_read_only_output_folder_is_refused(small, tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        assert run("optimize", small, "-o", ro / "out.gbnf") == 2
        assert "permission denied" in capsys.readouterr().err
    finally:
        ro.chmod(0o755)


def test_a_device_is_written_in_place_never_replaced(small, capsys):
    if not os.path.exists("/dev/full") or not stat.S_ISCHR(os.stat("/dev/full").st_mode) \
            or not os.access("/dev/full", os.W_OK):
        pytest.skip("no writable /dev/full device")
    assert run("convert", small, "-o", "/dev/full") == 2  # ENOSPC: a located one-line error
    assert "No space left on device" in capsys.readouterr().err
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_new_outputs_respect_the_umask(small, tmp_path):
    old = os.umask(0o022)
    try:
        assert run("convert", small, "-o", tmp_path / "out.gbnf") == 0
        assert run("optimize", small, "-o", tmp_path / "opt.gbnf") == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "out.gbnf").st_mode) == 0o644
    assert stat.S_IMODE(os.stat(tmp_path / "opt.gbnf").st_mode) == 0o644


def test_convert_refuses_to_overwrite_its_input(small, capsys):
    before = small.read_text(encoding="utf-8")
    assert run("convert", small, "-o", small) == 2
    assert "refusing to overwrite the input file" in capsys.readouterr().err
    assert small.read_text(encoding="utf-8") == before


# ---------------------------------------------------------------- folders


@pytest.mark.parametrize("where", ["same", "inside"])
def test_a_folder_output_in_or_equal_to_its_input_is_refused(tmp_path, capsys, where):
    src = tmp_path / "in"
    src.mkdir()
    (src / "g.gbnf").write_text('root ::= "a" | "b"\n', encoding="utf-8")
    out = src if where == "same" else src / "out"
    assert run("optimize", src, "-o", out, "-q") == 2
    assert "the output folder is the input folder or inside it" in capsys.readouterr().err
    assert (src / "g.gbnf").read_text(encoding="utf-8") == 'root ::= "a" | "b"\n'
    assert not (src / "out").exists()


@pytest.mark.parametrize("field", ["iterations", "nodes", "growth", "safety_seconds", "cleanup_work", "inline_work"])
def test_negative_limits_are_rejected(field):
    from gramopt.egraph import Limits
    with pytest.raises(ValueError, match="must not be negative"):
        Limits(**{field: -1})
