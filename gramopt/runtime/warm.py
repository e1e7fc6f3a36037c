"""Compile (or load) the runtime's kernels ahead of use: ``python -m gramopt.runtime.warm``,
or in the background of a new environment's first mask (background.py starts it).

A decoding step's kernels are compiled once and kept in the kernel cache (jit.py:
``$GRAMOPT_CACHE/numba``); ``warm`` runs a small grammar over a small vocabulary through
every step a server takes (matcher, masks, accepts, rollback, fork, jump-forward, chart
growth, the batch kernel, the plain walk), then writes the cache's ready stamp
(``jit.ready_stamp``). Kernels are compiled per argument type, not per grammar or
vocabulary (jit.py gives each kernel one specialization), so what this compiles is what
a Qwen-sized vocabulary and any grammar use.

The runtime does not need it run by hand: the first kernel call of a process that finds
no ready stamp starts it as a background process (background.py, one per cache folder)
and serves masks from the kernels' Python twins meanwhile (jit.py, twins.py); an image
build or a CI setup step can still run it to have compiled kernels from the first mask on.
"""

from __future__ import annotations

import json
import os
import sys
import time

from ..grammar import CharClass, Grammar, Literal, Ref, Repeat, Rule, alt, seq
from . import jit
from .background import lock_for, remove


def warm_grammar() -> Grammar:
    """A JSON-like grammar: a string, a repetition, recursion, a counted repetition."""
    digit = CharClass(((48, 57),))
    value = alt(Ref("num"), Ref("str"), Ref("arr"))
    return Grammar((
        Rule("root", Ref("arr")),
        Rule("arr", seq(Literal("["), value, Repeat(seq(Literal(","), value), 0, None), Literal("]"))),
        Rule("num", seq(Repeat(Literal("-"), 0, 1), Repeat(digit, 1, 40))),
        Rule("str", seq(Literal('"'), Repeat(CharClass(((34, 34), (92, 92)), negated=True), 0, None),
                        Literal('"'))),
    ), "root")


def warm() -> float:
    """Run every step kind once (kernels compiled or loaded); the seconds it took."""
    from . import earley as K
    from .batch import BatchMatcher
    from .matcher import Matcher, allocate_token_bitmask
    from .vocab import Vocab

    t = time.perf_counter()
    tokens = [b"[", b"]", b",", b"1", b"12", b"-", b'"', b'"a', b"a", b"[1", b"1,", b'["', b"x"]
    vocab = Vocab.from_bytes(tokens, eos=len(tokens))
    g = warm_grammar()
    m = Matcher(g, vocab)
    out = allocate_token_bitmask(2, len(vocab))
    m.fill_next_token_bitmask(out, 0)
    for tid in (9, 10, 4, 2, 11, 8):  # [1  1,  12  ,  ["  a
        m.accept_token(tid)
        m.fill_next_token_bitmask(out, 0)
    m.find_jump_forward_string()
    m.state_key()
    f = m.fork()
    m.rollback(2)
    with BatchMatcher(max_threads=1) as bm:
        bm.batch_fill_next_token_bitmask([m, f], out)
    Matcher(g, vocab, mode="walk").compute_mask()
    m.chart.grow()  # rehashes the interned kernels
    m.fill_next_token_bitmask(out, 0)
    K.hash_key(1)  # subtree class tables (subtrees.py)
    K.cls_index(m.G, 1, 0)  # a counted repetition's count classes (tokens.py)
    return time.perf_counter() - t


def write_stamp(seconds: float) -> None:
    """Mark the kernel cache as holding every kernel ``warm`` compiles (jit.ready_stamp),
    written whole (a reader sees no stamp or the full one)."""
    root = jit.kernel_cache_root()
    stamp = jit.ready_stamp(root)
    tmp = os.path.join(root, f".writing-{os.getpid()}")  # not ready-*: readers never see it
    with open(tmp, "w") as f:
        cpu = os.times()
        json.dump({"seconds": round(seconds, 2), "cpu_s": round(cpu.user + cpu.system, 2),
                   "pid": os.getpid(), "python": sys.version}, f)
    os.replace(tmp, stamp)


def main(argv=None) -> int:
    """Compile (or load) every kernel, write the ready stamp; ``--background``: started by
    ``background.Background.start`` (quiet; removes the lock when done)."""
    argv = sys.argv[1:] if argv is None else argv
    background = "--background" in argv
    jit.use("compiled", note=not background)
    try:
        s = warm()
        if jit.writable_cache_root() is not None:
            write_stamp(s)
    finally:
        if background:
            lock = lock_for(jit.ready_stamp(jit.kernel_cache_root()))
            try:
                with open(lock) as f:
                    mine = f.read().strip() in ("", str(os.getpid()))
            except OSError:
                mine = False
            if mine:
                remove(lock)
    if not background:
        print(f"gramopt: runtime kernels ready ({s:.1f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
