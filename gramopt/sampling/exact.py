"""``Exact``: Φ by dynamic programming over the trie of viable token prefixes.

For a finite language, or any grammar under a token budget, the viable prefixes form a finite
tree: node x has a child x·y for every non-stop token y the mask allows after x (while the
remaining budget is positive), and is *accepting* when the mask allows a stop token (x ∈ L).
With the model's next-token probabilities p(· | x) at every node, bottom-up:

    Φ(x) = [x accepting] · p(EOS | x)  +  Σ_children p(y | x) · Φ(x·y)

is the probability that the unconstrained model continues x into a string of L within the
budget, so sampling with Φ (estimator.py) is exact: its output is μ*(s) = p(s·EOS) / Φ(ε),
summed over tokenizations of s. A transformer's p(· | x) depends on the whole prefix, so the
table is indexed by the prefix (the trie node: a grammar state and the remaining length), not by
the grammar state alone.

Building walks the tree once through the matcher (accept, fill, roll back: any backend with the
Matcher API) and runs the model once per node, batched level by level. ``max_nodes`` bounds the
work: a larger tree raises ``ExactTooLarge`` (use OneStep or MonteCarlo there).
"""

from __future__ import annotations

import numpy as np
import torch

from .estimator import Step, allowed_tokens


class ExactTooLarge(ValueError):
    """The viable-prefix tree exceeds the node budget."""


