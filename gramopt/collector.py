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


LARGE_RULES = 2_000  # from here a collection (~1 s at 10,000 rules) pays for itself in peak memory


def release_memory(rules: int) -> None:
    """Between stages of a large grammar (``rules`` >= ``LARGE_RULES``): collect the cycles the
    stage left while the collector was paused (the judge's closures and fallbacks: 2.4 million
    objects at 10,000 rules) and hand the C heap's free pages back (glibc's ``malloc_trim``:
    the engines compile in worker threads, whose arenas the main thread does not reuse), so
    the next stage does not stack its peak on the last one's garbage (10,000 rules: 1.51 →
    1.27 GB). Below the threshold nothing is done: a collection has a fixed cost of ~0.1 s
    (every object created since the pause began, the engines' imports included)."""
    if rules >= LARGE_RULES:
        release_now()


def release_now() -> None:
    """``release_memory``'s work, whatever the size: collect the youngest generation (what was
    made since the collector was paused) and give the C heap's free pages back. A saturation
    frees hundreds of MB of e-graph that the engines, compiling in threads of their own, do
    not reuse (``passes``: after the passes of a grammar the check does not run ahead)."""
    gc.collect(0)
    try:
        import ctypes
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the collection alone
        pass
