"""Where the runtime's compiled kernels live (runtime/jit.py): under ``$GRAMOPT_CACHE/numba``,
never in the package's folder; an unwritable cache folder gives a note and in-memory
compiles; in a new environment the first masks come from the kernels' Python twins at
once (no compile in the process) while one background process fills the cache; a
read-only copy of the package computes masks, and a process after the background compile
loads every kernel from the cache (no compile) and gives the same masks.

Each check runs a fresh interpreter on a copy of the package (``chmod -R a-w``; as root the
mode is not enforced, so the checks also look for files written into the copy).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

HASH_KEY = "from gramopt.runtime import earley; print(int(earley.hash_key(5)))"

FIRST_MASK = """
import json
from gramopt.grammar import CharClass, Grammar, Literal, Ref, Repeat, Rule, alt, seq
from gramopt.runtime import Matcher, Vocab, earley
digits = Repeat(CharClass(((48, 57),)), 1, None)
g = Grammar((Rule("root", seq(Literal("["), Ref("num"), Repeat(seq(Literal(","), Ref("num")), 0, None),
                          Literal("]"))), Rule("num", alt(digits, Literal("-")))), "root")
vocab = Vocab.from_bytes([b"[", b"]", b",", b"1", b"12", b"-", b"[1", b"1,", b"x"], eos=9)
m = Matcher(g, vocab)
masks = [m.compute_mask().tolist()]
m.accept_token(6)
masks.append(m.compute_mask().tolist())
kernels = [d for d in vars(earley).values() if hasattr(d, "stats") and hasattr(d, "signatures")]
print(json.dumps({"masks": masks,
                  "misses": sum(sum(d.stats.cache_misses.values()) for d in kernels),
                  "compiled": sum(len(d.overloads) for d in kernels),
                  "most_signatures": max(len(d.signatures) for d in kernels)}))
"""


SWITCH = FIRST_MASK.replace("print(json.dumps(", """
import time
from gramopt.runtime import jit
twins = masks
while jit.serving_twins():  # the background compile runs; then this process switches
    time.sleep(0.2)
