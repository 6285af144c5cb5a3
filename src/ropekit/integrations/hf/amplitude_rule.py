"""Which amplitude rule a written method keeps from the model's own: one rule for ``extend``'s writer and its
preservation check.

A method's amplitude A (the ``attention_factor`` that multiplies cos and sin) is set by its amplitude keys
(:data:`AMPLITUDE_KEYS`): an explicit ``attention_factor``, or YaRN's ``mscale``/``mscale_all_dim`` (A = g(s, mscale) /
g(s, mscale_all_dim)); without them it is the method's formula (YaRN: 0.1·ln s + 1). The rope dict a model's config
class resolves (:func:`~ropekit.integrations.hf.transformers_reads.as_transformers_reads`) states the model's rule:

* keys that give the formula's own value at the model's parameters are the formula: OLMo 3 ships YaRN x8 with
  ``attention_factor`` 1.2079 = 0.1·ln 8 + 1, so YaRN x32 written on it gets 0.1·ln 32 + 1, the method as asked;
* any other stated keys are the model's own rule, and a written method of the same ``rope_type`` keeps them unless
  the request states amplitude keys of its own: DeepSeek-V4's config class gives its YaRN ``compress`` RoPE
  ``attention_factor`` 1.0 (its reference does not multiply cos/sin by YaRN's A), a fixed A kept at every factor;
  DeepSeek-V3's ``mscale``/``mscale_all_dim`` (which its attention also reads for its softmax scale) are kept and
  applied to the written factor.

A written method of another ``rope_type`` has its own amplitude (linear, Llama 3 and NTK: 1), as the request asks.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ropekit.config import RopeConfig
    from ropekit.scaling.registry import ScalingConfig

#: the fields of a method config that set its amplitude rather than its frequencies
AMPLITUDE_KEYS = ("attention_factor", "mscale", "mscale_all_dim")
#: relative distance within which a stated ``attention_factor`` is the formula's own value (a hand-rounded 4-digit
#: copy of it included)
FORMULA_RTOL = 1e-4


def stated_amplitude(scaling: Any) -> dict[str, float]:
    """The amplitude keys ``scaling`` states (non-zero: a zero ``mscale`` counts as unset, as in transformers)."""
    if scaling is None or not dataclasses.is_dataclass(scaling):
        return {}
    return {key: getattr(scaling, key) for key in AMPLITUDE_KEYS if getattr(scaling, key, None)}


def amplitude_rule(native: Any) -> dict[str, float]:
    """The amplitude keys of the model's own method ``native`` that are its rule rather than the method's formula
    (module docstring): empty where it states none, or only an ``attention_factor`` equal to its formula's value."""
    stated = stated_amplitude(native)
    if "attention_factor" in stated and hasattr(native, "resolved_attention_factor"):
        try:
            formula = dataclasses.replace(native, attention_factor=None).resolved_attention_factor()
        except ValueError:  # no formula without it (LongRoPE with too short an original length): a rule
            return stated
        if math.isclose(stated["attention_factor"], formula, rel_tol=FORMULA_RTOL):
            del stated["attention_factor"]
    return stated


def kept_amplitude(native: Any, requested: Any) -> dict[str, float]:
    """The amplitude keys of ``native`` (the model's method) that the written ``requested`` takes: its rule, where
    ``requested`` is the same ``rope_type`` and states no amplitude keys of its own; else none."""
    if requested is None or native is None or requested.rope_type != native.rope_type:
        return {}
    if stated_amplitude(requested):
        return {}
    names = {field.name for field in dataclasses.fields(requested)}
    return {key: value for key, value in amplitude_rule(native).items() if key in names}


def with_kept_amplitude(native: Any, requested: Any) -> Any:
    """``requested`` with the amplitude keys it keeps from ``native`` (:func:`kept_amplitude`)."""
    kept = kept_amplitude(native, requested)
    return dataclasses.replace(requested, **kept) if kept else requested


def rescaled(rope: RopeConfig, scaling: ScalingConfig | None) -> RopeConfig:
    """The model's RoPE ``rope`` with ``scaling`` in place of its own, keeping its amplitude rule
    (:func:`with_kept_amplitude`): what ``extend`` writes and ``apply_scaling`` installs."""
    return rope.replace(scaling=with_kept_amplitude(rope.scaling, scaling))
