"""The per-request machinery: caches (memory LRU, disk), keys, budget and fall back in a
thread and in a process, pass through, counters and logs. Engine-free: requests are gramopt
grammars optimized for the xgrammar target."""

from __future__ import annotations

import json
import logging
import os
import threading

import pytest

from gramopt.integrations import request
from gramopt.integrations.request import Request, RequestOptimizer, RequestOptions

# a grammar the xgrammar target changes (a delegate rule inlined, FOLLOW lookaheads)
CHANGES = 'root ::= item ("," item)*\nitem ::= word\nword ::= [a-z]+\n'
UNREADABLE = 'root ::= "a" | | ( "b"'


def req(text: str = CHANGES, **kw) -> Request:
    return Request("grammar", text, dialect="ebnf", **kw)


def test_a_new_request_is_optimized_and_a_repeat_is_a_lookup():
    opt = RequestOptimizer(budget_s=None)
    first = opt.optimize(req())
    second = opt.optimize(req())
    assert first.how == "optimized" and first.text and first.text != CHANGES
    assert second.how == "cached" and second.text == first.text
    s = opt.stats()
    assert (s["requests"], s["optimized"], s["cached"], s["hit_rate"]) == (2, 1, 1, 0.5)
    assert s["seconds_optimizing"] > 0


def test_output_bytes_do_not_depend_on_the_optimizer_instance_or_budget():
    a = RequestOptimizer(budget_s=None).optimize(req()).text
    b = RequestOptimizer(budget_s=30.0).optimize(req()).text
    assert a == b


def test_unchanged_and_unreadable():
    opt = RequestOptimizer(budget_s=None)
    kept = opt.optimize(req('root ::= "a"'))
    assert kept.how == "unchanged" and kept.text is None
    bad = opt.optimize(req(UNREADABLE))
    assert bad.how == "passed through" and bad.text is None and "error" in bad.why
    assert opt.optimize(req(UNREADABLE)).how == "passed through"  # an unreadable input is not cached
    assert opt.stats()["passed_through"] == 2


def test_the_lru_evicts_the_least_recently_used():
    opt = RequestOptimizer(budget_s=None, cache_size=2)
    texts = [CHANGES, CHANGES.replace("[a-z]", "[a-y]"), CHANGES.replace("[a-z]", "[a-x]")]
    for t in texts:
        opt.optimize(req(t))
    assert opt.stats()["lru_entries"] == 2
    assert opt.optimize(req(texts[2])).how == "cached"
    assert opt.optimize(req(texts[0])).how == "optimized"  # evicted


def test_options_are_part_of_the_key():
    opt = RequestOptimizer(budget_s=None)
    opt.optimize(req())
    assert opt.optimize(req(start="item")).how != "cached"
    assert opt.optimize(req(out="gbnf")).how != "cached"
    other = RequestOptimizer(budget_s=None, verify="full")
    assert other._disk_key(req()) != opt._disk_key(req())
    assert RequestOptimizer(target="llama.cpp")._disk_key(req()) != opt._disk_key(req())


def test_the_disk_cache_serves_another_process_and_keys_on_the_version(tmp_path, monkeypatch):
    first = RequestOptimizer(budget_s=None, cache_dir=str(tmp_path))
    served = first.optimize(req())
    files = [os.path.join(r, f) for r, _, fs in os.walk(tmp_path) for f in fs]
    assert len(files) == 1

    def never(*a, **k):
        raise AssertionError("a disk-cache hit must not optimize")

    monkeypatch.setattr(request, "optimize_request", never)
    second = RequestOptimizer(budget_s=None, cache_dir=str(tmp_path))
    hit = second.optimize(req())
    assert hit.how == "cached" and hit.text == served.text
    import gramopt._version
    key = second._disk_key(req())
    monkeypatch.setattr(gramopt._version, "__version__", "999")
    assert second._disk_key(req()) != key


def test_a_corrupt_disk_entry_is_ignored(tmp_path, capsys):
    first = RequestOptimizer(budget_s=None, cache_dir=str(tmp_path))
    first.optimize(req())
    path = [os.path.join(r, f) for r, _, fs in os.walk(tmp_path) for f in fs][0]
    entry = json.load(open(path, encoding="utf-8"))
    entry["text"] = entry["text"].replace("root", "toor")
    json.dump(entry, open(path, "w", encoding="utf-8"))
    again = RequestOptimizer(budget_s=None, cache_dir=str(tmp_path)).optimize(req())
    assert again.how == "optimized"
    assert "bad cache entry" in capsys.readouterr().err


