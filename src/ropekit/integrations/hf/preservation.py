"""Whether the model ``extend`` writes is the source model with the requested scaling and nothing else: measured
from transformers' own forward, not from ropekit's reading of either config.

The source's and the written ``config.json`` are each built as a tiny random model of transformers' own classes
(:mod:`~ropekit.integrations.hf.tiny_model`: the same head size, rotary layout and layer types, the same weights). One
short forward of each records, per layer, the rotation its modeling file applies
(:mod:`~ropekit.integrations.hf.rotation_capture`), replayed on basis vectors at positions 0, 1 and n − 1 of a
forward of n tokens: the written model at n = :data:`SERVED`, the source within its own length (n = :data:`SERVED` or
its ``max_position_embeddings`` where that is shorter), since beyond it transformers runs a length-following RoPE
there (its ``dynamic`` update recomputes Hunyuan's NTK-alpha as dynamic NTK from ``rope_theta``) that is not the RoPE
the source was trained with. From those matrices alone come each layer's rotated dimensions, its pairs (the
dimension each one turns with), each pair's frequency θ (the angle at position 1: θ ≤ 1 rad, so it is never wrapped)
and its amplitude A (the rotation at position 0 is A·I on the rotated dims: the attention factor on cos and sin).
Each layer is judged by the rope-dict key its rotary call was given in the forward (its layer type, or DeepSeek-V4's
``main``/``compress``, which its model class chooses per layer), else by its layer type. Then, layer by layer, the
written model must:

* rotate in the same layers (a NoPE layer stays NoPE), the same dimensions in the same pairs;
* leave the layers the request does not scale (sliding layers whose own base the model keeps, DeepSeek-V4's ``main``
  layers) as the source has them, their frequencies and their amplitude;
* in the layers it scales, turn its highest- and lowest-frequency pairs as the requested method turns them from the
  unscaled frequencies u: linear, YaRN, Llama 3 and NTK slow the lowest pair by exactly s (where its wavelength is
  beyond the original length); YaRN, Llama 3 and NTK keep the highest one. u is the source layer's own measured
  frequencies where they are plain RoPE (θ₀ = 1 and a constant ratio: a base change such as NTK-alpha included),
  else plain RoPE at the base transformers' config class reads for the layer, over the measured pairs;
* in those layers, have the method's amplitude (YaRN's 0.1·ln s + 1; 1 for linear, Llama 3 and NTK), or the
  source's measured one where the source's own rule fixes it (:mod:`~ropekit.integrations.hf.amplitude_rule`:
  DeepSeek-V4's ``attention_factor`` 1.0 on ``compress``, kept by a YaRN written there).

The method's own ratios at those two pairs and its amplitude come from ropekit's float64 frequencies of the method on
the measured geometry (its formula, not its reading of a config).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: the length the rotation is replayed at; positions 0, 1 and SERVED − 1 are read
SERVED = 1024
#: an entry of the rotation above this (relative to the pair's amplitude) turns a dimension: a dimension that passes
#: through has exact zeros there, and the slowest pair of a long-context model turns by ~1e-8 rad at SERVED − 1
TURNS = 1e-12
#: relative tolerance on frequencies (transformers forms angles in float32)
RTOL = 1e-4


@dataclass(frozen=True)
class LayerRope:
    """One layer's rotation as measured: its pairs (each ``(dim, partner)``, ``dim < partner``, in the input's
    coordinates, sorted), each pair's frequency in radians per token, the ``layer_type`` its rotary call was given
    (:meth:`~ropekit.integrations.hf.rotation_capture.Rotation.rope_key`), and its amplitude A (the rotation at
    position 0 is A·I on the rotated dims: the attention factor on cos and sin)."""

    pairs: tuple[tuple[int, int], ...]
    freqs: np.ndarray
    rope_key: str | None = None
    amplitude: float = 1.0

    def describe(self) -> str:
        dims = sorted(d for pair in self.pairs for d in pair)
        gap = self.pairs[0][1] - self.pairs[0][0] if self.pairs else 0
        kind = "interleaved pairs" if gap == 1 and len(self.pairs) > 1 else f"pairs (i, i + {gap})"
        return f"{len(dims)} dims ({_ranges(dims)}) in {kind}"

    def by_frequency(self) -> np.ndarray:
        """The frequencies from the highest to the lowest."""
        return np.sort(self.freqs)[::-1]


def _ranges(dims: list[int]) -> str:
    spans, start = [], None
    for i, d in enumerate(dims):
        start = d if start is None else start
        if i + 1 == len(dims) or dims[i + 1] != d + 1:
            spans.append(f"{start}-{d}" if d != start else str(d))
            start = None
    return ", ".join(spans)


def measure(rotation: Any, served: int = SERVED) -> LayerRope:
    """The pairs and frequencies of one recorded :class:`~ropekit.integrations.hf.rotation_capture.Rotation`, replayed
    in a forward of ``served`` tokens."""
    matrices = rotation.matrices(served, np.array([0, 1, served - 1]))  # (3, W, W): row j is the image of e_j
    zero = matrices[0]
    norms = np.linalg.norm(zero, axis=1)
    inner = (matrices @ zero.T) / norms[None, None, :] / norms[None, :, None]  # C[p, j, k], the input's coordinates
    off = np.abs(inner).max(axis=0)  # (W, W): the largest entry over the positions
    np.fill_diagonal(off, 0.0)
    dims = np.arange(off.shape[0])
    partner = np.argmax(off, axis=1)
    turning = off[dims, partner] > TURNS
    odd = turning & (partner[partner] != dims)
    if odd.any():
        j = int(np.flatnonzero(odd)[0])
        raise ValueError(f"dimension {j} turns with {partner[j]}, but {partner[j]} with {partner[partner[j]]}")
    first = dims[turning & (partner > dims)]
    pairs = [(int(j), int(partner[j])) for j in first]
    freqs = np.arctan2(np.abs(inner[1, first, partner[first]]), inner[1, first, first])
    amplitude = float(np.mean(norms[turning])) if turning.any() else 1.0  # |R(0) e_j| = A on the rotated dims
    return LayerRope(tuple(pairs), np.asarray(freqs), rotation.rope_key(), amplitude)


#: recent measurements, keyed by the config's JSON text, the layer count and the served length: a source extended with
#: several methods is measured once (a measurement depends on nothing else: the tiny model's weights are drawn from a
#: fixed seed)
_MEASURED: dict[tuple[str, int, int], list[LayerRope | None]] = {}
#: how many measurements :data:`_MEASURED` keeps
KEPT_MEASUREMENTS = 4


def measured_layers(config: Mapping[str, Any], layers: int, served: int = SERVED) -> list[LayerRope | None]:
    """Per layer of the tiny model of ``config`` (:func:`~ropekit.integrations.hf.tiny_model.tiny_model`), its
    measured rotation in a forward of ``served`` tokens; ``None`` for a layer that rotates nothing (NoPE). Measured
    once per config text, layer count and length (the list is shared: its entries are frozen)."""
    import json

    key = (json.dumps(config, sort_keys=True, default=repr), layers, served)
    if key not in _MEASURED:
        while len(_MEASURED) >= KEPT_MEASUREMENTS:
            del _MEASURED[next(iter(_MEASURED))]
        _MEASURED[key] = _measure_layers(config, layers, served)
    return list(_MEASURED[key])


def own_length(read: Any) -> int:
    """The length the source is measured at: :data:`SERVED`, or its ``max_position_embeddings`` (read by
    transformers' config class ``read``) where that is shorter (at least 3 tokens: positions 0, 1 and a later one)."""
    length = getattr(read, "max_position_embeddings", None)
    return max(3, min(SERVED, int(length))) if isinstance(length, int) and length > 0 else SERVED


def _measure_layers(config: Mapping[str, Any], layers: int, served: int) -> list[LayerRope | None]:
    from ropekit.integrations.hf.rotation_capture import attention_of, capture_layers, layers_of
    from ropekit.integrations.hf.tiny_model import tiny_model

    model = tiny_model(config, layers)
    _, decoder_layers = layers_of(model)
    attentions = [attention_of(layer) for layer in decoder_layers]
    try:
        rotations = capture_layers(model, attentions)
    except ValueError:
        raise
    except Exception as error:  # transformers' own forward fails on this config (sizes its class does not derive)
        why = " ".join(str(error).split())[:160]
        raise ValueError(
            f"transformers' forward of {type(model).__name__} fails: {type(error).__name__}: {why}"
        ) from None
    return [None if rotation is None else measure(rotation, served) for rotation in rotations]


@dataclass(frozen=True)
class Request:
    """What ``extend`` was asked for: the method (``None``: plain RoPE), the layer types it scales (``None``: every
    layer), and the original length its factor is relative to."""

    scaling: Any
    layer_types: Sequence[str] | None
    original_length: int


def check_preserved(source: Mapping[str, Any], written: Mapping[str, Any], request: Request) -> str | None:
    """Raise ``ValueError`` (one line naming the layer and what differs) unless the model of ``written`` is the
    model of ``source`` with ``request``'s scaling (module docstring); return a note where it cannot be checked
    (transformers missing, an architecture it cannot build or whose rotation is not recorded), else ``None``."""
    try:
        from ropekit.integrations.hf.tiny_model import layer_count
        from ropekit.integrations.hf.transformers_reads import read_config

        read = read_config(source)
    except ImportError:
        return "preservation not checked: transformers is not installed"
    except ValueError as error:
        return f"preservation not checked: {error}"
    if read is None or getattr(read, "text_config", None) is not None:
        return f"preservation not checked: transformers does not build {source.get('model_type')!r} from its text part"
    count = layer_count(read)
    try:
        before, after = measured_layers(source, count, own_length(read)), measured_layers(written, count)
    except ValueError as error:
        return f"preservation not checked: {error}"
    types = list(getattr(read, "layer_types", None) or [])[:count]
    for index, (old, new) in enumerate(zip(before, after, strict=True)):
        layer_type = types[index] if types else None
        key = _rope_key(read, old, layer_type)
        scaled = request.layer_types is None or key in request.layer_types
        wanted, fixed = _wanted(source, key, request) if scaled else (request, False)
        why = _layer_differs(old, new, scaled, wanted, _plain_base(read, key), fixed)
        if why is not None:
            named = [name for name in (layer_type, None if key == layer_type else f"RoPE {key!r}") if name]
            where = f"layer {index}" + (f" ({', '.join(named)})" if named else "")
            raise ValueError(f"{where}: {why}; the written model is not the source with the requested scaling")
    return None


def _rope_key(read: Any, old: LayerRope | None, layer_type: str | None) -> str | None:
    """The key of the rope dict the layer runs: the one its rotary call was given in the source's forward where the
    dict has it (DeepSeek-V4's ``main``/``compress``), else its layer type."""
    params = getattr(read, "rope_parameters", None)
    recorded = old.rope_key if old is not None else None
    if recorded is not None and isinstance(params, Mapping) and isinstance(params.get(recorded), Mapping):
        return recorded
    return layer_type


def _wanted(source: Mapping[str, Any], key: str | None, request: Request) -> tuple[Request, bool]:
    """``(request, fixed)`` for a scaled layer of rope-dict key ``key``: the request's method with the amplitude keys
    it keeps from the source's own method (:mod:`~ropekit.integrations.hf.amplitude_rule`), and whether the source's
    rule fixes its amplitude (a kept ``attention_factor``: the written layer's A is then the source's, as measured)."""
    from ropekit.integrations.hf.amplitude_rule import kept_amplitude
    from ropekit.integrations.hf.model_config import layer_types_of, rope_of

    nested = layer_types_of(source)
    try:
        native = None if nested and key not in nested else rope_of(source, key if nested else None).scaling
    except ValueError:
        native = None
    kept = kept_amplitude(native, request.scaling)
    if not kept:
        return request, False
    return dataclasses.replace(
        request, scaling=dataclasses.replace(request.scaling, **kept)
    ), "attention_factor" in kept


def _plain_base(read: Any, key: str | None) -> float | None:
    """The base transformers' config object reads for the RoPE of rope-dict key ``key`` (``None`` where it states
    none)."""
    params = getattr(read, "rope_parameters", None) or {}
    if key is not None and isinstance(params.get(key), Mapping):
        params = params[key]
    base = params.get("rope_theta") if isinstance(params, Mapping) else None
    return None if base is None else float(base)


def _layer_differs(
    old: LayerRope | None, new: LayerRope | None, scaled: bool, request: Request, base: float | None, fixed: bool
) -> str | None:
    if (old is None) != (new is None):
        return "the source rotates no dims (NoPE) and the output does" if old is None else "the output rotates none"
    if old is None or new is None:
        return None
    if old.pairs != new.pairs:
        return f"the output rotates {new.describe()}, the source {old.describe()}"
    if not scaled or (request.scaling is not None and request.scaling.rope_type not in _CHECKED):
        if not scaled and not np.allclose(new.freqs, old.freqs, rtol=RTOL, atol=0):
            worst = int(np.argmax(np.abs(new.freqs / old.freqs - 1)))
            return (
                f"the request leaves this layer as it is, but pair {old.pairs[worst]} turns at "
                f"{new.freqs[worst]:.6g} rad/token, not the source's {old.freqs[worst]:.6g}"
            )
        if not scaled and not math.isclose(new.amplitude, old.amplitude, rel_tol=RTOL):
            return (
                f"the request leaves this layer as it is, but its rotation's amplitude is {new.amplitude:.6g}, not "
                f"the source's {old.amplitude:.6g}"
            )
        return None
    return _scaled_differs(old, new, request, base, fixed)


#: the methods whose highest and lowest pairs are checked against the method's own ratio
_CHECKED = ("linear", "yarn", "llama3", "ntk", "default")


def _unscaled(old: LayerRope, base: float | None) -> np.ndarray | None:
    """The layer's plain-RoPE frequencies, highest first: the source's own where they are plain, else plain RoPE at
    ``base`` over the measured pairs (``None`` without one)."""
    freqs = old.by_frequency()
    steps = np.arange(len(freqs))
    plain_here = len(freqs) > 1 and math.isclose(freqs[0], 1.0, rel_tol=RTOL)
    if plain_here:
        ratio = math.exp(np.polyfit(steps, np.log(freqs), 1)[0])
        plain_here = bool(np.allclose(freqs, ratio**steps, rtol=10 * RTOL, atol=0))
    if plain_here:
        return freqs
    return None if base is None else base ** (-steps / len(freqs))


def _scaled_differs(old: LayerRope, new: LayerRope, request: Request, base: float | None, fixed: bool) -> str | None:
    """Why the scaled layer ``new`` is not the unscaled frequencies of ``old`` turned by the requested method, or its
    amplitude not the method's (the source's, where the source's rule ``fixed`` it)."""
    from ropekit.config import RopeConfig
    from ropekit.scaling.registry import frequencies

    unscaled = _unscaled(old, base)
    pairs = len(old.freqs)
    plain_base = unscaled[-1] ** (-pairs / (pairs - 1)) if unscaled is not None and pairs > 1 else base or 10000.0
    scaling = _with_original(request.scaling, request.original_length)
    rope = RopeConfig(2 * pairs, base=float(plain_base))
    method = frequencies(rope.replace(scaling=scaling), seq_len=SERVED) if scaling else frequencies(rope)
    name = scaling.rope_type if scaling is not None else "plain RoPE"
    if unscaled is not None:
        why = _pairs_differ(unscaled, new, method.inv_freq / frequencies(rope).inv_freq, name)
        if why is not None:
            return why
    amplitude = old.amplitude if fixed else method.attention_factor
    if not math.isclose(new.amplitude, amplitude, rel_tol=RTOL):
        rule = f"the source's own rule keeps its {amplitude:.6g}" if fixed else f"{name} gives {amplitude:.6g}"
        return f"its rotation's amplitude is {new.amplitude:.6g}, but {rule}"
    return None


def _pairs_differ(unscaled: np.ndarray, new: LayerRope, wanted: np.ndarray, name: str) -> str | None:
    """Why ``new``'s highest- or lowest-frequency pair is not ``unscaled``'s turned by the method's ratio ``wanted``."""
    got = new.by_frequency()
    pairs = len(unscaled)
    for which, k in (("highest", 0), ("lowest", pairs - 1)):
        expected = unscaled[k] * wanted[k]
        if not math.isclose(got[k], expected, rel_tol=10 * RTOL):
            kept = "keeps" if math.isclose(wanted[k], 1.0, rel_tol=1e-12) else f"turns by x{wanted[k]:.6g}"
            return (
                f"its {which}-frequency pair turns at {got[k]:.6g} rad/token, but {name} {kept} the source's "
                f"unscaled {unscaled[k]:.6g} (giving {expected:.6g})"
            )
    return None


def _with_original(scaling: Any, original: int) -> Any:
    """``scaling`` with its original length filled where it has the field and leaves it unset."""
    if scaling is None or not dataclasses.is_dataclass(scaling):
        return scaling
    names = {f.name for f in dataclasses.fields(scaling)}
    if "original_max_position_embeddings" in names and scaling.original_max_position_embeddings is None:
        return dataclasses.replace(scaling, original_max_position_embeddings=original)
    return scaling
