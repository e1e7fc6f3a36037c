"""What an e-graph pass must not make worse, and the price of a recursion.

    objective(grammar, recursion_penalty) = κ + SAC-proxy + recursion_penalty · recursive references

``W_RECURSION`` is the cost (κ units) engine targets charge per recursion: the extractor per
forward reference it would emit, the objective per recursive reference. Measured (gramopt
bench): `[ \\t\\n]*` extracted as `W ::= "" | W [ \\t\\n]` made xgrammar 9× and gramopt's
Earley 2,000× slower on xgrammar's JSON grammar; llguidance runs regular parts in its lexer
(121×). So `B ::= [^<] B | "</t>"` → `[^<]* "</t>"` costs κ but removes a recursion every
engine runs per character.
"""

from __future__ import annotations

from ..grammar import Grammar
from ..grammar.analysis import recursive_references
from .kappa import kappa
from .sac_proxy import sac_proxy

W_RECURSION = 10.0


def objective(g: Grammar, recursion_penalty: float = 0.0, k: int | None = None) -> float:
    """κ (``k`` when already known) + SAC-proxy + ``recursion_penalty`` per recursive reference."""
    cost = (kappa(g) if k is None else k) + sac_proxy(g)
    if recursion_penalty:
        cost += recursion_penalty * recursive_references(g)
    return cost


__all__ = ["W_RECURSION", "objective"]
