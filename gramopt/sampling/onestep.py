"""``OneStep``: one-step grammar lookahead from the current logits; no extra forward pass.

    Φ̂(x·y) = Σ_{y' allowed after x·y} p(y' | x)        (Φ̂(x·EOS) = 1)

The next step's distribution p(· | x·y) is not known without a forward pass, so the current
one stands in for it. With Φ1(x·y) = Σ_{y' allowed after x·y} p(y' | x·y), the one-step
lookahead with the true next distribution (``MonteCarlo(k, 1)``, one forward pass per
candidate), both are the mass of one set under two distributions, so

    |Φ̂(x·y) − Φ1(x·y)| ≤ TV(p(· | x), p(· | x·y)):

OneStep is as good as its model is *stationary over one token*. Where the alphabet means the
same at every position (bounded Dyck: one token per bracket) OneStep
helps (benchmarks/faithful_bench.py, D(3,12): law TV 0.71 → 0.59). Where the next token's
distribution is position-specific it is wrong, not merely noisy: on the finite JSON language
after ``{"kind":"`` the model wants ``u`` (p 0.59) and ``admin``; the candidate ``g`` gets
Φ̂ = p(``u`` | x) = 0.59 because ``u`` may follow ``g`` ("guest"), while ``u`` itself gets
p(``s`` | x) ≈ 0.002 — Φ̂ scores each candidate by how much the model wants *its successor now*,
so it favours the strings the model likes least. There OneStep moves the sampler away from μ*
(law TV 0.13 with masking → 0.84), while Φ1 helps (0.08). No guard is applied: the drift that
bounds the error is not observable without the forward pass Φ1 needs.

Cost. The allowed ids after x·y depend on the parse state after x and on y only, not on the
model. They are cached per *state*: an Earley matcher names its state (``Matcher.state_key``:
equal keys, equal futures), so prefixes that reach the same state share one entry — bounded
Dyck D(3,12) has 348,649 viable prefixes but 6,628 states — and the state of x·y is found from
the state of x and y (the transition is recorded when the state of x is expanded). Keys are
one matcher's own, so the estimator keeps a private *scout* matcher for the grammar, walked to
a prefix only when a state or a transition is met for the first time. A matcher without
``state_key`` (the matrix backend) gets one state per prefix. A warm state costs one gather
and one segment sum over flat integer arrays (``np.bincount``), no accept or rollback; a
state met for the first time walks its candidates (accept, mask, key, roll back each), so
``precompute`` expands every state up front where they are few (all of D(3,12) in about a
second): benchmarks/results/faithful-2026-11-25-state-cache.md measures Φ̂ at 2–4% of a masked
step with the repo's 2×32 model when precomputed, 13–15% when the cache fills while decoding.

The cache holds one grammar × vocabulary at a time (a matcher of another one empties it) and
at most ``cache_ids`` ids (then it starts over; 0: no cache, every candidate walked on the
decoding matcher). ``max_candidates`` bounds the walk for large vocabularies: only the most
probable candidates look ahead, the others get the mass the current mask allows (as if the
next mask were the current one).
"""

from __future__ import annotations

from collections import deque

import numpy as np

from ..runtime import Matcher
from .estimator import Step, allowed_tokens


class _State:
    """A parse state's lookahead: ``after[y]`` the ids allowed after y, ``child[y]`` the
    state reached by y; ``flat[candidates' bytes]`` the compiled form for that candidate
    vector (OneStep._compile)."""

    __slots__ = ("after", "child", "flat")

    def __init__(self):
        self.after: dict[int, np.ndarray] = {}
        self.child: dict[int, int] = {}
        self.flat: dict[bytes, tuple] = {}


