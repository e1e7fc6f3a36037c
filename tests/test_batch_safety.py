"""Folder mode under hostile conditions (issue 13): bad cache entries are ignored with a
warning, hand-edited outputs are repaired, the cache key holds every output-shaping option,
and an interrupted or terminated batch stops every worker and says truthfully what it wrote."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gramopt.cli.batch import Item, item_key
from gramopt.optimizer.cache import cache_get, cache_path, cache_put
from gramopt.cli import main

ROOT = Path(__file__).resolve().parent.parent
GRAMMAR = 'root ::= "ab" | "ac"\n'


@pytest.fixture
def folder(tmp_path) -> Path:
    src = tmp_path / "in"
    src.mkdir()
    (src / "g.gbnf").write_text(GRAMMAR, encoding="utf-8")
    return src


def entries(cache: Path) -> list[Path]:
    return [p for p in cache.rglob("*") if p.is_file() and not p.name.startswith(".")]


@pytest.mark.parametrize("bad", ['[1, 2, 3]', '{"text": 42}', "not json at all", "\udcff"])
def test_a_bad_cache_entry_is_ignored_with_a_warning(folder, tmp_path, capsys, bad, one_batch_worker):
    """(The batches of this module share one spawned worker, conftest's ``one_batch_worker``: it
    loads the default target's engines once, not once per batch.)"""
    out = tmp_path / "out"
    assert main(["optimize", str(folder), "-o", str(out), "-q", "-j", "1"]) == 0
    good = (out / "g.gbnf").read_text(encoding="utf-8")
    (entry,) = entries(out / ".gramopt-cache")
    entry.write_bytes(bad.encode("utf-8", "surrogateescape"))
    capsys.readouterr()
    assert main(["optimize", str(folder), "-o", str(out), "-q", "-j", "1"]) == 0
    err = capsys.readouterr().err
    assert "warning: ignoring a bad cache entry" in err and "internal error" not in err
    assert (out / "g.gbnf").read_text(encoding="utf-8") == good
    assert json.loads(entry.read_text(encoding="utf-8"))["text"] == good  # the entry was replaced


def test_a_tampered_cache_entry_fails_its_hash(tmp_path, capsys):
    key = "ab" * 32
    cache_put(str(tmp_path), key, 'root ::= "a"\n')
    assert cache_get(str(tmp_path), key) == 'root ::= "a"\n'
    path = Path(cache_path(str(tmp_path), key))
    entry = json.loads(path.read_text(encoding="utf-8"))
    entry["text"] = 'root ::= "b"\n'  # an edit that keeps the shape
    path.write_text(json.dumps(entry), encoding="utf-8")
    assert cache_get(str(tmp_path), key) is None
    assert "does not match its SHA-256" in capsys.readouterr().err
    cache_put(str(tmp_path), "cd" * 32, "x")
    os.replace(cache_path(str(tmp_path), "cd" * 32), path)  # an entry moved under another key
    assert cache_get(str(tmp_path), key) is None
    assert "stored under another key" in capsys.readouterr().err


def test_a_hand_edited_output_is_repaired(folder, tmp_path, one_batch_worker):
    out = tmp_path / "out"
    assert main(["optimize", str(folder), "-o", str(out), "-q", "-j", "1"]) == 0
    good = (out / "g.gbnf").read_text(encoding="utf-8")
    (out / "g.gbnf").write_text('root ::= "hacked"\n', encoding="utf-8")
    assert main(["optimize", str(folder), "-o", str(out), "-q", "-j", "1"]) == 0
    assert (out / "g.gbnf").read_text(encoding="utf-8") == good


def test_the_cache_key_holds_the_work_limits():
    item = Item("a.gbnf", "gbnf", GRAMMAR, "a.gbnf", 0, "out/a.gbnf")
    base = item_key(item, {"target": "generic"})
    for option in ("max_nodes", "max_iterations", "max_verify_work"):
        assert item_key(item, {"target": "generic", option: 7}) != base
    assert item_key(item, {"target": "generic", "max_seconds": 7}) == base  # a safety limit shapes nothing


@pytest.mark.slow
@pytest.mark.parametrize("sig, group, code, word", [
    (signal.SIGINT, True, 130, "interrupted"),  # Ctrl-C reaches the whole process group, as on a terminal
    (signal.SIGTERM, False, 143, "terminated"),  # a supervisor's `kill PID`: the client alone gets it
])
def test_a_stop_ends_every_worker_and_reports_what_was_written(tmp_path, sig, group, code, word):
    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    fast = 'root ::= "a" | "b"\n'
    slow = 'root ::= ((("a"{0,60}){0,60}){0,60})\n'  # seconds of verification each
    (src / "a0.gbnf").write_text(fast, encoding="utf-8")
    for k in range(6):
        (src / f"b{k}.gbnf").write_text(slow.replace('"a"', f'"a{k}"'), encoding="utf-8")
    p = subprocess.Popen([sys.executable, "-m", "gramopt.cli", "optimize", str(src), "-o", str(out), "-j", "2"],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    deadline = time.monotonic() + 120
    while not (out / "a0.gbnf").exists() and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.1)
    assert (out / "a0.gbnf").exists()
    (os.killpg if group else os.kill)(p.pid, sig)
    _, err = p.communicate(timeout=60)
    assert p.returncode == code, err
    written = sorted(q.name for q in out.glob("*.gbnf"))
    assert f"gramopt: {word}; {len(written)} output(s) were written before it stopped" in err
    assert "Traceback" not in err
    time.sleep(3)  # no worker goes on writing after the client has stopped
    assert sorted(q.name for q in out.glob("*.gbnf")) == written
    with pytest.raises(ProcessLookupError):
        os.killpg(p.pid, 0)  # every process of the group (the workers) is gone


def test_a_worker_holds_itself_to_max_memory():
    """Run as a worker runs it: in a process's main thread (signals), here a subprocess."""
    code = (
        "import json, sys\n"
        "from dataclasses import asdict\n"
        "from gramopt.cli.batch import Item, optimize_item\n"
        f"item = asdict(Item('a.gbnf', 'gbnf', {GRAMMAR!r}, 'a.gbnf', 0, 'out/a.gbnf'))\n"
        "print(json.dumps([optimize_item(item, {'target': 'generic', 'max_memory': m}, None)\n"
        "                  for m in ('1M', '4G')]))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr
    small, big = json.loads(p.stdout.strip().splitlines()[-1])
    assert small["code"] == 2 and "stopped at --max-memory 1M" in small["message"] and small["text"] is None
    assert big["code"] == 0 and big["text"]


def _workers(pid: int) -> list[int]:
    """Spawned worker processes whose parent is ``pid`` (not multiprocessing's resource tracker)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmd = (d / "cmdline").read_bytes().decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid and "spawn_main" in cmd and "resource_tracker" not in cmd:
            out.append(int(d.name))
    return out


def _kill_a_worker(pid: int, not_these: set[int], deadline: float) -> int:
    while time.monotonic() < deadline:
        fresh = [w for w in _workers(pid) if w not in not_these]
        if fresh:
            os.kill(fresh[0], signal.SIGKILL)
            return fresh[0]
        time.sleep(0.05)
    raise AssertionError("no worker process appeared")


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds worker processes through /proc")
def test_a_killed_worker_fails_its_item_alone(tmp_path):
    """A worker killed (the kernel's out-of-memory killer, a signal) used to break the whole
    pool: every item after it was lost. Now the items it may have held run again, one process
    each; the item whose process is killed again fails alone, naming the signal."""
    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    (src / "a0.gbnf").write_text('root ::= "a" | "b"\n', encoding="utf-8")
    words = " | ".join(f'"w{k}x{k * 7919 % 10007}"' for k in range(20000))
    (src / "b.gbnf").write_text(f"root ::= {words}\n", encoding="utf-8")  # seconds in factoring
    for k in range(2):
        (src / f"c{k}.gbnf").write_text(f'root ::= "c{k}" | "d"\n', encoding="utf-8")
    p = subprocess.Popen([sys.executable, "-m", "gramopt.cli", "optimize", str(src), "-o", str(out), "-j", "1",
                          "--target", "generic"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (out / "a0.gbnf").exists() and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.05)
        assert (out / "a0.gbnf").exists()
        first = _kill_a_worker(p.pid, set(), deadline)  # the pool's worker, busy with b
        _kill_a_worker(p.pid, {first}, deadline)  # b's own process: b fails for good
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 2, err
    assert "b.gbnf: error: its worker process was killed by SIGKILL (out of memory?" in err
    assert "a worker process died; the 3 item(s) it may have held are run again, one process each" in err
    assert sorted(q.name for q in out.glob("*.gbnf")) == ["a0.gbnf", "c0.gbnf", "c1.gbnf"]
    assert "Traceback" not in err


CLIENT = '''
import multiprocessing, os, sys, time
from gramopt.cli.batch import _worker_init

def worker(client):
    _worker_init(client)
    print(os.getpid(), flush=True)
    time.sleep(60)

if __name__ == "__main__":
    multiprocessing.get_context("spawn").Process(target=worker, args=(os.getpid(),)).start()
    time.sleep(60)
'''


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody has reaped yet has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_a_worker_ends_when_its_client_is_killed(tmp_path):
    """A client ended by SIGKILL (no handler runs, no pool shutdown) takes its batch workers
    with it: none goes on with an item for nobody (``_end_with_client``)."""
    script = tmp_path / "client.py"
    script.write_text(CLIENT, encoding="utf-8")
    client = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        worker = int(client.stdout.readline())  # said once past _worker_init
        assert _alive(worker)
        client.kill()
        client.wait()
        deadline = time.monotonic() + 20
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(worker)
    finally:
        client.kill()
