"""Context-extension methods, one file each, registered by their Hugging Face ``rope_type`` name.

Importing this package imports every module in it that registers a method (``SCALINGS.load()``). Adding a method is
one new file here and nothing else (the minimal one is in :mod:`ropekit.scaling.registry`'s docstring): a frozen
:class:`~ropekit.scaling.base.ScalingConfig` subclass and its frequency function decorated with
:func:`~ropekit.scaling.registry.register_scaling`. Everything outside this
package reaches a method only through the registry and its config class's hooks, so the new method is at once in
the CLI (``--scaling NAME``, with ``--factor``, ``--original-length``, ``--base`` and ``--param``), in
transformers dicts (:mod:`ropekit.hf_format`), in evaluation sweeps and in plans:

* ``from_options(factor=, original_length=, base=, native=, **params)``: the one constructor from user-facing
  options (the default fills the fields of those names and names the missing ones);
* ``from_hf``/``to_hf``/``hf_required``/``hf_rotary_dim``/``hf_model_keys``: its transformers keys, with each
  transformers quirk documented once, in the method's own docstring;
* ``depends_on_seq_len`` and ``recompute_length``: how its frequencies follow the sequence length;
* ``plan_order``, ``plan_why`` and ``plan_summary``: whether and how it appears in :func:`ropekit.theory.plan`;
* ``hf_native``/``is_hf_native``, ``base_change``, ``declared_base``, ``length_switch`` and the ``stated_*`` /
  ``frozen_length`` readers: the one export decision (:func:`~ropekit.scaling.static_form.static_form`) that the
  transformers, GGUF and engine writers translate;
* ``extend_preference`` and ``eval_order``: whether ``extend --plan`` may pick it and whether an evaluation runs
  it by default (:func:`~ropekit.scaling.registry.ranked_scalings`);
* ``describe``: its JSON description in evaluation results.
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
    MissingParameters,
    ScalingConfig,
    ScalingMethod,
    frequencies,
    get_scaling,
    inv_freq,
    list_scalings,
    make_scaling,
    ranked_scalings,
    register_scaling,
)
from ropekit.scaling.yarn import YarnScaling

SCALINGS.load()  # a method file that no line above imports registers itself now

__all__ = [
    "SCALINGS",
    "BaseChange",
    "DefaultScaling",
    "DynamicScaling",
    "Frequencies",
    "LinearScaling",
    "Llama3Scaling",
    "LongRopeScaling",
    "MissingParameters",
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
    "ranked_scalings",
    "register_scaling",
]
