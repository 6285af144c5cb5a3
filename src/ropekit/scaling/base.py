"""The base class of every scaling method's config: what a method declares, and the defaults of what it may.

A method must declare only its ``rope_type`` and its fields (HF-named, with defaults where transformers has them);
every other hook below has a default that suits a method whose fields map one to one onto transformers keys and
whose frequencies do not depend on the length. The hooks are grouped: identity (building and checking the config),
running (the sequence length), the transformers codec, the export facts, and planning. The frequency function and
the registration are in :mod:`ropekit.scaling.registry`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ropekit._validate import parse_value
from ropekit.errors import UnknownParameters
from ropekit.scaling._pairs import PairGroups, pair_ranges, require_hf_keys

if TYPE_CHECKING:
    from ropekit.config import RopeConfig
    from ropekit.scaling.registry import Frequencies


class MissingParameters(ValueError, LookupError):
    """A method needs parameters that the options given do not supply (e.g. LongRoPE's searched factor lists).

    A ``ValueError`` for callers that build one config, and a ``LookupError`` for sweeps that skip methods they
    cannot build.

    Attributes:
        rope_type: the method.
        missing: the config fields that are missing, in declaration order.
    """

    def __init__(self, rope_type: str, missing: list[str], hint: str = "") -> None:
        self.rope_type, self.missing = rope_type, list(missing)
        super().__init__(f"{rope_type} needs parameter(s) {self.missing}" + (f" ({hint})" if hint else ""))


@dataclass(frozen=True, kw_only=True)
class ScalingConfig:
    """Base class of every method's config. Subclasses set ``rope_type`` and add HF-named fields.

    Everything code outside :mod:`ropekit.scaling` needs to know about a method is a hook here, so adding a
    method is one new file: build it from user-facing options (:meth:`from_options`), read a field's text from the
    command line (:meth:`parse_param`), read and write its transformers parameters (:meth:`from_hf`,
    :meth:`to_hf`, :meth:`hf_rotary_dim`), say when its frequencies follow the sequence length
    (:meth:`recompute_length`), state the facts an export reads (:meth:`declared_base`, :meth:`length_switch`) and
    describe itself in a plan (``plan_order``, ``plan_why``, :meth:`plan_summary`). The defaults suit a method
    whose fields map one to one onto transformers keys and whose frequencies do not depend on the length.
    """

    # -- identity: the name, the fields, building and checking -------------------------------------------------

    rope_type: ClassVar[str] = ""

    @classmethod
    def from_options(
        cls,
        *,
        factor: float | None = None,
        original_length: int | None = None,
        base: float | None = None,
        native: ScalingConfig | None = None,
        **params: Any,
    ) -> ScalingConfig:
        """Build this method from the options a user gives (CLI, evaluation sweep, plan).

        Each option fills the field of the same meaning when the method has one and ``params`` does not set it;
        methods without such a field ignore it.

        Args:
            factor: the scaling factor s (fills ``factor``).
            original_length: L0, the length the model was trained at (fills ``original_max_position_embeddings``).
            base: a RoPE base the user asked for (fills ``base``, e.g. of the ``base`` method).
            native: the model's own scaling config; methods whose parameters only a trained model has (LongRoPE's
                searched factors) take them from it when it is of the same method.
            **params: further fields by name (e.g. ``beta_fast``); ``None`` values are ignored.

        Raises:
            MissingParameters: a required field is not given (a ``ValueError`` and a ``LookupError``).
            ValueError: an unknown field or a value out of range.
        """
        values = {key: value for key, value in params.items() if value is not None}
        names = {f.name for f in dataclasses.fields(cls) if f.init}
        for key, value in (("factor", factor), ("original_max_position_embeddings", original_length), ("base", base)):
            if key in names and value is not None:
                values.setdefault(key, value)
        missing = [
            f.name
            for f in dataclasses.fields(cls)
            if f.init
            and f.name not in values
            and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
        ]
        if missing:
            raise MissingParameters(cls.rope_type, missing)
        return cls.from_params(values)

    @classmethod
    def parse_param(cls, name: str, text: str) -> Any:
        """A field's value from its text in ``--param NAME=VALUE`` (:func:`ropekit._validate.parse_value`: a list of
        numbers, ``true``/``false``, an integer, a number, else the text); a method whose field reads otherwise
        overrides this. The value is checked when the config is built."""
        return parse_value(name, text)

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> ScalingConfig:
        """Build from fields by name, refusing unknown names (listing the allowed ones)."""
        known = {f.name for f in dataclasses.fields(cls) if f.init}
        unknown = sorted(set(params) - known)
        if unknown:
            message = f"unknown parameter(s) {unknown} for rope_type {cls.rope_type!r}; allowed: {sorted(known)}"
            raise UnknownParameters(unknown, sorted(known), message)
        return cls(**params)

    def check_rope(self, rope: RopeConfig) -> None:
        """Raise ``ValueError`` if this method cannot serve ``rope`` (e.g. factor lists of the wrong length)."""

    def describe(self) -> dict[str, Any]:
        """JSON-ready description: ``{"rope_type": ..., **fields}``, long per-pair lists as ``"<n values>"``."""
        fields = dataclasses.asdict(self)
        for key, value in fields.items():
            if isinstance(value, tuple | list):
                fields[key] = f"<{len(value)} values>"
        return {"rope_type": self.rope_type, **fields}

    # -- running: the sequence length, the softmax scale -------------------------------------------------------

    #: True when the frequencies depend on the current sequence length.
    depends_on_seq_len: ClassVar[bool] = False

    def recompute_length(self, computed_for: int | None, seq_len: int) -> int | None:
        """The length to recompute the frequencies for, or ``None`` to keep the current ones.

        Args:
            computed_for: the length the current frequencies were computed for (``None``: at construction).
            seq_len: the length the next call needs (``max(position) + 1``).
        """
        return None

    def softmax_mscale(self) -> float:
        """The factor DeepSeek-V2-style attention multiplies its softmax scale by for this scaling (1: none)."""
        return 1.0

    # -- transformers codec: reading and writing its rope dict -------------------------------------------------

    #: keys transformers requires in the rope dict (beyond ``rope_type``); a missing or null one raises.
    hf_required: ClassVar[tuple[str, ...]] = ()
    #: fields that only ropekit understands; ``to_hf_dict`` refuses non-default values of these.
    ropekit_only: ClassVar[tuple[str, ...]] = ()
    #: True when ``to_hf_dict`` writes ``partial_rotary_factor`` even for a full rotary dim.
    hf_always_writes_partial: ClassVar[bool] = False
    #: True when transformers computes this ``rope_type`` itself (see :meth:`is_hf_native`).
    hf_native: ClassVar[bool] = False

    @classmethod
    def from_hf(cls, params: dict[str, Any], model: dict[str, Any], *, name: str) -> ScalingConfig | None:
        """Build from a transformers rope dict (``rope_type``, ``rope_theta``, ``partial_rotary_factor`` removed).

        Args:
            params: the rest of the rope dict (``rope_parameters`` or the 4.x ``rope_scaling``).
            model: the whole config dict (for model-level keys such as ``max_position_embeddings``).
            name: the rope type as the dict spells it (an alias such as ``su`` included), for messages.

        Returns:
            The config, or ``None`` for plain RoPE.

        Raises:
            ValueError: a required key is missing or null, a key is unknown, or a value is out of range.
        """
        require_hf_keys(params, cls.hf_required, name)
        return cls.from_params({key: value for key, value in params.items() if value is not None})

    def to_hf(self, rope: RopeConfig) -> tuple[str, float, dict[str, Any]]:
        """``(rope_type, rope_theta, parameters)`` of the transformers dict that describes ``rope`` (methods
        transformers lacks: an equivalent ``default`` with a changed base where one exists)."""
        return self.rope_type, rope.base, self.hf_params()

    def hf_model_keys(self, max_position_embeddings: int | None) -> dict[str, Any]:
        """Model-level keys of a config.json for this method, given the context length to declare (or ``None``)."""
        return {} if max_position_embeddings is None else {"max_position_embeddings": max_position_embeddings}

    @classmethod
    def hf_rotary_dim(cls, head_dim: int, partial_rotary_factor: float) -> int:
        """The rotary dim transformers derives: ``int(head_dim * partial_rotary_factor)``, a truncation.

        transformers quirk: 56/110 gives 55, not 56 (``to_hf_dict`` writes a factor that truncates back to
        the exact rotary dim).
        """
        return int(head_dim * partial_rotary_factor)

    def hf_params(self) -> dict[str, Any]:
        """Fields in transformers' naming, without ``None`` values and ropekit-only options."""
        params = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name in self.ropekit_only:
                if value != field.default:
                    raise ValueError(
                        f"{self.rope_type}.{field.name}={value!r} is a ropekit-only option that transformers "
                        "cannot express; leave it at its default to export"
                    )
                continue
            if value is not None:
                params[field.name] = list(value) if isinstance(value, tuple) else value
        return params

    def is_hf_native(self) -> bool:
        """True when transformers computes this config itself: a ``rope_type`` it names (``hf_native``) with every
        ropekit-only field at its default, so the same frequencies at every length."""
        defaults = {f.name: f.default for f in dataclasses.fields(self)}
        return self.hf_native and all(getattr(self, name) == defaults[name] for name in self.ropekit_only)

    # -- export facts (what :func:`~ropekit.scaling.static_form.static_form` reads) ----------------------------

    #: True when the method is plain RoPE at another base by definition (``to_hf`` writes ``default`` with it).
    base_change: ClassVar[bool] = False

    def stated_factor(self) -> float | None:
        """The scaling factor s this config carries (its ``factor`` field), or ``None`` for methods without one."""
        return self._field("factor")

    def stated_original_length(self) -> int | None:
        """L0 this config carries (its ``original_max_position_embeddings`` field), or ``None``."""
        return self._field("original_max_position_embeddings")

    def frozen_length(self) -> int | None:
        """The length a length-following method is frozen at (its ``fixed_seq_len`` field), or ``None``."""
        return self._field("fixed_seq_len")

    def declared_base(self, rope: RopeConfig) -> float | None:
        """The base b' when this config is plain RoPE at another base by definition (exactly, not recovered from
        the frequencies), else ``None``. The default: the ``rope_theta`` of :meth:`to_hf` for ``base_change``
        methods."""
        return float(self.to_hf(rope)[1]) if self.base_change else None

    def length_switch(self) -> tuple[tuple[int, ...], str] | None:
        """``(lengths, why)`` when the frequencies change with the served length (the last length before each
        change, and one phrase saying how), ``None`` when they are the same at every length."""
        return None

    def _field(self, name: str) -> Any:
        return getattr(self, name) if name in {f.name for f in dataclasses.fields(self)} else None

    # -- planning: plans, extend --plan and evaluations --------------------------------------------------------

    #: position among the training-free methods of :func:`ropekit.theory.plan`; ``None``: not in plans.
    plan_order: ClassVar[float | None] = None
    #: one sentence for the plan's "why": what the method does.
    plan_why: ClassVar[str] = ""
    #: rank among the methods ``extend --plan`` may pick (lower first: best measured first); ``None``: never.
    extend_preference: ClassVar[float | None] = None
    #: position in an evaluation's default ``--methods``; ``None``: evaluated only when named.
    eval_order: ClassVar[float | None] = None

    def plan_summary(self, rope: RopeConfig, freqs: Frequencies, groups: PairGroups) -> tuple[dict[str, Any], str]:
        """Derived values for the plan's parameters, and one phrase saying what the method does to which pairs."""
        summary = (
            f"pairs {pair_ranges(groups.kept)} kept, {pair_ranges(groups.interpolated)} divided by s, "
            f"{pair_ranges(groups.blended)} changed otherwise; attention factor {freqs.attention_factor:.4g}"
        )
        return {}, summary
