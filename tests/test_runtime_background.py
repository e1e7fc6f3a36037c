"""The background compile's bookkeeping (runtime/background.py) and the switch from twins to
compiled kernels (runtime/jit.py), with a stand-in child (a short Python sleep that writes
the ready stamp or not) instead of a real compile."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from gramopt.runtime import background, jit


@pytest.fixture
def child(monkeypatch):
    """Make ``Background.start`` run a child that sleeps ``seconds[0]`` and writes the stamp
    when ``writes[0]`` (instead of compiling); the list of children it started."""
    started = []
    settings = {"seconds": 0.6, "writes": True}

    def spawn(root):
        code = (f"import time; time.sleep({settings['seconds']})\n"
                + (f"open({str(root) + '/ready-test'!r}, 'w').write('{{}}')\n" if settings["writes"] else "")
                + f"import os; os.remove({background.lock_for(str(root) + '/ready-test')!r})")
        p = subprocess.Popen([sys.executable, "-c", code])
        started.append(p)
        return p

    monkeypatch.setattr(background, "_spawn", spawn)
    yield started, settings
    for p in started:
        p.wait(timeout=30)


def wait_until(job, state, seconds=30.0):
    end = time.monotonic() + seconds
    while job.state() != state and time.monotonic() < end:
        time.sleep(0.05)
    return job.state()


def test_one_compile_per_cache_folder_and_sources(tmp_path, child):
    started, _ = child
    stamp = str(tmp_path / "ready-test")
    first = background.Background.start(str(tmp_path), stamp)
    second = background.Background.start(str(tmp_path), stamp)  # another process of this cache
    other = background.Background.start(str(tmp_path), str(tmp_path / "ready-other"))  # another install
    assert len(started) == 2 and first.proc is started[0] and second.proc is None
    assert other.proc is started[1]
    assert first.state() == "running" and second.state() == "running"
    assert wait_until(first, "ready") == "ready"
    assert second.state() == "ready"


def test_a_compile_that_ends_without_its_stamp_has_failed(tmp_path, child):
    _, settings = child
    settings["writes"] = False
    job = background.Background.start(str(tmp_path), str(tmp_path / "ready-test"))
    assert wait_until(job, "failed") == "failed"


def test_a_lock_whose_process_is_gone_is_taken_over(tmp_path, child):
    started, _ = child
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    with open(background.lock_for(str(tmp_path / "ready-test")), "w") as f:
        f.write(str(gone.pid))
    job = background.Background.start(str(tmp_path), str(tmp_path / "ready-test"))
    assert job.proc is started[0]
    assert wait_until(job, "ready") == "ready"


class Job:
    def __init__(self, states):
        self.states = list(states)
        self.log = "log"

    def state(self):
        return self.states.pop(0) if len(self.states) > 1 else self.states[0]


@pytest.fixture
def mode_state(monkeypatch):
    """jit's process state, put back after the test (the test process's own mode)."""
    saved = dict(jit._STATE)
    monkeypatch.setattr(jit, "RECHECK_S", 0.0)
    yield jit._STATE
    jit._STATE.clear()
    jit._STATE.update(saved)


def test_twins_serve_until_the_background_compile_is_done_then_never_again(mode_state):
    mode_state.update(mode="python", job=Job(["running", "running", "ready"]), checked=0.0)
    assert [jit.serving_twins() for _ in range(4)] == [True, True, False, False]
    assert mode_state["mode"] == "compiled" and mode_state["job"] is None


def test_a_failed_background_compile_compiles_here_with_a_note(mode_state, capsys):
    mode_state.update(mode="python", job=Job(["failed"]), checked=0.0)
    assert jit.serving_twins() is False
    assert "background compile of the mask kernels failed" in capsys.readouterr().err


def test_a_ready_cache_is_used_from_the_first_call(tmp_path, mode_state, monkeypatch):
    monkeypatch.setattr(jit, "writable_cache_root", lambda: str(tmp_path))
    monkeypatch.setenv("GRAMOPT_KERNELS", "auto")
    open(jit.ready_stamp(str(tmp_path)), "w").close()
    mode_state.update(mode=None, job=None)
    assert jit.serving_twins() is False and mode_state["mode"] == "compiled"


def test_the_mode_is_one_of_three(mode_state, monkeypatch):
    monkeypatch.setenv("GRAMOPT_KERNELS", "fast")
    mode_state.update(mode=None, job=None)
    with pytest.raises(ValueError, match="GRAMOPT_KERNELS"):
        jit.serving_twins()
