"""Language-equivalence checks and the reference recognizer.

    Recognizer(grammar)                          reference.py  (plain Earley, the oracle)
    check_equivalence(original, candidate, bounds=Bounds()) -> VerifyResult   check.py
        enumeration.py   every prefix up to a bound, both recognizers in lockstep
        coverage.py      a shortest sentence through every production, both ways
        derivations.py   random sentences of each grammar checked in the other
        regular.py       exact automaton comparison for (strongly) regular grammars
        unchanged.py     (incremental=True) the changed rules only, unchanged ones as letters
    Bounds, VerifyResult, Counterexample         result.py

A reported difference is always real; equality is proved only where a method says
``exact``. Stands on ``gramopt.grammar`` alone.
"""

from .check import check_equivalence, recognizers
from .reference import Recognizer, State
from .result import Bounds, Counterexample, VerifyResult

__all__ = ["Bounds", "Counterexample", "Recognizer", "State", "VerifyResult",
           "check_equivalence", "recognizers"]
