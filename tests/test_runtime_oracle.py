"""A deliberately plain oracle for the runtime tests, independent of runtime/compile.py.

Earley over the canonical BNF (``gramopt.grammar.lower``) on code points, with a
fixpoint per set (no Aycock–Horspool, no Leo, no automata). A byte string is viable when
its complete code points are a viable prefix and its trailing partial UTF-8 sequence
begins the encoding of a code point some scan item accepts. Also: the colleague's
``gramopt.verify.reference.Recognizer`` when it exists.
"""

from __future__ import annotations

import importlib

from gramopt.grammar import CharClass, lower
from gramopt.grammar.expr import Ref


class BnfOracle:
    def __init__(self, grammar):
        bnf = lower(grammar)
        prods = [(p.lhs, p.rhs) for p in bnf.productions]
        for _, rhs in prods:
            for s in rhs:
                if not isinstance(s, (Ref, CharClass)):
                    raise TypeError("oracle: GBNF/EBNF grammars only")
        # keep productive nonterminals / productions only
        prod_nt: set[str] = set()
        changed = True
        while changed:
            changed = False
            for lhs, rhs in prods:
                if lhs not in prod_nt and all(
                        (isinstance(s, CharClass) and s.code_points()) or
                        (isinstance(s, Ref) and s.name in prod_nt) for s in rhs):
                    prod_nt.add(lhs)
                    changed = True
        self.prods = [(l, r) for l, r in prods
                      if l in prod_nt and all(isinstance(s, CharClass) or s.name in prod_nt for s in r)]
        self.by_lhs: dict[str, list[int]] = {}
        for i, (l, _) in enumerate(self.prods):
            self.by_lhs.setdefault(l, []).append(i)
        self.start = bnf.start
        self.empty = bnf.start not in prod_nt

    def _closure(self, items: set, j: int, sets: list) -> set:
        items = set(items)
        changed = True
        while changed:
            changed = False
            for (pi, dot, o) in list(items):
                lhs, rhs = self.prods[pi]
                if dot < len(rhs) and isinstance(rhs[dot], Ref):
                    for qi in self.by_lhs.get(rhs[dot].name, []):
                        it = (qi, 0, j)
                        if it not in items:
                            items.add(it)
                            changed = True
                elif dot == len(rhs):
                    src = items if o == j else sets[o]
                    for (qi, d2, o2) in list(src):
                        r2 = self.prods[qi][1]
                        if d2 < len(r2) and isinstance(r2[d2], Ref) and r2[d2].name == lhs:
                            it = (qi, d2 + 1, o2)
                            if it not in items:
                                items.add(it)
                                changed = True
        return items

    def _run(self, cps: list[int]):
        if self.empty:
            return None
        sets = [self._closure({(i, 0, 0) for i in self.by_lhs.get(self.start, [])}, 0, [])]
        for j, c in enumerate(cps):
            nxt = set()
            for (pi, dot, o) in sets[-1]:
                rhs = self.prods[pi][1]
                if dot < len(rhs) and isinstance(rhs[dot], CharClass) and _in(rhs[dot], c):
                    nxt.add((pi, dot + 1, o))
            if not nxt:
                return None
            sets.append(self._closure(nxt, j + 1, sets))
        return sets

    def accepts(self, data: bytes) -> bool:
        try:
            cps = [ord(ch) for ch in data.decode("utf-8")]
        except UnicodeDecodeError:
            return False
        sets = self._run(cps)
        return sets is not None and any(
            self.prods[pi][0] == self.start and dot == len(self.prods[pi][1]) and o == 0
            for (pi, dot, o) in sets[-1])

    def is_viable_prefix(self, data: bytes) -> bool:
        head, tail = _split_utf8(data)
        if head is None:
            return False
        sets = self._run(head)
        if sets is None:
            return False
        if not tail:
            return True
        for (pi, dot, o) in sets[-1]:
            rhs = self.prods[pi][1]
            if dot < len(rhs) and isinstance(rhs[dot], CharClass):
                for lo, hi in rhs[dot].code_points():
                    if _range_has_prefix(lo, hi, tail):
                        return True
        return False


def _in(cc: CharClass, c: int) -> bool:
    return any(lo <= c <= hi for lo, hi in cc.code_points())


def _split_utf8(data: bytes):
    """(code points of the longest valid complete prefix, the trailing partial sequence),
    or (None, b"") when the bytes are not a prefix of valid UTF-8."""
    for cut in range(len(data), max(len(data) - 4, -1), -1):
        try:
            s = data[:cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
        tail = data[cut:]
        if tail and not _is_partial(tail):
            return None, b""
        return [ord(c) for c in s], tail
    return None, b""


def _lead_len(b: int) -> int:
    return 2 if 0xC2 <= b <= 0xDF else 3 if 0xE0 <= b <= 0xEF else 4 if 0xF0 <= b <= 0xF4 else 0


def _completion_bounds(tail: bytes):
    """(smallest, largest) code point whose UTF-8 encoding starts with ``tail`` (a proper
    prefix of a sequence), or None. UTF-8 preserves order, so these bound a contiguous set."""
    ln = _lead_len(tail[0])
    if ln == 0 or len(tail) >= ln or any(not 0x80 <= x <= 0xBF for x in tail[1:]):
        return None

    def first(seconds, fill):
        for x in seconds:
            t = tail + bytes([x]) if len(tail) == 1 else tail
            try:
                return ord((t + bytes([fill] * (ln - len(t)))).decode("utf-8"))
            except UnicodeDecodeError:
                continue
        return None

    a = first(range(0x80, 0xC0), 0x80)
    b = first(range(0xBF, 0x7F, -1), 0xBF)
    return None if a is None or b is None else (a, b)


def _is_partial(tail: bytes) -> bool:
    return _completion_bounds(tail) is not None


def _range_has_prefix(lo: int, hi: int, tail: bytes) -> bool:
    bounds = _completion_bounds(tail)
    if bounds is None:
        return False
    a, b = bounds
    return max(a, lo) <= min(b, hi)


def reference_recognizer(grammar):
    """The colleague's reference recognizer, or None while it has not landed."""
    try:
        mod = importlib.import_module("gramopt.verify.reference")
    except ImportError:
        return None
    return mod.Recognizer(grammar)


def test_oracle_smoke():
    from gramopt.grammar import Grammar, Literal, Rule, Repeat, seq, alt
    g = Grammar((Rule("root", seq(Literal("a"), Repeat(alt(Literal("b"), Literal("é")), 0, None))),), "root")
    o = BnfOracle(g)
    assert o.accepts(b"abb") and o.accepts("aé".encode()) and not o.accepts(b"b")
    assert o.is_viable_prefix(b"a\xc3") and not o.is_viable_prefix(b"a\xc4")
    assert not o.is_viable_prefix(b"a\xc3a")
