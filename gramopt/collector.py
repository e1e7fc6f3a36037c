"""Python's cyclic garbage collector, paused while the optimizer or a check runs.

    with paused(): ...        off for the body, on again after if it was on (nests)

The optimizer and the verifier build millions of small tracked objects (expression nodes,
trie pieces, Earley sets and items) that stay alive until the stage ends; every automatic
collection meanwhile traverses all of them and frees nothing (2-3x a language check's
time on the corpus's largest grammars, a quarter of a 50,000-word enum's optimization).
What they leave in cycles is freed by the first collection after the body (or, for the
recognizers' sets, by reference counting: ``verify.reference.Recognizer.release``).
Outputs, verdicts and work charged do not depend on when garbage is collected.
Standard library only, so that every floor may import it.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager


@contextmanager
def paused():
    """Run the body with the cyclic collector off; restore its state after, however it ends."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
