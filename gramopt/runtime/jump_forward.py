"""Jump-forward (forced) text: the bytes every continuation of the current text starts with.

From the last Earley set, the possible next bytes are the byte edges of its items (every
item is viable, compile.py, so each such byte keeps the chart alive). While exactly one
byte is possible and the text so far is not in the language (else a stop token is the other
choice), that byte is forced: push it and look again. The pushed sets are popped at the
end, so the matcher's state does not change. A serving loop accepts the forced text (after
retokenizing it) without running the model; for a grammar that allows a single string
the jump-forward string is that whole string.
"""

from __future__ import annotations

import numpy as np

from . import earley as K
from .compile import HAS_BYTES
from .jit import kernel


@kernel
def forced_bytes(G, S, acc, out):
    """Write the forced bytes after the last committed set into ``out`` (at most its length);
    return their count, or -1 on overflow (chart restored either way)."""
    byte_next, flags = G[0], G[4]
    items = S[K.I_ITEMS]
    set_start = S[K.I_SET_START]
    meta = S[K.I_META]
    base = meta[K.N_SETS]
    k = 0
    while k < len(out):
        n = meta[K.N_SETS]
        if S[K.I_SET_FLAG][n - 1] != 0:
            break  # accepting: stopping here is the other choice
        only = -1
        many = False
        for i in range(set_start[n - 1], set_start[n]):
            q = items[i] & K.MASK32
            if q >= len(flags) or (flags[q] & HAS_BYTES) == 0:  # virtual states: no bytes
                continue
            row = q * 256
            for b in range(256):
                if byte_next[row + b] >= 0 and b != only:
                    if only >= 0:
                        many = True
                        break
                    only = b
            if many:
                break
        if many or only < 0:
            break
        r = K.push_byte(G, S, only, acc)
        if r < 0:
            meta[K.N_SETS] = base
            return -1
        if r == K.DEAD:
            break
        out[k] = only
        k += 1
    meta[K.N_SETS] = base
    return k
