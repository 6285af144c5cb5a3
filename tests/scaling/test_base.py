"""The base class of the methods' configs lives in its own module; the registry re-exports it."""

from __future__ import annotations

import dataclasses

import pytest

from ropekit.scaling import base, registry


def test_the_registry_and_every_method_share_one_base_class():
    assert registry.ScalingConfig is base.ScalingConfig and registry.MissingParameters is base.MissingParameters
    for name, method in registry.SCALINGS.items():
        assert issubclass(method.config_class, base.ScalingConfig), name
        assert method.config_class.rope_type == name


def test_frequencies_refuse_a_look_alike_of_ropeconfig():
    @dataclasses.dataclass
    class RopeConfig:  # the same name and fields, not ropekit's class
        dim: int = 8
        base: float = 10000.0
        scaling: None = None

    with pytest.raises(TypeError, match="rope must be a RopeConfig, got RopeConfig"):
        registry.frequencies(RopeConfig())
