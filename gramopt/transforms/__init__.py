"""IR → IR passes: each a pure function with its argument (why it keeps the language) in its
docstring; one home for every pass that is not an e-graph rewrite, and the one registry of
every pass production runs.

    registry.py  PASSES: every pass by the name ``--passes`` takes (clean-ups, saturation and
                 its families, inlining, the target's fix-ups, every reshaping), the pipelines
                 (DEFAULT_PASSES, REQUEST_PASSES); the pass manager, the targets' fix-ups and
                 the law tests read it
    cleanup/     the clean-ups users expect: equal rules merged, unproductive / unreachable
                 rules removed, ε, canonical repetitions, duplicates, class merging, fusion,
                 factoring (``registry.CLEANUP_ORDER``)
    inline.py    inlining of non-start rules where the exact κ says it pays (post-extraction)
    reshape/     the shapes engines decide well (left recursion as a star, star rules, a root
                 that delegates, lookahead assertions; llama.cpp's empty-first repetitions and
                 widest-last alternatives), composed by the targets' fix-ups (``registry.reshaping``)
    fixpoint.py  the one loop that reruns a step until nothing changes (every caller's own cap)

The e-graph rewrite families live in ``gramopt.rewrites``; which reshapings a target runs,
and in what order, in ``gramopt.targets``.
"""
