"""Compile (or load) the runtime's kernels ahead of first use: ``python -m gramopt.runtime.warm``.

A decoding step's kernels are compiled on first use and kept in the kernel cache
(jit.py: ``$GRAMOPT_CACHE/numba``); this runs a small grammar over a small vocabulary
through every step a server takes (matcher, masks, accepts, rollback, fork, jump-forward,
the batch kernel, the plain walk), so an image build or a CI setup step can pay the
compile once. Kernels are compiled per argument type, not per grammar or vocabulary
(jit.py gives each kernel one specialization), so what this compiles is what a Qwen-sized
vocabulary and any grammar use. The runtime does not need it: without it the first
mask compiles what it needs.
"""

from __future__ import annotations

import sys
import time

from ..grammar import CharClass, Grammar, Literal, Ref, Repeat, Rule, alt, seq


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
    return time.perf_counter() - t


def main() -> int:
    s = warm()
    print(f"gramopt: runtime kernels ready ({s:.1f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
