"""Grammar-faithful sampling: Φ-reweighted decoding, plain and speculative.

Masking and renormalising samples μ_proj; the model conditioned on the grammar, μ*, needs each
candidate weighted by its future validity Φ (estimator.py has the argument). Modules:

    estimator    Step, the Estimator interface, reweight (a constant Φ̂ is a no-op)
    uniform      Uniform: Φ̂ ≡ 1 (masked sampling)
    onestep      OneStep: lookahead one token with the current logits, no forward pass
    montecarlo   MonteCarlo(k, horizon): importance-weighted rollouts with the model
    exact        Exact: Φ by dynamic programming over the viable-prefix trie (ValueTree)
    registry     make_estimator(name, ...)
    loop         decode(..., faithful="onestep"): batched decoding with any estimator, a pick
                 of the one generation loop (gramopt.decoding.generate)
    hook         FaithfulLogits: the same reweighting as generate's logits hook
    speculative  speculative_decode(...): draft + target, Leviathan acceptance against p·Φ̂
    law          sampler_law: a deterministic sampler's output distribution, exactly
    measure      TV, bootstrap intervals, noise floor, chi-square
    train        fit the tiny transformer on token sequences
    workloads    bounded Dyck D(k, n), a finite JSON schema, their vocabularies and corpora

Everything reaches the grammar through the Matcher API (accept_token, fill_next_token_bitmask,
rollback, is_terminated), so any runtime backend with that API plugs in. Stands on
gramopt.grammar, gramopt.runtime and gramopt.decoding (and torch, numpy).
"""

from .estimator import Estimator, Step, allowed_tokens, reweight
from .exact import Exact, ExactTooLarge, ValueTree
from .hook import FaithfulLogits
from .loop import Samples, decode
from .montecarlo import MonteCarlo
from .onestep import OneStep
from .registry import NAMES, make_estimator
from .speculative import SpecStats, speculative_decode
from .uniform import Uniform

__all__ = ["Estimator", "Exact", "ExactTooLarge", "FaithfulLogits", "MonteCarlo", "NAMES", "OneStep", "Samples",
           "SpecStats",
           "Step", "Uniform", "ValueTree", "allowed_tokens", "decode", "make_estimator", "reweight",
           "speculative_decode"]
