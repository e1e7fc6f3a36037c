"""Resource bounds a user controls (issue 13): the verifier's work budget (deterministic,
with the input as the fallback), the CLI's work limits, and the outer safety limits
``--max-seconds`` / ``--max-memory`` over every stage (a one-line refusal naming the stage)."""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
from unittest.mock import ANY

from gramopt.cli import main
from gramopt.cli.guard import LimitReached, guarded, parse_memory, resident_bytes
from gramopt.formats import parse, read
from gramopt.grammar import GrammarError
from gramopt.passes import optimize
from gramopt.stage import current, stage
from gramopt.verify import Bounds, check_equivalence

ROOT = Path(__file__).resolve().parent.parent
NESTED = 'root ::= ((("a"{0,60}){0,60}){0,60})\n'  # 216,000 symbols: within the size bound, hugely ambiguous
NESTED_OPT = 'root ::= (("a"{0,60}){60}){60}\n'  # what the passes make of it (the same language)


def run(*argv) -> int:
    return main([str(a) for a in argv])


def child_cpu_seconds() -> float:
    """User + system CPU seconds of this process's finished children."""
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


# ---------------------------------------------------------------- the verifier's work budget


def test_the_work_budget_stops_the_check_at_the_same_step_every_time():
    a, b = parse(NESTED, "gbnf"), parse(NESTED_OPT, "gbnf")
    t = time.process_time()  # CPU seconds, whatever the load
    first = check_equivalence(a, b, Bounds(max_work=300_000))
    assert time.process_time() - t < 20  # ~0.3 s
    again = check_equivalence(a, b, Bounds(max_work=300_000))
    assert first.ok and first.stats["work_spent"] == "enumeration"
    assert first.stats["work"] == again.stats["work"] > 300_000
    assert "work budget ran out" in str(first)


def test_the_work_budget_does_not_hide_a_difference():
    a, b = parse('root ::= "a"{0,3}\n', "gbnf"), parse('root ::= "a"{0,4}\n', "gbnf")
    res = check_equivalence(a, b, Bounds(max_work=10_000))
    assert not res.ok and res.counterexample.data == b"aaaa"


def test_optimize_keeps_the_input_when_the_budget_is_spent_and_says_so():
    g = parse(NESTED, "gbnf")
    res = optimize(g, target="generic", bounds=Bounds(max_work=200_000))  # portable keeps it unverified
    assert res.grammar == g and res.report.verified == "ok"
    assert len(res.report.stops) == 1 and "work budget (200,000 Earley steps)" in res.report.stops[0]
    assert "stopped: verification stopped" in res.report.format()


def test_the_cli_prints_the_stop_reason_without_report(tmp_path, capsys):
    src, out = tmp_path / "nest.gbnf", tmp_path / "out.gbnf"
    src.write_text(NESTED, encoding="utf-8")
    assert run("optimize", src, "-o", out, "--target", "generic", "--max-verify-work", "200000") == 0
    err = capsys.readouterr().err
    assert f"{src}: note: verification stopped: its work budget (200,000 Earley steps)" in err
    assert check_equivalence(read(str(src)), read(str(out)), Bounds(max_work=100_000)).ok


@pytest.mark.parametrize("budget", [0, 1, 5])
def test_a_budget_spent_before_the_first_method_is_a_stop_not_a_crash(budget):
    """A budget spent while the recognizers close their start sets (before any method) is the
    same deterministic stop as one spent inside a method (it escaped as an internal error)."""
    a, b = parse('root ::= "a" root "b" | ""\n', "gbnf"), parse('root ::= "a" root "b" | "" | "ab"\n', "gbnf")
    res = check_equivalence(a, b, Bounds(max_work=budget))
    assert res.ok and res.stats["work_spent"] == "enumeration"
    assert check_equivalence(a, b, Bounds(max_work=budget)).stats == {**res.stats, "seconds": ANY}


@pytest.mark.parametrize("command", [("optimize", "-o"), ("verify",)])
def test_the_cli_with_a_verify_work_of_one_exits_0_in_one_line(tmp_path, capsys, command):
    """``--max-verify-work 1`` (``verify --max-work 1``): exit 0, the input written unchanged
    (optimize), one line saying the budget was spent — never exit 70."""
    src, out = ROOT / "examples" / "anbn_g2.ebnf", tmp_path / "out.ebnf"
    if command[0] == "optimize":
        argv = ("optimize", src, "-o", out, "--target", "generic", "--max-verify-work", "1")
    else:
        argv = ("verify", src, ROOT / "examples" / "anbn_g1.ebnf", "--max-work", "1")
    assert run(*argv) == 0
    err = capsys.readouterr()
    if command[0] == "optimize":
        assert out.read_bytes() == src.read_bytes()
        assert err.err.strip().count("\n") == 0 and "work budget (1 Earley steps) was spent" in err.err
    else:
        assert "before the work budget ran out" in err.out + err.err