m = Matcher(g, vocab)
masks = [m.compute_mask().tolist()]
m.accept_token(6)
masks.append(m.compute_mask().tolist())
assert masks == twins, (masks, twins)
print(json.dumps(""", 1)


def read_only_copy(tmp_path: Path) -> Path:
    """A copy of the package (sources only) with every write bit cleared."""
    dest = tmp_path / "pkg"
    shutil.copytree(ROOT / "gramopt", dest / "gramopt", ignore=shutil.ignore_patterns("__pycache__"))
    for p in [dest, *dest.rglob("*")]:
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    return dest


def run_python(code: str, pkg: Path, cache: Path, timeout: int = 900,
               kernels: str = "auto") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env.update(PYTHONPATH=str(pkg), GRAMOPT_CACHE=str(cache), PYTHONDONTWRITEBYTECODE="1",
               GRAMOPT_KERNELS=kernels)
    return subprocess.run([sys.executable, "-c", code], cwd=str(pkg), env=env, capture_output=True,
                          text=True, timeout=timeout)


def reference_masks() -> list:
    """FIRST_MASK's masks in this process."""
    from gramopt.grammar import CharClass, Grammar, Literal, Ref, Repeat, Rule, alt, seq
    from gramopt.runtime import Matcher, Vocab
    digits = Repeat(CharClass(((48, 57),)), 1, None)
    g = Grammar((Rule("root", seq(Literal("["), Ref("num"), Repeat(seq(Literal(","), Ref("num")), 0, None),
                                  Literal("]"))), Rule("num", alt(digits, Literal("-")))), "root")
    m = Matcher(g, Vocab.from_bytes([b"[", b"]", b",", b"1", b"12", b"-", b"[1", b"1,", b"x"], eos=9))
    masks = [m.compute_mask().tolist()]
    m.accept_token(6)
    return masks + [m.compute_mask().tolist()]


def background_pid(cache: Path) -> int | None:
    """The pid in the background compile's lock file (runtime/background.py), if any."""
    for lock in (cache / "numba").glob("warming-*"):
        try:
            return int(lock.read_text())
        except (OSError, ValueError):
            return None
    return None


def stop(pid: int) -> None:
    """End the background compile a test started (its own session), and wait for it."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)


def cache_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.suffix in (".nbi", ".nbc"))


@pytest.fixture
def pkg(tmp_path):
    dest = read_only_copy(tmp_path)
    yield dest
    for p in [dest, *dest.rglob("*")]:  # let pytest remove it
        p.chmod(p.stat().st_mode | stat.S_IWUSR)


def test_kernels_are_cached_under_gramopt_cache_not_in_the_package(pkg, tmp_path):
    from gramopt.runtime import earley
    cache = tmp_path / "cache"
    r = run_python(HASH_KEY, pkg, cache, kernels="compiled")
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) == int(earley.hash_key(5))
    written = cache_files(cache)
    assert written and all(p.is_relative_to(cache / "numba") for p in written)
    assert any(p.name.startswith("earley.hash_key") for p in written)
    assert cache_files(pkg) == []


def test_an_unwritable_cache_folder_compiles_in_memory_with_one_note(pkg, tmp_path):
    from gramopt.runtime import earley
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    r = run_python(HASH_KEY, pkg, blocker / "cache")  # below a file: no folder can be made there
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) == int(earley.hash_key(5))
    notes = [line for line in r.stderr.splitlines() if "cannot write the kernel cache" in line]
    assert len(notes) == 1
    assert "in the background" not in r.stderr  # nothing a second process could share
    assert "Traceback" not in r.stderr
    assert cache_files(pkg) == []


def test_a_new_environment_masks_at_once_from_twins_and_compiles_in_the_background(pkg, tmp_path):
    cache = tmp_path / "cache"
    first = run_python(FIRST_MASK, pkg, cache)
    pid = background_pid(cache)
    try:
        assert first.returncode == 0, first.stderr
        a = json.loads(first.stdout)
        assert a["masks"] == reference_masks()
        assert a["compiled"] == 0 and a["misses"] == 0  # nothing compiled in the process
        notes = [line for line in first.stderr.splitlines() if line.startswith("gramopt:")]
        assert len(notes) == 1 and "in the background" in notes[0], first.stderr
        assert pid is not None  # the background compile runs on, in its own session
        os.kill(pid, 0)
        again = run_python(FIRST_MASK, pkg, cache)  # a second process meanwhile: no second compile
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout)["masks"] == a["masks"]
        assert background_pid(cache) == pid
        assert "in the background" in again.stderr
    finally:
        if pid is not None:
            stop(pid)
    assert cache_files(pkg) == []


@pytest.mark.slow
def test_a_read_only_package_masks_and_a_process_after_the_background_compile_only_loads(pkg, tmp_path):
    """A cold compile of the mask kernels in the background (tens of seconds on a busy
    machine): the first process switches to them once they are cached, with the same
    masks; a later process loads every kernel, compiled once, from the cache."""
    cache = tmp_path / "cache"
    first = run_python(SWITCH, pkg, cache)  # twins' masks, then the compiled kernels' (equal)
    assert first.returncode == 0, first.stderr
    a = json.loads(first.stdout)
    assert a["compiled"] > 0 and a["misses"] == 0  # switched: loaded what the background compiled
    stamps = []
    for _ in range(1800):
        stamps = list((cache / "numba").glob("ready-*"))
        if stamps and background_pid(cache) is None:
            break
        time.sleep(0.5)
    assert stamps, (cache / "numba" / "warm.log").read_text()
    second = run_python(FIRST_MASK, pkg, cache)
    assert second.returncode == 0, second.stderr
    b = json.loads(second.stdout)
    assert b["masks"] == a["masks"] == reference_masks()
    assert b["misses"] == 0 and b["compiled"] > 0  # every kernel loaded from the cache
    assert second.stderr == ""
    compiled = [p.name.split("-")[0] for p in cache_files(cache) if p.suffix == ".nbc"]
    assert len(compiled) == len(set(compiled))  # each kernel compiled once
    assert cache_files(pkg) == []
