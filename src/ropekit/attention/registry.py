"""The registry of training-free attention methods: which relative position each (query, key) pair sees.

A method is one frozen config dataclass (an :class:`AttentionConfig`) whose :meth:`~AttentionConfig.regions`
split the causal pairs ``j <= i`` into disjoint regions. In each region the score of query ``i`` and key ``j`` is
``q · k`` with the query rotated at position ``q_position(i)`` and the key at ``k_position(j)``, so the relative
position RoPE sees is ``q_position(i) − k_position(j)``; a pair in no region is not attended. Plain attention is
one region, every pair, ``q_position(i) = i`` and ``k_position(j) = j``.

This module does not import torch: positions are computed with ``//``, ``%``, ``+`` and ``.clamp`` on whatever
integer tensors the attention core passes (see :mod:`ropekit.attention.core`). Dispatch is only ever
``ATTENTIONS[name]`` (a :class:`~ropekit._registry.Registry`).

How to add a method: one new file in this package (``src/ropekit/attention/near_only.py``), nothing else. Importing
the package imports every module that uses ``@register``, so the method is at once in :func:`get_attention`,
``--methods`` (alone or as ``yarn+near_only``), ``--param`` and their ``--help`` (read from the ``name`` line)::

    @register
    @dataclass(frozen=True, kw_only=True)
    class NearOnly(AttentionConfig):
        name = "near_only"  # attend only to the ``window`` nearest keys, at their true positions
        window: int

        def __post_init__(self) -> None:
            positive_int("window", self.window)

        @classmethod
        def defaults(cls, train_length: int, length: int) -> dict[str, Any]:
            return {"window": train_length}

        def regions(self) -> tuple[Region, ...]:
            return (band(self.window),)

        def max_relative(self, length: int) -> float:
            return float(min(length, self.window) - 1)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

from ropekit._registry import Registry
from ropekit._validate import parse_number, require_float, require_int
from ropekit.errors import UnknownParameters

__all__ = ["ATTENTIONS", "AttentionConfig", "Region", "get_attention", "list_attentions", "register"]


def _identity(positions: Any) -> Any:
    return positions


def _no_full_part(first: int, last: int) -> tuple[int, int]:
    return (0, 0)


class Region(NamedTuple):
    """One part of the causal pairs with its own position re-indexing.

    Attributes:
        name: what the paper calls it (``neighbour``, ``grouped``, ``intra``, ...).
        allowed: ``(i, j) -> bool`` for broadcast integer tensors ``i`` (queries, a column) and ``j`` (keys, a
            row); the core applies causality (``j <= i``) itself.
        keys: ``(first, last) -> (lo, hi)``: the key indices any query in ``[first, last]`` may use in this region
            (a superset; it only saves work).
        q_position: query index → the position its query is rotated at (float64 tensors; fractional for leaky
            ReRoPE).
        k_position: key index → the position its key is rotated at.
        full: ``(first, last) -> (lo, hi)``: keys that every query in ``[first, last]`` may use (a subset, causal
            included: ``hi <= first + 1``); they need no mask, so the core runs them through a fused kernel.
    """

    name: str
    allowed: Callable[[Any, Any], Any]
    keys: Callable[[int, int], tuple[int, int]]
    q_position: Callable[[Any], Any] = _identity
    k_position: Callable[[Any], Any] = _identity
    full: Callable[[int, int], tuple[int, int]] = _no_full_part


@dataclass(frozen=True, kw_only=True)
class AttentionConfig:
    """Base class of every attention method's config; subclasses set ``name`` and add their parameters.

    Hooks: :meth:`regions` (the definition), :meth:`from_options` (parameters derived from the training length
    and the length evaluated, for the ones not given), :meth:`parse_param` (a parameter's text on the command line)
    and :meth:`describe`.
    """

    name: ClassVar[str] = ""
    #: the paper, for docs and reports
    paper: ClassVar[str] = ""

    def regions(self) -> tuple[Region, ...]:
        raise NotImplementedError

    @classmethod
    def parameters(cls) -> tuple[str, ...]:
        """The config's field names (what ``--param`` may set)."""
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def parse_param(cls, name: str, text: str) -> int | float:
        """A parameter's value from its text in ``--param NAME=VALUE``: a number (integers stay integers); the
        value is checked when the config is built."""
        return parse_number(name, text)

    @classmethod
    def defaults(cls, train_length: int, length: int) -> dict[str, Any]:
        """Parameters the method derives from the training length and the length evaluated."""
        raise NotImplementedError

    @classmethod
    def from_options(cls, *, train_length: int, length: int, **params: Any) -> AttentionConfig:
        """The config at ``length`` for a model trained at ``train_length``; ``params`` win over the defaults.

        Raises:
            ValueError: an unknown parameter (named, with the allowed ones) or an out-of-range value.
        """
        require_int("train_length", train_length, minimum=2)
        require_int("length", length, minimum=1)
        unknown = sorted(set(params) - set(cls.parameters()))
        if unknown:
            message = f"{cls.name} has no parameter(s) {unknown}; allowed: {list(cls.parameters())}"
            raise UnknownParameters(unknown, list(cls.parameters()), message)
        merged = {**cls.defaults(train_length, max(length, 1)), **params}
        return cls(**{k: v for k, v in merged.items() if k in cls.parameters()})

    def describe(self) -> dict[str, Any]:
        """JSON-ready ``{"attention": name, **parameters}``."""
        return {"attention": self.name, **dataclasses.asdict(self)}

    def max_relative(self, length: int) -> float:
        """The largest relative position any pair of a ``length``-token sequence sees (what must stay trained)."""
        raise NotImplementedError


def band(window: int) -> Region:
    """The pairs closer than ``window`` (``i − j < window``), at their true positions."""
    return Region(
        "neighbour",
        lambda i, j: i - j < window,
        lambda first, last: (max(0, first - window + 1), last + 1),
        full=lambda first, last: (max(0, last - window + 1), first + 1),
    )


def far(window: int) -> dict[str, Any]:
    """``allowed``/``keys``/``full`` of the pairs at least ``window`` apart (``i − j >= window``)."""
    return {
        "allowed": lambda i, j: i - j >= window,
        "keys": lambda first, last: (0, max(0, last - window + 1)),
        "full": lambda first, last: (0, max(0, first - window + 1)),
    }


def positive_int(name: str, value: object) -> int:
    """A parameter that must be an integer >= 1 (a ``ValueError`` naming it otherwise)."""
    return require_int(name, value, minimum=1)


def positive_float(name: str, value: object, *, at_least: float = 1.0) -> float:
    """A finite parameter >= ``at_least``."""
    return require_float(name, value, at_least=at_least)


#: name → config class, in registration order; filled by :func:`register` as each method's module is imported
ATTENTIONS: Registry[type[AttentionConfig]] = Registry("attention method", home="ropekit.attention", marker="@register")


def register(cls: type[AttentionConfig]) -> type[AttentionConfig]:
    """Class decorator: add a method to :data:`ATTENTIONS` under ``cls.name``."""
    return ATTENTIONS.register(cls.name, cls)


def list_attentions() -> tuple[str, ...]:
    """The registered method names, sorted."""
    return tuple(sorted(ATTENTIONS.names()))


def get_attention(name: str) -> type[AttentionConfig]:
    """The config class of ``name``.

    Raises:
        UnknownName: unknown name (a ``ValueError``; the message lists the valid ones).
    """
    return ATTENTIONS.get(name)
