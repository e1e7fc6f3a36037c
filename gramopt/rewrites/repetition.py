"""Repetition canonicalization, as egglog rules over ``Rep x min max`` (max -1 = ∞).

    (x*)* → x*   (x+)* → x*   (x*)+ → x*   (x+)+ → x+   (x?)* → x*   (x*)? → x*
    (x?)+ → x*   (x+)? → x*   (x?)? → x?   x{1} → x     x{0} → ε     ε{m,n} → ε

Each is an identity of formal languages, true for every language x: the nested forms are law
``nest`` of ``gramopt.grammar.powers`` (stated and argued there, the table below is computed
from it), e.g. (x?)+ = (x ∪ ε)+ = ∪_{k≥1} (x ∪ ε)^k = ∪_{j≥0} x^j = x*. Sequence-level forms
(x x* → x+, x* x* → x*) live in ``sequence.py``.
"""

from ..egraph.rewrite import Rewrite
from ..grammar.powers import OPTIONAL, PLUS, STAR, nest


def _egg(bounds) -> tuple[int, int]:
    """Bounds as the e-graph writes them (max -1 = ∞)."""
    return bounds[0], -1 if bounds[1] is None else bounds[1]


# (inner, outer, result) as (min, max): the nine pairs of ?, *, + (in the order the rules have
# always run), each turned into one repetition by law ``nest`` of ``gramopt.grammar.powers``
_PAIRS = [(STAR, STAR), (PLUS, STAR), (STAR, PLUS), (PLUS, PLUS), (OPTIONAL, STAR), (STAR, OPTIONAL),
          (OPTIONAL, PLUS), (PLUS, OPTIONAL), (OPTIONAL, OPTIONAL)]
_NESTED = [(_egg(i), _egg(o), _egg(nest(i, o))) for i, o in _PAIRS]

_SYM = {(0, -1): "*", (1, -1): "+", (0, 1): "?"}

RULES = [
    Rewrite(f"rep-nested(x{_SYM[i]}){_SYM[o]}", "repetition",
            f"(x{_SYM[i]}){_SYM[o]} = x{_SYM[r]}: a regular-language identity, true for every x.",
            egglog=f"(rewrite (Rep (Rep x {i[0]} {i[1]}) {o[0]} {o[1]}) (Rep x {r[0]} {r[1]}) :ruleset repetition)")
    for i, o, r in _NESTED
] + [
    Rewrite("rep-one", "repetition", "x{1,1} = x.",
            egglog="(rewrite (Rep x 1 1) x :ruleset repetition)"),
    Rewrite("rep-zero", "repetition", "x{0,0} = ε.",
            egglog="(rewrite (Rep x 0 0) (Eps) :ruleset repetition)"),
    Rewrite("rep-eps", "repetition", "ε{m,n} = ε: every concatenation of empty strings is empty.",
            egglog="(rewrite (Rep (Eps) a b) (Eps) :ruleset repetition)"),
]
