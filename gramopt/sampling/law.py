"""The output distribution of a sampler, computed exactly over a ``ValueTree``.

For an estimator whose Φ̂ is a function of the prefix (Uniform, OneStep, Exact), the sampler's
law is the product of its per-step distributions q(y | x) = p(y | x) Φ̂(x·y) / Σ…: a walk of
the tree from the root, carrying the probability of reaching each node, gives the probability
of every string without sampling noise. Nodes reached with probability below ``eps`` are not
expanded; their mass is returned as ``pruned`` (so |TV computed − TV true| ≤ pruned).
A stochastic estimator (MonteCarlo) has no such law: sample it.
"""

from __future__ import annotations

import numpy as np

from .estimator import Step, reweight
from .exact import ValueTree


def sampler_law(tree: ValueTree, estimator, matcher, vocab, *, eps: float = 1e-9) -> tuple[dict[bytes, float], float]:
    """(law over strings, pruned mass) of sampling with ``estimator`` (module docstring).
    ``matcher`` starts and ends at the empty prefix; the tree must keep ``probs``."""
    if tree.probs is None:
        raise ValueError("the tree kept no full next-token distributions (vocabulary too large)")
    eos = tree.eos_ids
    law: dict[bytes, float] = {}
    pruned = 0.0
    stack = [(0, 1.0)]  # node, probability of reaching it
    cur: list[int] = []
    while stack:
        node, reach = stack.pop()
        prefix = tree.path(node)
        common = 0
        while common < min(len(cur), len(prefix)) and cur[common] == prefix[common]:
            common += 1
        if len(cur) > common:
            matcher.rollback(len(cur) - common)
        del cur[common:]
        for t in prefix[common:]:
            matcher.accept_token(t)
            cur.append(t)
        a, b = tree.child_start[node], tree.child_start[node + 1]
        kids = tree.child_node[a:b]
        toks = tree.token[kids].tolist()
        cand = sorted(toks + ([eos[0]] if tree.accepting[node] else []))
        if not cand:
            continue
        step = Step(matcher, prefix, tree.probs[node], np.array(cand, np.int64), eos)
        q = reweight(step, estimator.phi(step))
        child_of = dict(zip(toks, kids.tolist()))
        for y, qy in zip(cand, q.tolist()):
            r = reach * qy
            if y in eos:
                text = b"".join(vocab.token_bytes[t] for t in prefix)
                law[text] = law.get(text, 0.0) + r
            elif r >= eps:
                stack.append((child_of[y], r))
            else:
                pruned += r
    if cur:
        matcher.rollback(len(cur))
    return law, pruned
