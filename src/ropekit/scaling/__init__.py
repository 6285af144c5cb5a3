"""Context-extension methods, one file each, registered by their Hugging Face ``rope_type`` name.

Importing this package registers every built-in method. Add one with a frozen
:class:`~ropekit.scaling.registry.ScalingConfig` subclass and a function decorated with
:func:`~ropekit.scaling.registry.register_scaling`.
"""

from ropekit.scaling.base_change import BaseChange
from ropekit.scaling.default import DefaultScaling
from ropekit.scaling.dynamic import DynamicScaling
from ropekit.scaling.linear import LinearScaling
from ropekit.scaling.llama3 import Llama3Scaling
from ropekit.scaling.longrope import LongRopeScaling
from ropekit.scaling.ntk import NTKScaling, ntk_base
from ropekit.scaling.proportional import ProportionalScaling
from ropekit.scaling.registry import (
    SCALINGS,
    Frequencies,
    ScalingConfig,
    ScalingMethod,
    frequencies,
    get_scaling,
    inv_freq,
    list_scalings,
    make_scaling,
    register_scaling,
)
from ropekit.scaling.yarn import YarnScaling

__all__ = [
    "SCALINGS",
    "BaseChange",
    "DefaultScaling",
    "DynamicScaling",
    "Frequencies",
    "LinearScaling",
    "Llama3Scaling",
    "LongRopeScaling",
    "NTKScaling",
    "ProportionalScaling",
    "ScalingConfig",
    "ScalingMethod",
    "YarnScaling",
    "frequencies",
    "get_scaling",
    "inv_freq",
    "list_scalings",
    "make_scaling",
    "ntk_base",
    "register_scaling",
]
