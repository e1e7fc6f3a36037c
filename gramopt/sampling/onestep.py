"""``OneStep``: one-step grammar lookahead from the current logits; no extra forward pass.

    Φ̂(x·y) = Σ_{y' allowed after x·y} p(y' | x)        (Φ̂(x·EOS) = 1)

The next step's distribution p(· | x·y) is not known without a forward pass, so the current
one stands in for it: a candidate after which the tokens the model wants now (often EOS, when
it "means" to stop but the text is not yet in the language) stay allowed gets more weight
than one that leads away from them. The mask after y is the matcher's own (accept y, fill,
roll back). Exact when p(· | x·y) = p(· | x) and the walk ends after two tokens; in general a
cheap partial correction — and a wrong one where the next distribution is nothing like the
current one: choosing between tokenizations of the same text (``{`` vs ``{"``), the current
logits say little about what follows each, and on benchmarks/faithful_bench.py's JSON language
OneStep moves the sampler further from μ* than masking does (TV 0.13 → 0.83), while on bounded
Dyck it helps (0.71 → 0.59).

Cost: one accept, one mask and one rollback per candidate the first time a prefix·candidate
is met; the allowed ids after it are then cached (they depend on the grammar, the vocabulary
and the prefix only, not on the model), so a sampler that meets the same prefixes again —
every sampler of many strings does, near the root — pays a dictionary look-up and a sum.
The cache holds one grammar × vocabulary at a time (a matcher of another one empties it) and
at most ``cache_ids`` ids, least recently used prefixes going first (0: no cache). ``max_candidates``
bounds the walk for large vocabularies: only the most probable candidates look ahead, the
others get the mass the current mask allows (as if the next mask were the current one).
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from .estimator import Step, allowed_tokens


class OneStep:
    name = "onestep"

    def __init__(self, max_candidates: int = 64, cache_ids: int = 1 << 22):
        if max_candidates < 1:
            raise ValueError("max_candidates must be >= 1")
        self.max_candidates = max_candidates
        self.cache_ids = cache_ids
        self._buf: np.ndarray | None = None
        self._next: OrderedDict[tuple, dict[int, np.ndarray]] = OrderedDict()  # prefix → y → ids
        self._owner: tuple | None = None
        self._held = 0

    def phi(self, step: Step) -> np.ndarray:
        cand = step.candidates
        probs = step.probs
        n = len(probs)
        if self._buf is None or self._buf.shape[0] < (n + 31) // 32:
            self._buf = np.zeros((n + 31) // 32, np.int32)
        eos = np.zeros(len(cand), np.bool_)
        for e in step.eos_ids:  # (np.isin costs ~20 µs on arrays this small)
            eos |= cand == e
        out = np.full(len(cand), float(probs[cand].sum()))
        out[eos] = 1.0
        order = np.flatnonzero(~eos)
        if len(order) > self.max_candidates:
            order = order[np.argsort(-probs[cand[order]], kind="stable")[:self.max_candidates]]
        m = step.matcher
        after = self._after(m, tuple(step.prefix))
        for i in order.tolist():
            y = int(cand[i])
            ids = after.get(y) if after is not None else None
            if ids is None:
                if not m.accept_token(y):
                    raise RuntimeError(f"the matcher refused token {y}, which its mask allowed")
                ids = allowed_tokens(m, n, self._buf).astype(np.int32)
                m.rollback(1)
                if after is not None:
                    after[y] = ids
                    self._held += len(ids) + 1
            out[i] = probs[ids].sum()
        while self._held > self.cache_ids and len(self._next) > 1:
            _, old = self._next.popitem(last=False)
            self._held -= sum(len(v) + 1 for v in old.values())
        return out

    def _after(self, m, prefix: tuple) -> dict[int, np.ndarray] | None:
        """The cached ids after prefix·y, by y (None: this matcher's language is unknown)."""
        owner = _language(m) if self.cache_ids > 0 else None
        if owner is None:
            return None
        if self._owner is None or any(a is not b for a, b in zip(owner, self._owner)):
            self._next.clear()
            self._held = 0
            self._owner = owner
        after = self._next.get(prefix)
        if after is None:
            after = self._next[prefix] = {}
        else:
            self._next.move_to_end(prefix)
        return after


def _language(m) -> tuple | None:
    """The objects a matcher's masks depend on besides its prefix — its compiled grammar (the
    Earley token table, or the matrix backend's CNF) and its vocabulary — or None."""
    grammar = getattr(m, "cnf", None)
    if grammar is None:
        grammar = getattr(m, "table", None)
    vocab = getattr(m, "vocab", None)
    return None if grammar is None or vocab is None else (grammar, vocab)