def test_an_optimizer_error_falls_back_and_is_logged(monkeypatch, caplog):
    def broken(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(request, "optimize_request", broken)
    opt = RequestOptimizer(budget_s=None)
    with caplog.at_level(logging.WARNING, logger="gramopt.integrations"):
        served = opt.optimize(req())
    assert served.how == "fell back" and served.text is None and "boom" in served.why
    assert opt.stats()["fell_back"] == 1 and opt.stats()["timed_out"] == 0
    assert any("unoptimized" in r.getMessage() for r in caplog.records)


def test_concurrent_requests_for_one_grammar_share_one_optimization(monkeypatch):
    calls = []
    gate = threading.Event()
    real = request.optimize_request

    def counted(r, target, verify):
        calls.append(r.text)
        gate.wait(10)
        return real(r, target, verify)

    monkeypatch.setattr(request, "optimize_request", counted)
    opt = RequestOptimizer(budget_s=None)
    futures = [opt.submit(req()) for _ in range(4)]
    gate.set()
    results = [f.result(120) for f in futures]  # a cap for a loaded runner, not a claim
    assert len(calls) == 1
    assert {r.text for r in results} == {results[0].text} and results[0].text


def gated(monkeypatch):
    """Make every optimization wait for the returned event (at most 30 s)."""
    gate = threading.Event()
    real = request.optimize_request

    def wait_then_optimize(r, target, verify):
        gate.wait(30)
        return real(r, target, verify)

    monkeypatch.setattr(request, "optimize_request", wait_then_optimize)
    return gate


def wait_for(opt, counter: str, value: int = 1):
    # up to 120 s: a real optimization in the background runs the judge's engines (tens of
    # seconds on a loaded 2-core CI runner); a pass returns as soon as the counter moves
    for _ in range(2400):
        if opt.stats()[counter] >= value:
            return
        threading.Event().wait(0.05)
    raise AssertionError(f"{counter} never reached {value}: {opt.stats()}")


def test_an_overrun_serves_its_repeats_at_once_then_from_the_cache(monkeypatch):
    gate = gated(monkeypatch)
    opt = RequestOptimizer(budget_s=0.05)
    first = opt.optimize(req())
    assert first.how == "fell back" and "budget" in first.why
    repeat = opt.optimize(req(), budget_s=None)  # would wait forever; an overrun is not waited for again
    assert repeat.how == "fell back" and "still running" in repeat.why
    assert opt.stats()["timed_out"] == 2
    gate.set()
    wait_for(opt, "late")
    assert opt.optimize(req()).how == "cached"


def test_a_budget_of_zero_serves_the_input_now_and_optimizes_for_the_next_request(monkeypatch):
    gate = gated(monkeypatch)
    opt = RequestOptimizer(budget_s=0)
    assert opt.optimize(req()).how == "fell back"
    gate.set()
    wait_for(opt, "late")
    assert opt.optimize(req()).how == "cached"


def test_pending_optimizations_are_bounded(monkeypatch):
    gate = gated(monkeypatch)
    opt = RequestOptimizer(budget_s=0, max_pending=2)
    texts = [CHANGES.replace("[a-z]", f"[a-{c}]") for c in "xyz"]
    hows = [opt.optimize(req(t)) for t in texts]
    assert [h.how for h in hows] == ["fell back"] * 3 and "already pending" in hows[2].why
    assert opt.stats()["timed_out"] == 2  # the third was never queued
    gate.set()
    wait_for(opt, "late", 2)


def test_the_process_worker_is_killed_at_the_deadline_and_restarts():
    opt = RequestOptimizer(budget_s=0.001, worker="process", kill_on_timeout=True)
    try:
        first = opt.optimize(req())
        assert first.how == "fell back" and "killed" in first.why
        assert opt.wait_idle(120)  # a cap for a loaded runner, not a claim
        fresh = opt.optimize(req(), budget_s=None)  # a new worker process (imports gramopt again)
        assert fresh.how == "optimized" and fresh.text == RequestOptimizer(budget_s=None).optimize(req()).text
        assert opt.stats()["late"] == 0  # a killed worker leaves nothing running
    finally:
        opt.close()


def test_the_memory_budget_falls_back():
    opt = RequestOptimizer(budget_s=None, worker="process", max_memory=1 << 20)  # 1 MiB of address space
    try:
        served = opt.optimize(req())
        assert served.how == "fell back" and served.text is None
        assert opt.stats()["fell_back"] == 1
    finally:
        opt.close()


def test_options_are_checked_and_read_from_the_environment():
    with pytest.raises(ValueError, match="process"):
        RequestOptions(max_memory=1 << 30)
    with pytest.raises(ValueError, match="process"):
        RequestOptions(kill_on_timeout=True)
    with pytest.raises(ValueError, match="unknown target"):
        RequestOptions(target="nope")
    with pytest.raises(ValueError, match="verify"):
        RequestOptions(verify="sometimes")
    o = RequestOptions.from_env(environ={"GRAMOPT_BUDGET_MS": "250", "GRAMOPT_VERIFY": "full",
                                         "GRAMOPT_MAX_MEMORY_MB": "512", "GRAMOPT_CACHE_DIR": "/tmp/x"})
    assert (o.budget_s, o.verify, o.worker, o.max_memory, o.cache_dir) == (0.25, "full", "process", 512 << 20, "/tmp/x")
    assert RequestOptions.from_env(environ={"GRAMOPT_BUDGET_MS": "-1"}).budget_s is None
    assert RequestOptions.from_env(environ={}) == RequestOptions()


def test_async_variant_returns_the_same():
    import asyncio
    opt = RequestOptimizer(budget_s=None)
    served = asyncio.run(opt.optimize_async(req()))
    assert served.how == "optimized" and served.text == opt.optimize(req()).text


def test_the_counters_are_logged(caplog, monkeypatch):
    monkeypatch.setattr(request, "LOG_EVERY", 2)
    opt = RequestOptimizer(budget_s=None)
    with caplog.at_level(logging.INFO, logger="gramopt.integrations"):
        opt.optimize(req())
        opt.optimize(req())
    assert any("2 requests: 1 optimized, 1 cached" in r.getMessage() for r in caplog.records)
