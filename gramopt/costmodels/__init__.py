"""Cost models: κ (control states), SAC (parse-forest growth), engine time models."""

from .kappa import kappa, kappa_of_bnf, rule_kappa
from .sac import sac_trace
from .sac_proxy import sac_proxy

__all__ = ["kappa", "kappa_of_bnf", "rule_kappa", "sac_trace", "sac_proxy"]
