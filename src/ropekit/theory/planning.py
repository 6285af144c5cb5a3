"""A context-extension plan: given a model's RoPE and a target length, what the theory says, in words and numbers.

For head dim d, base b, training length T and target length L (numpy only; frequencies come from
:mod:`ropekit.scaling`, the one source of truth):

* **The base bound** (Men et al., "Base of RoPE Bounds Context Length", arXiv 2405.14591, eq. 8): whether
  B_m(b) = Σ_i cos(m·θ_i) stays >= 0 for every m < L (:func:`~ropekit.theory.bound.max_context_length`, exact and
  cheap), the smallest base that does (:func:`~ropekit.theory.bound.smallest_feasible_base`), the robust base
  above which every base does (:func:`~ropekit.theory.bound.base_bound`, by default only where
  :func:`ropekit._costs.robust_by_default` allows), and a round base verified feasible.
* **Periods** (Liu et al., arXiv 2310.05209): the dims that complete a period within T, the critical dimension and
  the extrapolation limit.
* **Training-free methods** at s = L/T: linear interpolation (arXiv 2306.15595), NTK-aware (b·s^(d/(d−2))), YaRN
  (arXiv 2309.00071: which pairs it leaves alone, ramps or interpolates) and Llama 3 (arXiv 2407.21783: its
  three wavelength bands), each with the first distance where B_m of its frequencies goes negative.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ropekit._costs import ISLANDS_COST, ROBUST_DEFAULT, robust_by_default
from ropekit._validate import require_float, require_int, require_rotary_dim
from ropekit.config import RopeConfig
from ropekit.errors import InvalidArgument
from ropekit.scaling import frequencies
from ropekit.scaling.registry import SCALINGS, PairGroups, ScalingConfig, inv_freq
from ropekit.theory.bound import base_bound, max_context_length, smallest_feasible_base
from ropekit.theory.decay import first_negative_m
from ropekit.theory.wavelengths import critical_dimension, extrapolation_limit, periodic_pairs

#: mantissas of the round bases tried for ``suggested_base``.
_ROUND = (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0)


@dataclass(frozen=True)
class MethodPlan:
    """One training-free method at the target length.

    Attributes:
        name: the ``rope_type`` of the method (``linear``, ``ntk``, ``yarn``, ``llama3``: every registered method
            with a ``plan_order``).
        parameters: the method's config fields in Hugging Face naming, plus derived values (NTK's base, YaRN's
            correction dims, Llama 3's band edges: the method's ``plan_summary``).
        ratio: scaled / plain ``inv_freq`` per pair, shape ``(d/2,)``: 1 = kept, 1/s = interpolated.
        kept: pairs whose frequency is unchanged.
        interpolated: pairs whose frequency is divided by exactly s.
        blended: the other pairs (YaRN's ramp, Llama 3's smooth band, NTK's geometric spread).
        attention_factor: the method's attention factor A (cos and sin are multiplied by it).
        first_negative: the first m < target with B_m < 0 for the method's frequencies (Men et al.'s condition),
            or ``None`` when B_m >= 0 for every m < target.
        summary: one sentence saying what the method does to which pairs.
    """

    name: str
    parameters: dict[str, float | int]
    ratio: np.ndarray
    kept: list[int]
    interpolated: list[int]
    blended: list[int]
    attention_factor: float
    first_negative: int | None
    summary: str

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python form for JSON."""
        return {
            "name": self.name,
            "parameters": dict(self.parameters),
            "ratio": self.ratio.tolist(),
            "kept": list(self.kept),
            "interpolated": list(self.interpolated),
            "blended": list(self.blended),
            "attention_factor": self.attention_factor,
            "first_negative": self.first_negative,
            "clears_bound": self.first_negative is None,
            "summary": self.summary,
        }


