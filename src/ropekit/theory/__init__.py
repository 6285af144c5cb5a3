"""RoPE theory you can compute: wavelengths, long-term decay, the exact base bound, and a context-extension plan.

numpy only: nothing here imports torch, so ``import ropekit.theory`` and the theory commands stay fast.

* :mod:`~ropekit.theory.wavelengths` — λ_i per pair before/after scaling, periodic pairs, critical dimension.
* :mod:`~ropekit.theory.decay` — the ones-vector score g, RoFormer's upper bound, B_m (``similarity_sum``, by direct
  summation) and the scan over every m (``margin_chunks``), behind ``first_negative_m`` and the base bound's scans.
* :mod:`~ropekit.theory.bound` — the smallest and robust base for a context length, islands, the inverse
  (``base_bound``, ``smallest_feasible_base`` / ``robust_base_only`` for one definition alone,
  ``max_context_length``).
* :mod:`~ropekit.theory.published` — the published bound tables (Men et al. Table 1, Su) and their face-value check.
* :mod:`~ropekit.theory.similar_tokens` — Monte Carlo check of E[qᵀR_m k*] − E[qᵀR_m k] = 2σ²B_m.
* :mod:`~ropekit.theory.planning` — :func:`plan`: given a model and a target length, the bound, a safe base and
  the training-free methods.
* :mod:`~ropekit.theory.figures` — their matplotlib figures (decay, the bound, wavelengths, scaling ratios), for
  ``ropekit plot`` and the report; not imported here (matplotlib loads inside each function).

Frequencies of scaled configs come from :mod:`ropekit.scaling` (also numpy only), the one source of truth.
"""

from ropekit.theory.bound import (
    BaseBound,
    base_bound,
    crude_feasible_base,
    max_context_length,
    robust_base_only,
    smallest_feasible_base,
)
from ropekit.theory.decay import (
    first_negative_m,
    ones_score,
    roformer_upper_bound,
    similarity_margin,
    similarity_sum,
    tolerance,
)
from ropekit.theory.planning import MethodPlan, Plan, plan
from ropekit.theory.published import PAPER_BOUND, SU_BOUND, FaceValue, face_value_check
from ropekit.theory.similar_tokens import SimilarTokenCheck, similar_token_check
from ropekit.theory.wavelengths import (
    WavelengthReport,
    critical_dimension,
    extrapolation_limit,
    pair_wavelengths,
    periodic_pairs,
    wavelength_report,
)

__all__ = [
    "PAPER_BOUND",
    "SU_BOUND",
    "BaseBound",
    "FaceValue",
    "MethodPlan",
    "Plan",
    "SimilarTokenCheck",
    "WavelengthReport",
    "base_bound",
    "critical_dimension",
    "crude_feasible_base",
    "extrapolation_limit",
    "face_value_check",
    "first_negative_m",
    "max_context_length",
    "ones_score",
    "pair_wavelengths",
    "periodic_pairs",
    "plan",
    "robust_base_only",
    "roformer_upper_bound",
    "similar_token_check",
    "similarity_margin",
    "similarity_sum",
    "smallest_feasible_base",
    "tolerance",
    "wavelength_report",
]
