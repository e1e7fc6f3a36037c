"""Code-point ranges as UTF-8 byte automata.

A code-point range [lo, hi] is split into sequences of byte ranges such that the set of
byte strings matched by the sequences is exactly the set of UTF-8 encodings of the code
points in [lo, hi] (the standard construction used by RE2, Rust's regex-syntax and
xgrammar). Surrogates U+D800–U+DFFF have no UTF-8 encoding and are left out.

Example: [U+0000, U+07FF] → [00-7F] | [C2-DF][80-BF].
"""

from __future__ import annotations

from functools import lru_cache

ByteRange = tuple[int, int]
ByteSeq = tuple[ByteRange, ...]

_MAX_BY_LEN = (0x7F, 0x7FF, 0xFFFF, 0x10FFFF)


def encode(cp: int) -> bytes:
    return chr(cp).encode("utf-8", "surrogatepass")


@lru_cache(maxsize=4096)
def utf8_sequences(lo: int, hi: int) -> tuple[ByteSeq, ...]:
    """Byte-range sequences matching exactly the UTF-8 encodings of code points lo..hi."""
    out: list[ByteSeq] = []
    _split(lo, hi, out)
    return tuple(out)


def _split(lo: int, hi: int, out: list[ByteSeq]) -> None:
    if lo > hi:
        return
    # Cut out the surrogates.
    if lo <= 0xDFFF and hi >= 0xD800:
        _split(lo, 0xD7FF, out)
        _split(0xE000, hi, out)
        return
    # Split at encoded-length boundaries.
    for mx in _MAX_BY_LEN[:-1]:
        if lo <= mx < hi:
            _split(lo, mx, out)
            _split(mx + 1, hi, out)
            return
    if hi <= 0x7F:
        out.append(((lo, hi),))
        return
    # Split so that each piece shares all leading bytes but a contiguous last-byte range.
    n = len(encode(lo))
    for i in range(1, n):
        m = (1 << (6 * i)) - 1  # low 6*i bits
        if lo & ~m != hi & ~m:
            if lo & m != 0:
                _split(lo, lo | m, out)
                _split((lo | m) + 1, hi, out)
                return
            if hi & m != m:
                _split(lo, (hi & ~m) - 1, out)
                _split(hi & ~m, hi, out)
                return
    a, b = encode(lo), encode(hi)
    out.append(tuple((a[i], b[i]) for i in range(n)))


def class_sequences(ranges: tuple[tuple[int, int], ...]) -> tuple[ByteSeq, ...]:
    """Byte-range sequences for a set of code-point ranges."""
    return tuple(s for lo, hi in ranges for s in utf8_sequences(lo, hi))