@dataclass(frozen=True)
class Plan:
    """What the theory says about extending a model from ``train_length`` to ``target_length``.

    Attributes:
        head_dim: the attention head size.
        rotary_dim: the rotary dimension d (``head_dim`` unless only part of the head rotates).
        base: the model's base b.
        train_length: T, the length the model was trained at.
        target_length: L, the length wanted.
        factor: s = L / T.
        first_negative: the first m < L with B_m(b) < 0, or ``None`` when b keeps B_m >= 0 for every m < L.
        clears_bound: ``first_negative is None``: b is feasible for L (Men et al.).
        clears_bound_at_train: whether b was already feasible for T.
        smallest_base: the smallest feasible base for L.
        robust_base: every base >= this is feasible for L; ``None`` when not computed.
        islands: the number of feasible islands below ``robust_base``; ``None`` when not computed.
        suggested_base: a round base >= ``smallest_base`` verified feasible for L (every m < L checked).
        periodic_dims: dims whose wavelength fits inside T.
        critical_dimension: d_extra (Liu et al.).
        extrapolation_limit: T_extra in tokens (Liu et al.).
        methods: the training-free methods at s.
        why: the reasoning, one sentence each.
    """

    head_dim: int
    rotary_dim: int
    base: float
    train_length: int
    target_length: int
    factor: float
    first_negative: int | None
    clears_bound: bool
    clears_bound_at_train: bool
    smallest_base: float
    robust_base: float | None
    islands: int | None
    suggested_base: float
    periodic_dims: int
    critical_dimension: int
    extrapolation_limit: float
    methods: tuple[MethodPlan, ...] = ()
    why: tuple[str, ...] = field(default_factory=tuple)

    def method(self, name: str) -> MethodPlan:
        """The plan of one method by ``rope_type`` name."""
        for method in self.methods:
            if method.name == name:
                return method
        raise ValueError(f"name must be one of {[m.name for m in self.methods]}, got {name!r}")

    def lines(self) -> list[str]:
        """The plan in plain words: the verdict, the safe base, each method, and why."""
        verdict = (
            f"Base {self.base:.15g} clears the base bound for {self.target_length:,} tokens: B_m >= 0 for every m."
            if self.clears_bound
            else f"Base {self.base:.15g} is below the base bound for {self.target_length:,} tokens: B_m first goes "
            f"negative at m = {self.first_negative:,}."
        )
        safe = f"Smallest feasible base for {self.target_length:,} tokens: {self.smallest_base:.4g}"
        if self.robust_base is not None:
            safe += f"; every base >= {self.robust_base:.4g} is feasible ({self.islands} feasible islands below it)."
        else:
            reason = (
                "not requested"
                if robust_by_default(self.target_length, self.rotary_dim)
                else f"by default only where {ROBUST_DEFAULT}: the islands take {ISLANDS_COST}; robust=True forces it"
            )
            safe += (
                f"; the robust bound was not computed ({reason}), and bases just above the smallest can fail "
                "(the feasible set is fragmented)."
            )
        lines = [
            verdict,
            safe,
            f"For (continued) training at {self.target_length:,} tokens: base {self.suggested_base:,.0f} "
            "(a round number, verified feasible at every m).",
            f"Training-free, factor s = {self.target_length:,} / {self.train_length:,} = {self.factor:g}:",
        ]
        lines += [f"  {m.name}: {m.summary}" for m in self.methods]
        lines.append("Why:")
        lines += [f"  {sentence}" for sentence in self.why]
        return lines

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python form for JSON (field names as in this class)."""
        return {
            "head_dim": self.head_dim,
            "rotary_dim": self.rotary_dim,
            "base": self.base,
            "train_length": self.train_length,
            "target_length": self.target_length,
            "factor": self.factor,
            "first_negative": self.first_negative,
            "clears_bound": self.clears_bound,
            "clears_bound_at_train": self.clears_bound_at_train,
            "smallest_base": self.smallest_base,
            "robust_base": self.robust_base,
            "islands": self.islands,
            "suggested_base": self.suggested_base,
            "periodic_dims": self.periodic_dims,
            "critical_dimension": self.critical_dimension,
            "extrapolation_limit": self.extrapolation_limit,
            "methods": [method.to_dict() for method in self.methods],
            "why": list(self.why),
        }


def plan(
    head_dim: int,
    base: float,
    train_length: int,
    target_length: int,
    *,
    rotary_dim: int | None = None,
    robust: bool | None = None,
) -> Plan:
    """Say whether ``base`` clears the bound at ``target_length``, which base would, and how each method scales.

    Cost: :func:`smallest_feasible_base` at the target (seconds up to 32k, about 4 s at 1M on 2 idle cores) plus
    the robust bound and its islands when computed (seconds up to the default cut-off of
    :func:`ropekit._costs.robust_by_default`: 64k tokens at rotary dims up to 128).

    Args:
        head_dim: the attention head size (>= 4).
        base: the model's RoPE base b (> 1).
        train_length: T, the length the model was trained at (>= 1).
        target_length: L, the length wanted (>= ``train_length``).
        rotary_dim: how many leading dims rotate (even, 4 <= rotary_dim <= head_dim); ``None`` means all.
        robust: compute the robust bound and islands; ``None`` does so when
            :func:`ropekit._costs.robust_by_default` says so (L <= 65,536 and rotary dim <= 128).

    Returns:
        A :class:`Plan`; ``plan.lines()`` explains it, ``plan.to_dict()`` is JSON-ready.

    Raises:
        ValueError: naming the argument, for a head dim below 4, an odd rotary dim, a base <= 1, a non-positive
            length or a target shorter than the training length.

    Example:
        >>> p = plan(128, 10000.0, 1024, 4096, robust=False)
        >>> round(p.method("ntk").parameters["base"])
        40890
    """
    if robust is not None and not isinstance(robust, bool):
        raise TypeError(f"robust must be True, False or None (the default rule), got {robust!r}")
    head_dim, base, train_length, target_length, rotary_dim = _checked(
        head_dim, base, train_length, target_length, rotary_dim
    )
    dim = head_dim if rotary_dim is None else rotary_dim
    factor = target_length / train_length
    rope = RopeConfig(head_dim, base=base, rotary_dim=rotary_dim)
    first_negative = max_context_length(base, dim, limit=target_length)
    robust_base = islands = None
    if robust if robust is not None else robust_by_default(target_length, dim):
        bound = base_bound(target_length, dim)  # its walk to the first island is smallest_feasible_base's
        smallest, robust_base, islands = bound.smallest_base, bound.robust_base, len(bound.islands)
    else:
        smallest = smallest_feasible_base(target_length, dim)
    suggested = _round_feasible_base(smallest, dim, target_length, robust_base)
    wavelengths = 2 * np.pi / inv_freq(dim, base)
    periodic = 2 * int(periodic_pairs(wavelengths, train_length).sum())
    critical = critical_dimension(dim, base, train_length)
    limit = extrapolation_limit(dim, base, train_length)
    specs = _specs(factor, train_length)
    methods = tuple(_method(rope, spec, factor, target_length) for spec in specs)
    why = _why(rope, train_length, target_length, first_negative, (periodic, critical, limit), specs)
    return Plan(
        head_dim=head_dim,
        rotary_dim=dim,
        base=base,
        train_length=train_length,
        target_length=target_length,
        factor=factor,
        first_negative=first_negative,
        clears_bound=first_negative is None,
        clears_bound_at_train=first_negative is None or first_negative >= train_length,
        smallest_base=smallest,
        robust_base=robust_base,
        islands=islands,
        suggested_base=suggested,
        periodic_dims=periodic,
        critical_dimension=critical,
        extrapolation_limit=limit,
        methods=methods,
        why=tuple(why),
    )


def _checked(
    head_dim: int, base: float, train_length: int, target_length: int, rotary_dim: int | None
) -> tuple[int, float, int, int, int | None]:
    """``plan``'s arguments checked: ``(head_dim, base, train_length, target_length, rotary_dim)``.

    Raises:
        ValueError: naming the argument (see :func:`plan`).
    """
    head_dim = require_int("head_dim", head_dim, minimum=4)
    base = require_float("base", base, above=1.0)
    train_length = require_int("train_length", train_length, minimum=1)
    # Below 3 tokens the base bound is degenerate (every base > 1 keeps B_1 >= 0): no plan to make.
    target_length = require_int("target_length", target_length, minimum=3)
    if target_length < train_length:
        raise InvalidArgument(
            "target_length",
            target_length,
            allowed=f">= {train_length}",
            message=lambda n: (
                f"{n('target_length')} must be >= {n('train_length')} ({train_length}), got {target_length}; "
                "a plan extends the context"
            ),
        )
    if rotary_dim is None:
        require_rotary_dim("head_dim", head_dim, minimum=4)
    else:
        rotary_dim = require_rotary_dim("rotary_dim", rotary_dim, head_dim=head_dim, minimum=4)
    return head_dim, base, train_length, target_length, rotary_dim


def _why(
    rope: RopeConfig,
    train_length: int,
    target_length: int,
    first_negative: int | None,
    periods: tuple[int, int, float],
    specs: list[ScalingConfig],
) -> list[str]:
    """The plan's reasoning, one sentence each; ``periods`` is (periodic dims, critical dimension, extrapolation
    limit) at the training length."""
    periodic, critical, limit = periods
    base = rope.base
    return [
        f"{periodic} of {rope.dim} rotary dims complete a full period within the {train_length:,} training tokens; "
        f"the critical dimension is d_extra = {critical} and the extrapolation limit T_extra = 2π·b^(d_extra/d) ≈ "
        f"{limit:,.0f} tokens (Liu et al., arXiv 2310.05209): "
        + (
            f"the target {target_length:,} lies beyond it, so the slow pairs would meet angles never seen in "
            "training without rescaling."
            if target_length > limit
            else f"the target {target_length:,} lies within it."
        ),
        "B_m(b) = Σ_i cos(m·θ_i) is the expected advantage of a similar key over a random one at distance m "
        "(Men et al., arXiv 2405.14591, Theorem 1); where it is negative, attention cannot on average favour "
        "the similar token, so a base is feasible for L when B_m >= 0 for every m < L.",
        (
            f"Base {base:.15g} was already feasible for the training length {train_length:,}."
            if first_negative is None or first_negative >= train_length
            else f"Base {base:.15g} is not feasible even for the training length {train_length:,} "
            f"(B_m < 0 from m = {first_negative:,}): the model was trained below the bound."
        ),
        "B is not monotone in b: the feasible bases form islands, so 'smallest feasible' is not 'every larger base'; "
        "check a chosen base with max_context_length(base, rotary_dim).",
        *[spec.plan_why for spec in specs if spec.plan_why],
    ]


def _specs(factor: float, train_length: int) -> list[ScalingConfig]:
    """The training-free methods at factor s (every registered method with a ``plan_order``, in that order), built
    from s and the original length T with their published defaults."""
    planned = sorted(
        (method.config_class for method in SCALINGS.values() if method.config_class.plan_order is not None),
        key=lambda config_class: config_class.plan_order,
    )
    return [config_class.from_options(factor=factor, original_length=train_length) for config_class in planned]


def _method(rope: RopeConfig, spec: ScalingConfig, factor: float, target_length: int) -> MethodPlan:
    """Frequencies of one method from the registry, grouped into kept / interpolated / blended pairs."""
    plain = inv_freq(rope.dim, rope.base)
    freqs = frequencies(rope.replace(scaling=spec))
    ratio = freqs.inv_freq / plain  # (d/2,)
    kept = np.isclose(ratio, 1.0, rtol=1e-12, atol=0.0)
    interpolated = np.isclose(ratio, 1.0 / factor, rtol=1e-12, atol=0.0) & ~kept
    blended = ~kept & ~interpolated
    derived, summary = spec.plan_summary(rope, freqs, PairGroups(kept, interpolated, blended))
    parameters: dict[str, float | int] = {**spec.hf_params(), **derived}
    first = first_negative_m(freqs.inv_freq, target_length)
    summary += (
        f"; B_m >= 0 for every m < {target_length:,}"
        if first is None
        else f"; B_m first goes negative at m = {first:,}"
    )
    return MethodPlan(
        name=spec.rope_type,
        parameters=parameters,
        ratio=ratio,
        kept=np.flatnonzero(kept).tolist(),
        interpolated=np.flatnonzero(interpolated).tolist(),
        blended=np.flatnonzero(blended).tolist(),
        attention_factor=float(freqs.attention_factor),
        first_negative=first,
        summary=summary,
    )


def _round_feasible_base(smallest: float, rotary_dim: int, length: int, robust: float | None) -> float:
    """The first round base (1, 1.2, 1.5, 2, … × 10^k) >= ``smallest`` with B_m >= 0 for every m < ``length``.

    Falls back to ``robust`` (or the smallest base itself) if none of the next 40 round numbers is feasible.
    """
    exponent = math.floor(math.log10(smallest))
    candidates = sorted(
        mantissa * 10.0**k for k in (exponent, exponent + 1, exponent + 2, exponent + 3) for mantissa in _ROUND
    )
    for candidate in [c for c in candidates if c >= smallest][:40]:
        if max_context_length(candidate, rotary_dim, limit=length) is None:
            return candidate
    return robust if robust is not None else smallest
