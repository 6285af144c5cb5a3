"""The one export decision: how a RoPE is said to a reader that cannot run ropekit (transformers, GGUF, engines).

Every writer (the transformers config, the GGUF metadata, each engine's launch line) translates this answer and
decides nothing itself. The answer, for a :class:`~ropekit.config.RopeConfig`:

* **named**: transformers computes the scaling itself under its own ``rope_type`` (the same frequencies at every
  length; :meth:`~ropekit.scaling.base.ScalingConfig.is_hf_native`). A reader that knows the name writes it;
  others fall back to the static form below when there is one.
* **follows the length**: the frequencies change with the served length (unfrozen dynamic NTK, LongRoPE with
  short ≠ long), at ``switch_lengths``; no static form exists.
* otherwise the **static form**, exact in float64:

  - a **new base** b' (plain RoPE at b', attention factor 1): declared by the method
    (:meth:`~ropekit.scaling.base.ScalingConfig.declared_base`: static NTK, ``--base``, a frozen dynamic NTK),
    or recognised when the frequencies are b'^(−2i/d) to 1e-12 relative;
  - else **per-pair factors** f_i = θ_i/θ'_i (θ_i = b^(−2i/d), the model's own base) with an attention factor.

  Pairs with frequency <= 0 have no static form (a factor would be infinite): ``unexpressible`` says so.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ropekit.scaling.registry import frequencies, inv_freq

if TYPE_CHECKING:
    from ropekit.config import RopeConfig

#: relative tolerance for recognising a pure base change in float64 frequencies.
BASE_CHANGE_RTOL = 1e-12


@dataclass(frozen=True)
class StaticForm:
    """How one RoPE is exported (see the module docstring).

    Attributes:
        rope_type: the method (``default`` for plain RoPE).
        named: transformers computes it under ``rope_type`` (plain RoPE included).
        new_base: the static form is plain RoPE at this base (attention factor 1); ``None`` otherwise.
        base_declared: ``new_base`` is the method's own (exact), not recovered from the frequencies.
        factors: the static form is these per-pair divisors θ_i/θ'_i of the model's plain frequencies;
            ``None`` when it is a new base, follows the length, or cannot be expressed.
        attention_factor: the factor multiplying cos and sin (at the shortest length for methods that follow it).
        original_length: L0 the scaling carries (``None``: it carries none).
        factor: s the scaling carries (``None``: it carries none).
        frozen_at: the length a length-following method is frozen at (``None``: not frozen).
        switch_lengths: the last served lengths before the frequencies change (empty: the same at every length).
        follows_length: one phrase saying how the frequencies follow the length, or ``None``.
        unexpressible: why there is no static form although the frequencies are static (pairs <= 0), or ``None``.
    """

    rope_type: str
    named: bool
    new_base: float | None = None
    base_declared: bool = False
    factors: tuple[float, ...] | None = None
    attention_factor: float = 1.0
    original_length: int | None = None
    factor: float | None = None
    frozen_at: int | None = None
    switch_lengths: tuple[int, ...] = ()
    follows_length: str | None = None
    unexpressible: str | None = None

    @property
    def static(self) -> bool:
        """True when a new base or per-pair factors say the whole RoPE."""
        return self.new_base is not None or self.factors is not None


def static_form(rope: RopeConfig) -> StaticForm:
    """The export decision for ``rope`` (its base, rotary dim and scaling); see the module docstring.

    Frequencies are compared in float64; the factors are float64 (a writer storing float32 rounds them once).
    """
    scaling = rope.scaling
    if scaling is None:
        return StaticForm("default", True, new_base=float(rope.base), base_declared=True)
    common = {
        "rope_type": scaling.rope_type,
        "named": scaling.is_hf_native(),
        "original_length": scaling.stated_original_length(),
        "factor": scaling.stated_factor(),
        "frozen_at": scaling.frozen_length(),
    }
    switch = scaling.length_switch()
    if switch is not None:
        attention = float(frequencies(rope).attention_factor)
        return StaticForm(**common, attention_factor=attention, switch_lengths=switch[0], follows_length=switch[1])
    declared = scaling.declared_base(rope)
    if declared is not None:
        return StaticForm(**common, new_base=float(declared), base_declared=True)
    freqs = frequencies(rope, seq_len=scaling.frozen_length())
    ours = np.asarray(freqs.inv_freq, dtype=np.float64)
    attention = float(freqs.attention_factor)
    if ours.shape != (rope.dim // 2,) or not np.all(np.isfinite(ours)) or np.any(ours <= 0):
        why = f"{scaling.rope_type} leaves some pairs with frequency <= 0, which no per-pair factor can express"
        return StaticForm(**common, attention_factor=attention, unexpressible=why)
    if attention == 1.0 and len(ours) > 1:
        new_base = float(ours[1] ** (-rope.dim / 2))  # θ'_1 = b'^(−2/d)
        if new_base > 1 and np.allclose(ours, inv_freq(rope.dim, new_base), rtol=BASE_CHANGE_RTOL, atol=0):
            return StaticForm(**common, new_base=new_base)
    factors = tuple(float(x) for x in inv_freq(rope.dim, rope.base) / ours)
    return StaticForm(**common, factors=factors, attention_factor=attention)


def plain_at(rope: RopeConfig, form: StaticForm) -> RopeConfig:
    """``rope`` as plain RoPE at ``form.new_base`` (a static form that is a new base)."""
    if form.new_base is None:
        raise ValueError(f"{form.rope_type} is not a base change")
    return dataclasses.replace(rope, base=form.new_base, scaling=None)
