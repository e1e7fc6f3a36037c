"""The binarised normal form the matrix recognizer reads: an ε-free CNF over bytes.

Built from the canonical BNF lowering (``gramopt.grammar.bnf.lower``), step by step:

    BNF (symbols: Ref, one-code-point CharClass)
      1. bytes        a CharClass becomes its UTF-8 byte-range sequences (utf8.class_sequences):
                      one range → the preterminal [lo-hi]; several → a helper C with
                      C → [..][..] per sequence.  Every terminal is a preterminal
                      nonterminal P with P ⇒ b for the bytes b of its range.
      2. binarise     A → X1 X2 … Xk (k > 2)  ⇒  A → X1 @(X2…Xk), @(X2…Xk) → X2 @(X3…Xk), …,
                      @(Xk-1 Xk) → Xk-1 Xk: one helper per distinct tail, shared by every rule
                      that ends in it (it derives exactly that concatenation), so a word
                      spelled in many rules is one chain
      3. ε            nullable(A) as a least fixpoint; A → B C gives A → C when B ⇒* ε and
                      A → B when C ⇒* ε; ε-productions are dropped.  The result derives
                      L(A) \\ {ε} from every A (the classical argument: in a derivation of a
                      non-empty string every maximal ε-subtree hangs under a binary node,
                      whose other child is non-empty, so the matching unit rule replaces it).
      4. trim         unproductive nonterminals (no non-empty string) and unreachable ones go,
                      with every rule that mentions them.
      6. bigrams      ``follows[b, c]``: some A → B C has b ∈ LAST(B) and c ∈ FIRST(C), an
                      over-approximation of the adjacent byte pairs of every string any
                      nonterminal derives; the trie walk treats a node none of whose children
                      can follow it as a leaf (its column need only show it viable).
      7. follow       ``follow[X]``: the bytes that may come right after a complete X in
                      some sentential form (A → B C puts FIRST(C) after B, and after every
                      right corner of B: follow flows from A to its right child and unit
                      children), a 256-bit row. The mask cache (classes.py) uses it to
                      bound which tokens can finish an X and go on.
      5. relations    unit closure U* (A ⇒* C by unit rules: ``up[C]`` lists every such A),
                      left corners (A → X β, binary and unit rules alike) whose closure LC*
                      the kernel walks from the seeds of each Pred set (no N×N matrix).

Prefix semantics are kept exactly: a non-empty prefix w is viable iff w ∈ L or some X with
S ⇒* w X γ exists (X non-empty by step 4) — the test of ``table.py``; ε itself is viable iff
L is non-empty, and accepted iff ``start_nullable``.

Rules are arrays (int32): binary rules ``lhs[r] → b[r] c[r]`` listed twice, grouped by their
right child (``r2_start``) and by their left child (``r1_start``), both CSR.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...grammar import CharClass, Grammar, Ref
from ...grammar.bnf import lower
from ...grammar.dialects import token_atoms
from ...grammar.utf8 import class_sequences
from ..compile import RuntimeGrammarError
from ..jit import kernel


@dataclass
class CNF:
    """An ε-free binary grammar over preterminals (see the module docstring)."""

    names: list[str]
    start: int  # -1 when L(G) \\ {ε} is empty
    start_nullable: bool
    byte_start: np.ndarray  # byte b → preterminals byte_pre[byte_start[b]:byte_start[b+1]]
    byte_pre: np.ndarray
    r2_start: np.ndarray  # binary rules by right child c: lhs r2_lhs, left child r2_b
    r2_lhs: np.ndarray
    r2_b: np.ndarray
    r1_start: np.ndarray  # binary rules by left child b: lhs r1_lhs, right child r1_c
    r1_lhs: np.ndarray
    r1_c: np.ndarray
    up_start: np.ndarray  # U*: up[up_start[c]:up_start[c+1]] = {A : A ⇒* c by units}, c first
    up: np.ndarray
    lc_start: np.ndarray  # left corners: A → X … (binary or unit) ⇔ X ∈ lc[lc_start[A]:…]
    lc: np.ndarray
    follows: np.ndarray  # bool[256, 256]: byte c may follow byte b inside a sentence
    follow: np.ndarray  # uint64[N, 4]: bit c of X's 256-bit row: byte c may come right after an X
    stats: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.names)

    @property
    def words(self) -> int:
        """uint64 words of an N-bit row."""
        return max(1, (self.n + 63) // 64)

    def arrays(self) -> tuple:
        """The tuple the kernels take, in their order."""
        return (self.byte_start, self.byte_pre, self.r2_start, self.r2_lhs, self.r2_b,
                self.r1_start, self.r1_lhs, self.r1_c, self.up_start, self.up, self.lc_start, self.lc,
                self.follow)


def _closure(seed, units, binary) -> set:
    """The least set holding ``seed`` and every A with a unit rule A → B, B in the set, or a
    binary rule A → B C, B and C in the set (nullable and productive symbols alike)."""
    out = set(seed)
    changed = True
    while changed:
        changed = False
        for a, b in units:
            if b in out and a not in out:
                out.add(a)
                changed = True
        for a, b, c in binary:
            if b in out and c in out and a not in out:
                out.add(a)
                changed = True
    return out


def build_cnf(grammar: Grammar) -> CNF:
    """The CNF of a byte-level grammar (GBNF / xgrammar EBNF). Lark lexer atoms raise
    ``RuntimeGrammarError`` (their language is over terminals, not bytes)."""
    if token_atoms(grammar.dialect):
        raise RuntimeGrammarError("the matrix runtime reads byte-level grammars (GBNF/EBNF), "
                                  "not Lark terminals")
    bnf = lower(grammar)
    if grammar.start not in bnf.nonterminals:
        raise RuntimeGrammarError(f"missing start rule '{grammar.start}'")
    rules: list[tuple[str, tuple[str, ...]]] = []  # over names; preterminals "[lo-hi]"
    pre_range: dict[str, tuple[int, int]] = {}
    class_name: dict[CharClass, str] = {}

    def pre(lo: int, hi: int) -> str:
        nm = f"[{lo:02x}-{hi:02x}]"
        pre_range[nm] = (lo, hi)
        return nm

    def terminal(c: CharClass) -> str:
        nm = class_name.get(c)
        if nm is None:
            seqs = class_sequences(c.code_points())
            if len(seqs) == 1 and len(seqs[0]) == 1:
                nm = pre(*seqs[0][0])
            else:
                nm = f"$class{len(class_name)}"
                for sq in seqs:  # no sequence: an empty class, derives nothing
                    rules.append((nm, tuple(pre(lo, hi) for lo, hi in sq)))
            class_name[c] = nm
        return nm

    for p in bnf.productions:
        rhs = []
        for s in p.rhs:
            if isinstance(s, Ref):
                if s.name not in bnf.origin:
                    raise RuntimeGrammarError(f"undefined rule '{s.name}' referenced in '{p.lhs}'")
                rhs.append(s.name)
            elif isinstance(s, CharClass):
                rhs.append(terminal(s))
            else:
                raise RuntimeGrammarError(f"the matrix runtime cannot compile {type(s).__name__} atoms")
        rules.append((p.lhs, tuple(rhs)))

    # 2. binarise
    binary: list[tuple[str, str, str]] = []
    unit: list[tuple[str, str]] = []
    empty: set[str] = set()
    suffix: dict[tuple[str, str], str] = {}  # one helper per distinct tail, shared by all rules

    def tail(xs: tuple[str, ...]) -> str:
        """The helper deriving exactly xs (xs itself when one symbol), built from the end;
        keyed by (first symbol, helper of the rest), so equal tails share every helper."""
        nm = xs[-1]
        for x in reversed(xs[:-1]):
            key = (x, nm)
            h = suffix.get(key)
            if h is None:
                h = suffix[key] = f"@{len(suffix)}"
                binary.append((h, x, nm))
            nm = h
        return nm

    for lhs, rhs in rules:
        if not rhs:
            empty.add(lhs)
        elif len(rhs) == 1:
            unit.append((lhs, rhs[0]))
        else:
            binary.append((lhs, rhs[0], tail(rhs[1:])))

    # 3. ε: nullable fixpoint, then unit rules standing in for nullable children
    nullable = _closure(empty, unit, binary)
    units = set(unit)
    for a, b, c in binary:
        if b in nullable:
            units.add((a, c))
        if c in nullable:
            units.add((a, b))
    units = {(a, b) for a, b in units if a != b}

    # 4. trim: productive (non-empty strings) then reachable from the start
    productive = _closure(pre_range, units, binary)
    binary = [r for r in dict.fromkeys(binary) if all(x in productive for x in r)]
    units = sorted(u for u in units if all(x in productive for x in u))
    start = grammar.start
    reach = [start] if start in productive else []
    seen = set(reach)
    out_edges: dict[str, list[str]] = {}
    for a, b, c in binary:
        out_edges.setdefault(a, []).extend((b, c))
    for a, b in units:
        out_edges.setdefault(a, []).append(b)
    i = 0
    while i < len(reach):
        for x in out_edges.get(reach[i], ()):
            if x not in seen:
                seen.add(x)
                reach.append(x)
        i += 1
    names = reach  # breadth-first from the start: deterministic
    idx = {n: k for k, n in enumerate(names)}
    binary = [r for r in binary if r[0] in idx]
    units = [u for u in units if u[0] in idx]
    n = len(names)

    # byte → preterminals
    per_byte: list[list[int]] = [[] for _ in range(256)]
    for nm, (lo, hi) in pre_range.items():
        if nm in idx:
            for b in range(lo, hi + 1):
                per_byte[b].append(idx[nm])
    byte_start, byte_pre = _csr(per_byte)

    bl = np.array([idx[a] for a, _, _ in binary], np.int32)
    bb = np.array([idx[b] for _, b, _ in binary], np.int32)
    bc = np.array([idx[c] for _, _, c in binary], np.int32)
    by_c: list[list[int]] = [[] for _ in range(n)]
    by_b: list[list[int]] = [[] for _ in range(n)]
    for r in range(len(binary)):
        by_c[bc[r]].append(r)
        by_b[bb[r]].append(r)
    r2_start, r2 = _csr(by_c)
    r1_start, r1 = _csr(by_b)

    # 5. relations: U* (by reversed unit edges) and LC* (left corners)
    rev_unit: list[list[int]] = [[] for _ in range(n)]
    lc_edges: list[list[int]] = [[] for _ in range(n)]
    for a, b in units:
        rev_unit[idx[b]].append(idx[a])
        lc_edges[idx[a]].append(idx[b])
    for r in range(len(binary)):
        lc_edges[bl[r]].append(int(bb[r]))
    ru_start, ru = _csr(rev_unit)
    lc_start, lc = _csr([sorted(set(e)) for e in lc_edges])
    up_start, up = _closure_lists(ru_start, ru, n)

    stats = {"nonterminals": n, "binary_rules": len(binary), "unit_rules": len(units),
             "preterminals": sum(1 for nm in pre_range if nm in idx)}
    return CNF(names, idx[start] if start in idx else -1, grammar.start in nullable,
               byte_start, byte_pre, r2_start, bl[r2], bb[r2], r1_start, bl[r1], bc[r1],
               up_start, up, lc_start, lc, *_follows(names, idx, binary, units, pre_range), stats)


def _csr(lists: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    start = np.zeros(len(lists) + 1, np.int32)
    start[1:] = np.cumsum([len(x) for x in lists])
    flat = np.array([v for x in lists for v in x], np.int32)
    return start, flat


@kernel(nogil=False, nrt=True)
def _closure_lists(start, edges, n):
    """Per node c, every node reachable from c along ``edges`` (c itself first), as CSR."""
    mark = np.full(n, -1, np.int32)
    stack = np.empty(n, np.int32)
    out_start = np.zeros(n + 1, np.int32)
    cap = 4 * n + 16
    out = np.empty(cap, np.int32)
    m = 0
    for c in range(n):
        sp = 0
        stack[sp] = c
        sp += 1
        mark[c] = c
        while sp > 0:
            sp -= 1
            x = stack[sp]
            if m == cap:
                cap *= 2
                bigger = np.empty(cap, np.int32)
                bigger[:m] = out[:m]
                out = bigger
            out[m] = x
            m += 1
            for j in range(start[x], start[x + 1]):
                y = edges[j]
                if mark[y] != c:
                    mark[y] = c
                    stack[sp] = y
                    sp += 1
        out_start[c + 1] = m
    return out_start, out[:m].copy()


def _follows(names, idx, binary, units, pre_range) -> tuple[np.ndarray, np.ndarray]:
    """FIRST/LAST byte sets as least fixpoints, then the pairs every binary rule joins
    (``follows``) and the bytes after each nonterminal (``follow``, a least fixpoint:
    A → B C gives FIRST(C) ⊆ follow(B) and follow(A) ⊆ follow(C); A → B gives
    follow(A) ⊆ follow(B))."""
    n = len(names)
    first = np.zeros((n, 256), np.bool_)
    for nm, (lo, hi) in pre_range.items():
        if nm in idx:
            first[idx[nm], lo:hi + 1] = True
    last = first.copy()
    bl = [(idx[a], idx[b], idx[c]) for a, b, c in binary]
    ul = [(idx[a], idx[b]) for a, b in units]
    changed = True
    while changed:
        changed = False
        for a, b, c in bl:
            if (first[b] & ~first[a]).any():
                first[a] |= first[b]
                changed = True
            if (last[c] & ~last[a]).any():
                last[a] |= last[c]
                changed = True
        for a, b in ul:
            if (first[b] & ~first[a]).any() or (last[b] & ~last[a]).any():
                first[a] |= first[b]
                last[a] |= last[b]
                changed = True
    follows = np.zeros((256, 256), np.bool_)
    follow = np.zeros((n, 256), np.bool_)
    down: list[list[int]] = [[] for _ in range(n)]  # A → its right and unit children
    for a, b, c in bl:
        follows[np.ix_(last[b], first[c])] = True
        follow[b] |= first[c]
        down[a].append(c)
    for a, b in ul:
        down[a].append(b)
    d_start, d = _csr(down)
    _flow_down(follow, d_start, d)
    return follows, np.ascontiguousarray(np.packbits(follow, axis=1, bitorder="little").view(np.uint64))


@kernel(nogil=False, nrt=True)
def _flow_down(follow, d_start, d):
    """follow(A) ⊆ follow(C) along every edge A → C, to the least fixpoint (a worklist)."""
    n = follow.shape[0]
    queued = np.ones(n, np.bool_)  # each node is on the stack at most once
    stack = np.empty(n, np.int32)
    for i in range(n):
        stack[i] = n - 1 - i
    sp = n
    while sp > 0:
        sp -= 1
        a = stack[sp]
        queued[a] = False
        for j in range(d_start[a], d_start[a + 1]):
            c = d[j]
            grew = False
            for x in range(256):
                if follow[a, x] and not follow[c, x]:
                    follow[c, x] = True
                    grew = True
            if grew and not queued[c]:
                queued[c] = True
                stack[sp] = c
                sp += 1
