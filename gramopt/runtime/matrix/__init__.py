"""The matrix (Valiant/CYK) backend of the runtime, for grammars that stay ambiguous.

    from gramopt.runtime import Matcher
    m = Matcher(grammar, vocab, backend="valiant")     # same API as the Earley Matcher

Modules: cnf (the ε-free binarised normal form and its closures), kernel (numba: one
table column per byte as bitset products, Pred sets, the trie walk), table (the committed
columns, growth, rollback), torch_table (the same columns as dense torch products on
CPU or CUDA; torch imported only there), classes (the mask cache: token classes per
seed of Pred and its follow context, so a mask walks only the undecided tokens),
matcher (the token-level API). Ambiguity costs nothing extra: the table holds sets
of nonterminals per span, never derivations.
"""

from .cnf import CNF, build_cnf
from .matcher import MatrixCounters, ValiantMatcher

__all__ = ["CNF", "MatrixCounters", "ValiantMatcher", "build_cnf"]
