"""``Uniform``: Φ̂ ≡ 1, today's masked sampler (μ_proj).

A constant cancels in ``reweight``'s normalisation, so sampling with ``Uniform`` is exactly
masking the logits and renormalising.
"""

from __future__ import annotations

import numpy as np

from .estimator import Step


class Uniform:
    name = "uniform"

    def phi(self, step: Step) -> np.ndarray:
        return np.ones(len(step.candidates))
