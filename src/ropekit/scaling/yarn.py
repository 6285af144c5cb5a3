"""YaRN (Peng et al., arXiv 2309.00071): NTK-by-parts interpolation plus an attention temperature."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ropekit._validate import require_choice, require_float, require_int
from ropekit.scaling._hf_numbers import hf_fields, max_length
from ropekit.scaling._pairs import PairGroups, pair_ranges, require_hf_keys
from ropekit.scaling.registry import Frequencies, ScalingConfig, check_factor, inv_freq, register_scaling

if TYPE_CHECKING:
    from ropekit.config import RopeConfig

YARN_RAMPS = ("transformers", "paper")


def yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    """g(s, m) = 0.1·m·ln s + 1 for s > 1, else 1 (YaRN eq. 22, generalised by DeepSeek-V2)."""
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def correction_pair(rotations: float, dim: int, base: float, original_length: int) -> float:
    """The (fractional) pair index whose wavelength fits ``rotations`` times into ``original_length``."""
    return dim * math.log(original_length / (rotations * 2 * math.pi)) / (2 * math.log(base))


@dataclass(frozen=True, kw_only=True)
class YarnScaling(ScalingConfig):
    """YaRN.

    transformers quirks and how ropekit treats them:

    * ``beta_fast``/``beta_slow`` of 0 or null mean 32 and 1 (transformers uses ``beta or default``).
      ``from_hf_config`` reproduces that; this class itself requires values > 0.
    * ``mscale`` alone (without a non-zero ``mscale_all_dim``) is ignored and A = g(s, 1); a zero in either
      counts as unset. ropekit: the same rule.
    * ``truncate: null`` disables truncation (``if truncate:``); ``from_hf_config`` reads it as ``False``.
    * ``factor`` is a required key (transformers raises ``KeyError`` without it), but ``factor: null`` means
      ``max_position_embeddings / original_max_position_embeddings``. ropekit: a missing key raises ``ValueError``,
      null is derived the same way (and raises if the ratio is below 1).
    * L0 is read in transformers' order (:func:`~ropekit.scaling._hf_numbers.hf_original_length`).
    * The ramp's upper end is clamped to ``rotary_dim − 1`` although pair indices stop at ``rotary_dim/2 − 1``:
      when the beta_slow pair lies beyond the last pair the ramp never reaches 1, so even the lowest frequency
      is not fully interpolated. A zero-width ramp gets ``high += 0.001``. ropekit: the same arithmetic (the YaRN
      reference code clamps the same way, so checkpoints were trained with it).
    * ``beta_fast < beta_slow`` is only a warning in transformers; here it raises ``ValueError``.
    * transformers computes in float32; ropekit in float64 (they agree to ~1e-6 relative).

    Attributes:
        factor: s >= 1 (for null in a transformers dict, see above).
        original_max_position_embeddings: L0, the pre-training length.
        beta_fast: pairs rotating more than this many times within L0 are kept (extrapolated). > 0.
        beta_slow: pairs rotating fewer times are fully interpolated. 0 < beta_slow <= beta_fast.
        mscale, mscale_all_dim: the DeepSeek form A = g(s, mscale)/g(s, mscale_all_dim), used only when both
            are non-zero (see above).
        attention_factor: explicit A; overrides everything else.
        truncate: floor/ceil the ramp's ends to whole pairs (transformers' default True).
        ramp: ``"transformers"`` — linear in the pair index between the corrected dims (what transformers,
            vLLM and the YaRN repository run); ``"paper"`` — linear in r = L0/λ_i between beta_slow and
            beta_fast (the paper's eq. 18; ropekit-only, ``to_hf_dict`` refuses it). They agree for pairs
            outside the ramp and differ inside it.
    """

    rope_type = "yarn"
    ropekit_only = ("ramp",)
    plan_order = 3.0
    hf_native = True
    extend_preference = 1.0
    eval_order = 4.0
    plan_why = (
        "YaRN keeps the pairs that rotate more than beta_fast times within the training length, interpolates the "
        "ones that rotate fewer than beta_slow times, ramps between, and scales attention by A = 0.1·ln s + 1."
    )
    factor: float
    original_max_position_embeddings: int
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    mscale: float | None = None
    mscale_all_dim: float | None = None
    attention_factor: float | None = None
    truncate: bool = True
    ramp: str = "transformers"

    def __post_init__(self) -> None:
        object.__setattr__(self, "factor", check_factor("factor", self.factor))
        original = require_int("original_max_position_embeddings", self.original_max_position_embeddings, minimum=1)
        object.__setattr__(self, "original_max_position_embeddings", original)
        for name in ("beta_fast", "beta_slow"):
            object.__setattr__(self, name, require_float(name, getattr(self, name), above=0.0))
        if self.beta_fast < self.beta_slow:
            raise ValueError(
                f"beta_fast must be >= beta_slow, got beta_fast={self.beta_fast}, beta_slow={self.beta_slow}"
            )
        for name in ("mscale", "mscale_all_dim"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, require_float(name, getattr(self, name), at_least=0.0))
        if self.attention_factor is not None:
            object.__setattr__(
                self, "attention_factor", require_float("attention_factor", self.attention_factor, above=0.0)
            )
        if not isinstance(self.truncate, bool):
            raise TypeError(f"truncate must be a bool, got {self.truncate!r}")
        require_choice("ramp", self.ramp, YARN_RAMPS)

    def resolved_attention_factor(self) -> float:
        """A: explicit ``attention_factor``; else the DeepSeek ratio when both mscales are non-zero; else g(s, 1)."""
        if self.attention_factor is not None:
            return float(self.attention_factor)
        if self.mscale and self.mscale_all_dim:
            return yarn_mscale(self.factor, self.mscale) / yarn_mscale(self.factor, self.mscale_all_dim)
        return yarn_mscale(self.factor)

    def softmax_mscale(self) -> float:
        """g(s, mscale_all_dim)², the softmax-scale term of DeepSeek-V2/V3-style attention; 1 without
        ``mscale_all_dim`` (or with 0).

        transformers multiplies the attention scale ``qk_head_dim ** -0.5`` by it in the model classes that
        define ``yarn_apply_mscale`` (DeepSeek-V2, V3, V3.2, Mistral 4, LongCat-Flash, MiniCPM3, GLM-4-MoE-Lite),
        whatever ``attention_factor`` is; Llama-style classes do not. With the default A = g(s, m)/g(s, m_all), q·k
        logits scale by A² · g(s, m_all)² = g(s, m)² in those models.
        """
        return yarn_mscale(self.factor, self.mscale_all_dim) ** 2 if self.mscale_all_dim else 1.0

    @classmethod
    def from_hf(cls, params: dict[str, Any], model: dict[str, Any], *, name: str) -> YarnScaling:
        """transformers' reading rules, quirks included (see the class docstring)."""
        if "factor" not in params:  # present but null is allowed: it is derived below
            require_hf_keys({}, ("factor",), name)
        values, derived = hf_fields(params, model, name)
        if derived is not None:
            if derived < 1:
                original = values["original_max_position_embeddings"]
                raise ValueError(
                    "yarn factor is null, so it is max_position_embeddings / original_max_position_embeddings = "
                    f"{max_length(model)}/{original} = {derived}, which must be >= 1"
                )
            values["factor"] = derived
        for key, default in (("beta_fast", 32.0), ("beta_slow", 1.0)):
            values[key] = values.get(key) or default  # transformers: `beta or default`, so 0 means the default
        if "truncate" in params and params["truncate"] is None:
            values["truncate"] = False
        return cls.from_params(values)

    def plan_summary(self, rope: RopeConfig, freqs: Frequencies, groups: PairGroups) -> tuple[dict[str, Any], str]:
        length = self.original_max_position_embeddings
        parameters = {
            "corr_low": correction_pair(self.beta_fast, rope.dim, rope.base, length),
            "corr_high": correction_pair(self.beta_slow, rope.dim, rope.base, length),
        }
        summary = (
            f"beta_fast {self.beta_fast:g}, beta_slow {self.beta_slow:g}: pairs {pair_ranges(groups.kept)} left "
            f"alone, {pair_ranges(groups.blended)} ramped, {pair_ranges(groups.interpolated)} interpolated; "
            f"attention factor {freqs.attention_factor:.4g}"
        )
        return parameters, summary

    def keep_fraction(self, rope: RopeConfig) -> np.ndarray:
        """Per pair, the fraction e_i of the original frequency kept (1 = extrapolate, 0 = interpolate).

        Returns:
            float64 array of shape ``(rope.dim // 2,)``.
        """
        dim, base, length = rope.dim, rope.base, self.original_max_position_embeddings
        theta = inv_freq(dim, base)
        if self.ramp == "paper":
            rotations = length * theta / (2 * math.pi)  # r = L0 / λ_i
            return np.clip((rotations - self.beta_slow) / (self.beta_fast - self.beta_slow or 1e-3), 0, 1)
        low = correction_pair(self.beta_fast, dim, base, length)
        high = correction_pair(self.beta_slow, dim, base, length)
        if self.truncate:
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)  # dim − 1, not dim/2 − 1: transformers' clamp, kept
        if low == high:
            high += 0.001  # transformers' guard against a zero-width ramp
        ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0, 1)
        return 1 - ramp


@register_scaling(YarnScaling)
def yarn_frequencies(spec: YarnScaling, rope: RopeConfig, *, seq_len: int | None = None) -> Frequencies:
    """inv_i = (θ_i/s)(1 − e_i) + θ_i·e_i with e_i from :meth:`YarnScaling.keep_fraction` (eq. 18–20)."""
    theta = inv_freq(rope.dim, rope.base)
    keep = spec.keep_fraction(rope)
    return Frequencies(theta / spec.factor * (1 - keep) + theta * keep, spec.resolved_attention_factor())