@pytest.mark.slow
@pytest.mark.parametrize("command", ["optimize", "verify"])
def test_the_nested_repetition_ends_with_the_default_budget(tmp_path, command):
    src, opt = tmp_path / "nest.gbnf", tmp_path / "opt.gbnf"
    src.write_text(NESTED, encoding="utf-8")
    opt.write_text(NESTED_OPT, encoding="utf-8")
    argv = ["optimize", src, "-o", tmp_path / "out.gbnf", "--target", "generic"] if command == "optimize" else ["verify", src, opt]
    before = child_cpu_seconds()
    p = subprocess.run([sys.executable, "-m", "gramopt.cli", *map(str, argv)], capture_output=True, text=True,
                       cwd=ROOT, timeout=600)
    assert p.returncode == 0, p.stderr
    # CPU seconds of the child, not wall-clock: a loaded CI runner stretches the wall time
    assert child_cpu_seconds() - before < 60  # ~6 s (was > 120 s)
    assert "work budget" in p.stderr + p.stdout


# ---------------------------------------------------------------- work limits on the command line


@pytest.mark.parametrize("flag", ["--max-nodes", "--max-iterations", "--max-verify-work"])
def test_negative_work_limits_are_refused(tmp_path, capsys, flag):
    src = tmp_path / "g.gbnf"
    src.write_text('root ::= "a" | "b"\n', encoding="utf-8")
    assert run("optimize", src, "-o", tmp_path / "o.gbnf", flag, "-1") == 2
    assert f"{flag} must not be negative" in capsys.readouterr().err
    assert not (tmp_path / "o.gbnf").exists()


def test_zero_saturation_work_gives_a_verified_output(tmp_path):
    src, out = tmp_path / "g.gbnf", tmp_path / "o.gbnf"
    src.write_text('root ::= "ab" | "ac" | x\nx ::= "d"\n', encoding="utf-8")
    assert run("optimize", src, "-o", out, "--max-iterations", "0", "--max-nodes", "0") == 0
    assert check_equivalence(read(str(src)), read(str(out))).ok


# ---------------------------------------------------------------- safety limits: time and memory


def test_stages_nest_and_restore():
    with stage("outer"):
        with stage("inner"):
            assert current() == "inner"
        assert current() == "outer"


@pytest.mark.parametrize("text,expected", [("512M", 512 << 20), ("2G", 2 << 30), ("1.5g", 3 << 29),
                                           ("100000", 100000), ("64MiB", 64 << 20)])
def test_memory_sizes_parse(text, expected):
    assert parse_memory(text) == expected


@pytest.mark.parametrize("text", ["", "-1G", "0", "lots", "5X"])
def test_bad_memory_sizes_are_refused(text):
    with pytest.raises(GrammarError, match="--max-memory"):
        parse_memory(text)


def test_the_time_limit_interrupts_python_code_and_names_the_stage():
    t = time.perf_counter()
    with pytest.raises(LimitReached, match=r"stopped at --max-seconds 0.3 during pass spin"):
        with guarded(max_seconds=0.3), stage("pass spin"):
            while time.perf_counter() - t < 10:
                pass
    assert time.perf_counter() - t < 5


def test_the_memory_limit_interrupts_a_growing_process():
    hoard = []
    limit = f"{(resident_bytes() >> 20) + 64}M"  # 64 MB above what the test process holds now
    with pytest.raises(LimitReached, match=rf"stopped at --max-memory {limit} .* during hoarding"):
        with stage("hoarding"), guarded(max_memory=limit):
            for _ in range(4000):  # up to 4 GB, 1 MB at a time: stopped far earlier
                hoard.append(bytearray(1 << 20))
                time.sleep(0.002)  # >= 4 s to reach 2 GB: the watcher (every 20 ms) is not outrun on a loaded box
    assert len(hoard) < 2000
    hoard.clear()


def test_a_process_already_past_the_memory_limit_stops_at_once():
    with pytest.raises(LimitReached, match=r"stopped at --max-memory 1M .* during waiting"):
        with stage("waiting"), guarded(max_memory="1M"):
            pytest.fail("the body ran")


def test_no_limit_leaves_the_body_alone():
    with guarded():
        assert current() == "starting"


@pytest.mark.parametrize("argv,stage_name", [
    (["--max-seconds", "0.5"], ""),  # in verification on a quiet machine
    (["--max-memory", "1M"], ""),  # the process is already past 1 MB: stopped in the first stage
])
def test_the_cli_refuses_in_one_line_and_writes_nothing(tmp_path, argv, stage_name):
    src, out = tmp_path / "nest.gbnf", tmp_path / "out.gbnf"
    src.write_text(NESTED, encoding="utf-8")
    p = subprocess.run([sys.executable, "-m", "gramopt.cli", "optimize", str(src), "-o", str(out), "--target", "generic",
                        *argv], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{src}: error: stopped at {argv[0]} {argv[1]}")
    assert f"during {stage_name}" in lines[0] and lines[0].endswith("no output was written")
    assert not out.exists() and not list(tmp_path.glob(".gramopt-*"))


def test_bad_time_limits_are_refused(tmp_path, capsys):
    src = tmp_path / "g.gbnf"
    src.write_text('root ::= "a"\n', encoding="utf-8")
    assert run("optimize", src, "-o", tmp_path / "o.gbnf", "--max-seconds", "0") == 2
    assert "--max-seconds must be positive" in capsys.readouterr().err