class OneStep:
    name = "onestep"

    def __init__(self, max_candidates: int = 64, cache_ids: int = 1 << 22, cache_prefixes: int = 1 << 18):
        if max_candidates < 1:
            raise ValueError("max_candidates must be >= 1")
        self.max_candidates = max_candidates
        self.cache_ids = cache_ids
        self.cache_prefixes = cache_prefixes
        self._buf: np.ndarray | None = None
        self._owner: tuple | None = None
        self._clear()
        self._scout: Matcher | None = None
        self._scout_at: list[int] = []

    def _clear(self) -> None:
        self._states: list[_State] = []
        self._by_key: dict = {}  # scout key (or ("prefix", x)) → state index
        self._state_of: dict[tuple, int] = {}  # prefix → state index
        self._held = 0

    # ------------------------------------------------------------ Φ̂
    def phi(self, step: Step) -> np.ndarray:
        cand, probs = step.candidates, step.probs
        n = len(probs)
        if self._buf is None or self._buf.shape[0] < (n + 31) // 32:
            self._buf = np.zeros((n + 31) // 32, np.int32)
        if self.cache_ids <= 0 or not self._own(step.matcher):
            return _mass(probs, cand, *self._compile(cand, step, self._walk_here(step)))
        st = self._states[self._state(step)]
        key = cand.tobytes()
        flat = st.flat.get(key)
        if flat is None:
            flat = self._compile(cand, step, lambda ys: self._expand(st, step.prefix, ys, step.matcher))
            if not len(flat[3]):  # (with a cut, which candidates look ahead depends on p)
                st.flat[key] = flat
                self._held += 2 * len(flat[1])
        out = _mass(probs, cand, *flat)
        if self._held > self.cache_ids or len(self._state_of) > self.cache_prefixes:
            self._clear()
        return out

    def _compile(self, cand: np.ndarray, step: Step, lookahead):
        """(segment of each flat id, flat ids, stop positions, positions that do not look
        ahead) for ``cand``:
        ``lookahead(ys)`` gives the ids allowed after each y of ``ys``; candidates past
        ``max_candidates`` (by current probability) get the current mask's ids."""
        eos = np.zeros(len(cand), np.bool_)
        for e in step.eos_ids:  # (np.isin costs ~20 µs on arrays this small)
            eos |= cand == e
        order = np.flatnonzero(~eos)
        rest = np.zeros(0, np.int64)
        if len(order) > self.max_candidates:
            keep = np.argsort(-step.probs[cand[order]], kind="stable")
            order, rest = np.sort(order[keep[:self.max_candidates]]), order[keep[self.max_candidates:]]
        ids = lookahead(cand[order].tolist())
        seg = np.repeat(order, [len(a) for a in ids]) if ids else np.zeros(0, np.int64)
        flat = np.concatenate(ids) if ids else np.zeros(0, np.int64)
        return seg, flat, np.flatnonzero(eos), rest

    def _walk_here(self, step: Step):
        """Lookahead on the decoding matcher itself (accept, mask, roll back), no cache."""
        def walk(ys):
            return [self._after(step.matcher, y, len(step.probs))[0] for y in ys]
        return walk

    def _after(self, m, y: int, n: int) -> tuple[np.ndarray, int | None]:
        """(ids allowed after y, the state key after y or None) from matcher ``m``."""
        if not m.accept_token(y):
            raise RuntimeError(f"the matcher refused token {y}, which its mask allowed")
        try:
            ids = allowed_tokens(m, n, self._buf).astype(np.int64)
            key = m.state_key() if m is self._scout else None
        finally:
            m.rollback(1)
        return ids, key

    # ------------------------------------------------------------ states
    def _own(self, m) -> bool:
        """Make the cache this matcher's language's (emptied for another one); False when
        the language cannot be told (no cache then)."""
        if type(m) is Matcher and self._owner is not None and m.table is self._owner[0] \
                and m.vocab is self._owner[1]:
            return True  # (the common case, without _language's look-ups)
        owner = _language(m)
        if owner is None:
            return False
        if self._owner is None or any(a is not b for a, b in zip(owner, self._owner)):
            self._clear()
            self._owner = owner
            self._scout = Matcher(m.table) if isinstance(m, Matcher) else None
            self._scout_at = []
        return True

    def _state(self, step: Step) -> int:
        """The state index of the step's prefix: remembered, or the parent's transition,
        or (first meeting) the scout's key at the prefix."""
        x = tuple(step.prefix)
        s = self._state_of.get(x)
        if s is None and x:
            parent = self._state_of.get(x[:-1])
            if parent is not None:
                s = self._states[parent].child.get(x[-1])
        if s is None:
            s = self._index(self._key_at(x), x)
        self._state_of[x] = s
        return s

    def _index(self, key, x: tuple) -> int:
        if key is None or key < 0:
            key = ("prefix", x)  # not named: a state of its own
        s = self._by_key.get(key)
        if s is None:
            s = self._by_key[key] = len(self._states)
            self._states.append(_State())
        return s

    def _key_at(self, x: tuple):
        if self._scout is None:
            return None
        self._goto(x)
        return self._scout.state_key()

    def _goto(self, x: tuple) -> None:
        """Walk the scout to prefix ``x`` (roll back to the common prefix, accept the rest)."""
        cur = self._scout_at
        common = 0
        while common < min(len(cur), len(x)) and cur[common] == x[common]:
            common += 1
        if len(cur) > common:
            self._scout.rollback(len(cur) - common)
            del cur[common:]
        for t in x[common:]:
            if not self._scout.accept_token(t):
                raise RuntimeError(f"the scout matcher refused token {t} of the decoded prefix")
            cur.append(t)

    def _expand(self, st: _State, x: tuple, ys: list[int], here) -> list[np.ndarray]:
        """The ids allowed after each y of ``ys`` from state ``st`` at prefix ``x`` (walked once
        per state and y, by the scout, or by ``here``, a matcher at ``x``, when there is none)."""
        missing = [y for y in ys if y not in st.after]
        if missing:
            x = tuple(x)
            walker = self._scout if self._scout is not None else here
            if walker is self._scout:
                self._goto(x)
            n = len(walker.vocab)
            for y in missing:
                ids, key = self._after(walker, y, n)
                st.after[y] = ids
                st.child[y] = self._index(key, x + (y,))
                self._held += len(ids) + 1
        return [st.after[y] for y in ys]

    def precompute(self, matcher, *, max_states: int = 100_000) -> int:
        """Expand the parse states reachable from the empty text, breadth first, until none
        is left, ``max_states`` are known or the cache is full (work budgets: the same bounds
        give the same table), so that decoding meets warm states only; a finite-state
        language (bounded Dyck) is covered whole. ``matcher`` names the language and is not
        moved; a matcher without ``state_key`` gets nothing precomputed (its states are its
        prefixes). Returns the number of states expanded."""
        if not self._own(matcher) or self._scout is None:
            return 0
        n = len(self._scout.vocab)
        if self._buf is None or self._buf.shape[0] < (n + 31) // 32:
            self._buf = np.zeros((n + 31) // 32, np.int32)
        eos = tuple(int(e) for e in self._scout.vocab.eos_ids)
        root = self._state_of[()] = self._index(self._key_at(()), ())
        queue, queued, done = deque([(root, ())]), {root}, 0
        while queue and len(self._states) < max_states and self._held <= self.cache_ids:
            s, x = queue.popleft()
            self._goto(x)
            cand = allowed_tokens(self._scout, n, self._buf)
            st = self._states[s]
            step = Step(self._scout, x, np.zeros(n), cand, eos)
            flat = self._compile(cand, step, lambda ys: self._expand(st, x, ys, None))
            if not len(flat[3]):
                st.flat[cand.tobytes()] = flat
                self._held += 2 * len(flat[1])
            done += 1
            for y, c in st.child.items():
                if c not in queued:
                    queued.add(c)
                    queue.append((c, x + (y,)))
        return done


def _mass(probs: np.ndarray, cand: np.ndarray, seg: np.ndarray, flat: np.ndarray, eos: np.ndarray,
          rest: np.ndarray) -> np.ndarray:
    """Φ̂ per candidate: the probability of the ids after it (one gather, one segment sum);
    1 at stop tokens; the current mask's mass at candidates that did not look ahead."""
    out = np.bincount(seg, weights=probs[flat], minlength=len(cand))
    out[eos] = 1.0
    if len(rest):
        out[rest] = probs[cand].sum()
    return out


def _language(m) -> tuple | None:
    """The objects a matcher's masks depend on besides its prefix — its compiled grammar (the
    Earley token table, or the matrix backend's CNF) and its vocabulary — or None."""
    grammar = getattr(m, "cnf", None)
    if grammar is None:
        grammar = getattr(m, "table", None)
    vocab = getattr(m, "vocab", None)
    return None if grammar is None or vocab is None else (grammar, vocab)
