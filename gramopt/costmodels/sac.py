"""Exact SAC: growth of the shared packed parse forest (SPPF) per input symbol.

An online Earley parser over the canonical BNF (``gramopt.grammar.lower``; input symbols
are code points) builds Scott's binarised SPPF ("SPPF-style parsing from Earley
recognisers", 2008) as it goes. When symbol t arrives (t = 1..n), every node it creates has
right extent t, so the step's growth is the set of nodes with right extent t:

  * symbol nodes     (A, i, t)        — a nonterminal A derived the span [i, t)
  * terminal nodes   (a, t-1, t)
  * intermediate     (A → α·β, i, t)  — |α| ≥ 2 and β non-empty (binarisation)
  * packed nodes     one derivation of a symbol/intermediate node, keyed by its pivot k:
      - *split*: two children (left [i, k), right [k, t)): e.g. S[i,t] ⇒ S[i,k] S[k,t];
      - *other*: one child (unit or single-terminal production, A → a) or none (A → ε).

SAC(t) (``sac_trace``) is the number of new split packed nodes at step t — the paper's
count ("Attention Meets Reachability", Def. 13/14). Exact figures (tests/test_sac.py):

  G4 = {S0 → S | ε, S → S S | a | b}: t(t−1)/2 splits at step t (pairs i < k < t),
      plus 2 other packed (S → a, S0 → S), t symbol nodes S[i,t] and S0[0,t] — any strategy.
  G3 = {S → a S | b S | ε}: strategy "earley" completes S[i,t] for every i: t splits
      + 1 other (S[t,t] ⇒ ε) per step; strategy "leo" (gramopt's runtime) keeps only the
      topmost item of the deterministic reduction chain: 2 splits (S[t-1,t] from the
      ε-completion in the same set, then the chain's top S[0,t]) + 1 other per step
      (1 split at t = 1, where the two coincide) — constant, as in the runtime kernel.
  S → S a | S b | ε (left recursive): 1 split (S[0,t] ⇒ S[0,t-1] a) per step, either way.

Leo's optimization (Leo 1991): when the completed nonterminal B (origin k < t) has exactly
one item waiting on it in set k and B is that item's last symbol, the chain of such
completions is deterministic; the memoised topmost item is added directly, with one packed
node (counted as a split: it stands for the chain's binary derivation) and no intermediate
completed items. Nullable symbols: Aycock–Horspool style, completions at the same position
are remembered (``H``) so later predictions advance over them.

The analysis is pure Python and does O(items) work per symbol.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..grammar import Grammar, lower
from ..grammar.expr import CharClass, Ref


@dataclass(frozen=True)
class SacStep:
    """New SPPF nodes created when one input symbol arrives (right extent = its position)."""

    split_packed: int
    other_packed: int
    symbol_nodes: int
    terminal_nodes: int
    intermediate_nodes: int
    items: int

    @property
    def packed(self) -> int:
        return self.split_packed + self.other_packed


class _SPPF:
    def __init__(self) -> None:
        self.nodes: set = set()
        self.packed: set = set()
        self.reset_counts()

    def reset_counts(self) -> None:
        self.c = {"split": 0, "other": 0, "sym": 0, "term": 0, "inter": 0}

    def node(self, label) -> tuple:
        if label not in self.nodes:
            self.nodes.add(label)
            self.c[{"s": "sym", "t": "term", "i": "inter"}[label[0]]] += 1
        return label

    def pack(self, parent, key, split: bool) -> None:
        pk = (parent, key)
        if pk not in self.packed:
            self.packed.add(pk)
            self.c["split" if split else "other"] += 1


class _Earley:
    def __init__(self, grammar: Grammar, strategy: str):
        if strategy not in ("leo", "earley"):
            raise ValueError("strategy is 'leo' or 'earley'")
        self.leo = strategy == "leo"
        bnf = lower(grammar)
        self.prods = [(p.lhs, p.rhs) for p in bnf.productions]
        for lhs, rhs in self.prods:
            for s in rhs:
                if not isinstance(s, (Ref, CharClass)):
                    raise ValueError(f"SAC is defined here over code points: rule '{lhs}' uses "
                                     f"{type(s).__name__} (a Lark lexer atom)")
        self.by_lhs: dict[str, list[int]] = {}
        for i, (lhs, _) in enumerate(self.prods):
            self.by_lhs.setdefault(lhs, []).append(i)
        self.start = bnf.start
        self.forest = _SPPF()
        self.sets: list[dict] = []  # item (p, d, i) -> node
        self.waiting: list[dict] = []  # per set: nonterminal -> [items with dot before it]
        self.leo_memo: list[dict] = []
        self.H: dict[str, tuple] = {}

    def _sym(self, p: int, d: int):
        rhs = self.prods[p][1]
        return rhs[d] if d < len(rhs) else None

    # -------------------------------------------------------------- SPPF node of an advance
    def _advance(self, p: int, d: int, i: int, j: int, left, right, k: int):
        """Node of item (p, d+1, i) at j from (p, d, i) [node ``left``] and a child
        ``right`` spanning [k, j]; creates the packed node."""
        lhs, rhs = self.prods[p]
        nd = d + 1
        if nd == 1 and nd < len(rhs):
            return right  # Scott: an item with one symbol before the dot is that symbol's node
        label = ("s", lhs, i, j) if nd == len(rhs) else ("i", p, nd, i, j)
        node = self.forest.node(label)
        self.forest.pack(node, (p, nd, k), split=left is not None)
        return node

    # -------------------------------------------------------------- Earley set j
    def _add(self, j: int, item, node, work: list) -> None:
        st = self.sets[j]
        if item not in st:
            st[item] = node
            work.append(item)
            sym = self._sym(item[0], item[1])
            if isinstance(sym, Ref):
                self.waiting[j].setdefault(sym.name, []).append(item)

    def _leo_top(self, k: int, a: str):
        """Topmost item of the deterministic reduction chain for completing ``a`` with
        origin k, or None when not deterministic there."""
        memo = self.leo_memo[k]
        if a in memo:
            return memo[a]
        memo[a] = None  # guard against cycles through nullable chains
        ws = self.waiting[k].get(a, [])
        top = None
        if len(ws) == 1:
            p, d, i = ws[0]
            if d + 1 == len(self.prods[p][1]):
                top = (p, d + 1, i)
                if i < k:
                    up = self._leo_top(i, self.prods[p][0])
                    if up is not None:
                        top = up
        memo[a] = top
        return top

    def _close(self, j: int, work: list) -> None:
        while work:
            item = work.pop()
            p, d, i = item
            node = self.sets[j][item]
            lhs, rhs = self.prods[p]
            sym = self._sym(p, d)
            if isinstance(sym, Ref):
                for q in self.by_lhs.get(sym.name, []):
                    self._add(j, (q, 0, j), None, work)
                if sym.name in self.H:  # nullable completed here: advance over it
                    nn = self._advance(p, d, i, j, node, self.H[sym.name], j)
                    self._add(j, (p, d + 1, i), nn, work)
            elif sym is None:  # complete
                if not rhs:
                    node = self.forest.node(("s", lhs, j, j))
                    self.forest.pack(node, (p, 0, j), split=False)
                    self.sets[j][item] = node
                if i == j:
                    if lhs not in self.H:
                        self.H[lhs] = node
                    for w in list(self.waiting[j].get(lhs, [])):
                        nn = self._advance(w[0], w[1], w[2], j, self.sets[j][w], node, j)
                        self._add(j, (w[0], w[1] + 1, w[2]), nn, work)
                    continue
                if self.leo:
                    top = self._leo_top(i, lhs)
                    if top is not None:
                        tp, td, ti = top
                        label = self.forest.node(("s", self.prods[tp][0], ti, j))
                        self.forest.pack(label, ("leo", i), split=True)
                        self._add(j, top, label, work)
                        continue
                for w in self.waiting[i].get(lhs, []):
                    nn = self._advance(w[0], w[1], w[2], j, self.sets[i][w], node, i)
                    self._add(j, (w[0], w[1] + 1, w[2]), nn, work)

    def _new_set(self) -> None:
        self.sets.append({})
        self.waiting.append({})
        self.leo_memo.append({})
        self.H = {}

    def start_parse(self) -> None:
        self._new_set()
        work: list = []
        for p in self.by_lhs.get(self.start, []):
            self._add(0, (p, 0, 0), None, work)
        self._close(0, work)

    def step(self, cp: int) -> SacStep:
        j = len(self.sets)
        prev = self.sets[-1]
        self._new_set()
        self.forest.reset_counts()
        term = None
        work: list = []
        for (p, d, i), node in list(prev.items()):
            sym = self._sym(p, d)
            if isinstance(sym, CharClass) and any(lo <= cp <= hi for lo, hi in sym.code_points()):
                if term is None:
                    term = self.forest.node(("t", cp, j - 1, j))
                nn = self._advance(p, d, i, j, node, term, j - 1)
                self._add(j, (p, d + 1, i), nn, work)
        self._close(j, work)
        c = self.forest.c
        return SacStep(c["split"], c["other"], c["sym"], c["term"], c["inter"], len(self.sets[j]))

    def accepts(self) -> bool:
        n = len(self.sets) - 1
        return any(self.prods[p][0] == self.start and d == len(self.prods[p][1]) and i == 0
                   for (p, d, i) in self.sets[n])


def sac_report(grammar: Grammar, text: str | bytes, strategy: str = "leo") -> list[SacStep]:
    """Per input symbol (code point of ``text``), the new SPPF nodes (see module doc).
    Stops early (shorter list) when the text leaves the grammar's prefixes."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    e = _Earley(grammar, strategy)
    e.start_parse()
    out = []
    for ch in text:
        s = e.step(ord(ch))
        if s.items == 0:
            break
        out.append(s)
    return out


def sac_trace(grammar: Grammar, text: str | bytes, strategy: str = "leo") -> list[int]:
    """New split packed nodes per input symbol — SAC(t) for t = 1..len(text)."""
    return [s.split_packed for s in sac_report(grammar, text, strategy)]