class ValueTree:
    """The viable-prefix tree of a grammar under a budget, with p(· | node) and Φ(node).

    Arrays per node (root 0, parents before children): ``parent``, ``token`` (edge into it),
    ``depth``, ``accepting``; children in CSR form ``child_start[i]:child_start[i+1]`` into
    ``child_node``; ``eos_p`` = p(stop | node) summed over stop tokens, ``child_p`` = p(y | node)
    per child edge, ``phi``; ``probs`` (nodes × V) when V ≤ ``keep_probs``. ``index`` maps a
    token prefix to its node.
    """

    def __init__(self, model, matcher, *, bos: int, eos_ids, max_tokens: int, max_nodes: int = 2_000_000,
                 temperature: float = 1.0, batch: int = 2048, keep_probs: int = 256):
        self.eos_ids = tuple(int(e) for e in eos_ids)
        self.max_tokens = int(max_tokens)
        self.temperature = float(temperature)
        self._walk(matcher, max_nodes, model.vocab_size)
        self._probabilities(model, bos, batch, keep_probs)
        self._values()

    # ------------------------------------------------------------ tree
    def _walk(self, matcher, max_nodes: int, n_vocab: int) -> None:
        """Depth-first through the matcher; it ends where it started."""
        parent, token, depth, accepting, kids = [-1], [-1], [0], [False], [[]]
        index = {(): 0}
        buf = np.zeros((n_vocab + 31) // 32, np.int32)
        eos = set(self.eos_ids)
        stack = [(0, ())]  # (node, prefix) whose children are not expanded yet
        cur: tuple[int, ...] = ()  # the matcher's prefix
        try:
            while stack:
                node, prefix = stack.pop()
                common = 0  # roll back to the common prefix, accept the rest
                while common < min(len(cur), len(prefix)) and cur[common] == prefix[common]:
                    common += 1
                if len(cur) > common:
                    matcher.rollback(len(cur) - common)
                cur = cur[:common]
                for t in prefix[common:]:
                    if not matcher.accept_token(t):
                        raise RuntimeError(f"the matcher refused token {t} on a path its masks allowed")
                    cur = cur + (t,)
                allowed = allowed_tokens(matcher, n_vocab, buf)
                accepting[node] = any(int(t) in eos for t in allowed)
                if depth[node] >= self.max_tokens:
                    continue
                for t in allowed[::-1].tolist():
                    if t in eos:
                        continue
                    child = len(parent)
                    if child >= max_nodes:
                        raise ExactTooLarge(f"more than {max_nodes} viable prefixes within {self.max_tokens} "
                                            "tokens: exact Φ enumerates them all (use onestep or mc, or a "
                                            "smaller budget)")
                    parent.append(node)
                    token.append(t)
                    depth.append(depth[node] + 1)
                    accepting.append(False)
                    kids.append([])
                    kids[node].append(child)
                    key = prefix + (t,)
                    index[key] = child
                    stack.append((child, key))
        finally:
            if cur:
                matcher.rollback(len(cur))
        self.parent = np.array(parent, np.int64)
        self.token = np.array(token, np.int64)
        self.depth = np.array(depth, np.int64)
        self.accepting = np.array(accepting, bool)
        sizes = np.array([len(k) for k in kids], np.int64)
        self.child_start = np.zeros(len(parent) + 1, np.int64)
        self.child_start[1:] = np.cumsum(sizes)
        self.child_node = np.array([c for k in kids for c in sorted(k, key=lambda c: token[c])], np.int64)
        self.index = index

    @property
    def n_nodes(self) -> int:
        return len(self.parent)

    def path(self, node: int) -> tuple[int, ...]:
        out = []
        while node > 0:
            out.append(int(self.token[node]))
            node = int(self.parent[node])
        return tuple(reversed(out))

    # ------------------------------------------------------------ model
    def _probabilities(self, model, bos: int, batch: int, keep_probs: int) -> None:
        n = self.n_nodes
        V = model.vocab_size
        self.eos_p = np.zeros(n)
        self.child_p = np.zeros(len(self.child_node))
        self.probs = np.zeros((n, V)) if V <= keep_probs else None
        # token paths level by level: paths[d] is (nodes at depth d) × (d + 1), BOS first
        order = np.argsort(self.depth, kind="stable")
        bounds = np.searchsorted(self.depth[order], np.arange(self.depth.max() + 2))
        row_of = np.zeros(n, np.int64)
        prev = np.full((1, 1), bos, np.int64)
        eos = list(self.eos_ids)
        device = model.device
        for d in range(len(bounds) - 1):
            nodes = order[bounds[d]:bounds[d + 1]]
            if d == 0:
                paths = prev
            else:
                paths = np.concatenate([prev[row_of[self.parent[nodes]]], self.token[nodes][:, None]], axis=1)
            row_of[nodes] = np.arange(len(nodes))
            for lo in range(0, len(nodes), batch):
                ids = torch.as_tensor(paths[lo:lo + batch], device=device)
                with torch.no_grad():
                    logits = model(ids, model.new_cache(ids.shape[0])).double() / self.temperature
                p = torch.softmax(logits, dim=-1).cpu().numpy()
                sel = nodes[lo:lo + batch]
                self.eos_p[sel] = p[:, eos].sum(axis=1)
                if self.probs is not None:
                    self.probs[sel] = p
                for j, i in enumerate(sel):
                    a, b = self.child_start[i], self.child_start[i + 1]
                    if b > a:
                        self.child_p[a:b] = p[j, self.token[self.child_node[a:b]]]
            prev = paths

    def _values(self) -> None:
        """Φ bottom-up, deepest level first (module docstring)."""
        phi = np.where(self.accepting, self.eos_p, 0.0)
        edge_parent = np.repeat(np.arange(self.n_nodes), np.diff(self.child_start))
        for d in range(int(self.depth.max()), 0, -1):
            sel = self.depth[self.child_node] == d
            np.add.at(phi, edge_parent[sel], self.child_p[sel] * phi[self.child_node[sel]])
        self.phi = phi
        self.edge_parent = edge_parent

    # ------------------------------------------------------------ queries
    def node(self, prefix) -> int | None:
        return self.index.get(tuple(int(t) for t in prefix))

    def target(self, vocab) -> dict[bytes, float]:
        """μ* over strings: p(s·EOS) / Φ(ε), summed over the tokenizations of each s."""
        reach = np.zeros(self.n_nodes)
        reach[0] = 1.0
        for d in range(1, int(self.depth.max()) + 1):
            sel = self.depth[self.child_node] == d
            reach[self.child_node[sel]] = reach[self.edge_parent[sel]] * self.child_p[sel]
        out: dict[bytes, float] = {}
        z = self.phi[0]
        if not z > 0:
            raise ValueError("the model gives the language probability 0")
        for i in np.flatnonzero(self.accepting):
            text = b"".join(vocab.token_bytes[t] for t in self.path(int(i)))
            out[text] = out.get(text, 0.0) + reach[i] * self.eos_p[i] / z
        return out


class Exact:
    """Φ from a ``ValueTree`` (built with the same model and temperature as the decoding)."""

    name = "exact"

    def __init__(self, tree: ValueTree):
        self.tree = tree

    def phi(self, step: Step) -> np.ndarray:
        t = self.tree
        node = t.node(step.prefix)
        out = np.zeros(len(step.candidates))
        if node is None:
            return out
        a, b = t.child_start[node], t.child_start[node + 1]
        kids = t.child_node[a:b]
        by_token = dict(zip(t.token[kids].tolist(), t.phi[kids].tolist()))
        for i, y in enumerate(step.candidates.tolist()):
            if y in t.eos_ids:
                out[i] = 1.0 if t.accepting[node] else 0.0
            else:
                out[i] = by_token.get(y, 0.0)
        return out
