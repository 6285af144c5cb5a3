"""Write a model with a new RoPE as a checkpoint that transformers loads natively (no ropekit needed).

The rule, one for every method (checked against transformers 5.18's ``modeling_rope_utils``):

* Methods transformers names itself (``linear``, ``yarn`` with its own ramp, ``llama3``, ``proportional``, and the
  length-following ``dynamic`` and ``longrope``) are written as themselves. ``dynamic`` reads its original length
  from the model's ``max_position_embeddings``, so that key is set to the original length for it.
* Every other method is *static* (its frequencies do not follow the sequence length): ropekit computes its float64
  frequencies and writes the simplest native config with exactly those frequencies —

  - a pure base change (static NTK, ``--base``, a frozen dynamic NTK: θ'_i = b'^(−2i/d) with attention factor 1)
    becomes ``default`` with ``rope_theta = b'``;
  - any other per-pair scaling (YaRN with the paper's ramp, a frozen LongRoPE, user-given factors) becomes
    ``longrope`` with ``short_factor = long_factor = θ_i / θ'_i`` and an explicit ``attention_factor``.
    transformers picks ``long_factor`` when ``max(position) + 1 > original_max_position_embeddings`` and
    ``short_factor`` otherwise (``_compute_longrope_parameters`` and ``dynamic_rope_update``); with the two lists
    equal the choice cannot matter at any length, and the explicit attention factor makes the result independent
    of ``factor`` and ``max_position_embeddings``.

* Not expressible (a clear ``ValueError`` saying why and what to use): pairs with frequency 0 or below (a per-pair
  factor would be infinite; use ``proportional``), and an interleaved pair layout (transformers' models rotate
  half-split pairs; convert the weights first).

Per-layer-type models (Gemma 3: ``rope_parameters`` keyed by layer type) keep that form: the scaling is written for
the chosen layer types (default: ``full_attention`` when present, as transformers scales Gemma 3), each at its own
base, and the other layer types are copied unchanged. There the ``longrope`` form is refused: transformers 5.18's
``dynamic_rope_update`` for a per-layer-type ``longrope`` raises ``UnboundLocalError`` on its second call beyond the
original length (it caches the long frequencies under ``{layer_type}_long_inv_freq`` but reads a local variable).
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ropekit.config import RopeConfig
from ropekit.scaling.registry import ScalingConfig, frequencies, inv_freq

#: rope types transformers computes itself; the flag says whether ropekit's config of that type is static.
NATIVE_TYPES = ("linear", "yarn", "llama3", "proportional", "dynamic", "longrope")
#: methods that are a base change by definition; ``to_hf_dict`` writes them as ``default`` with the exact new base
_BASE_CHANGES = ("ntk", "base")
#: relative tolerance for recognising a pure base change in float64 frequencies.
_BASE_CHANGE_RTOL = 1e-12


def _hf_dict(rope: RopeConfig) -> dict[str, Any]:
    from ropekit.hf_format import to_hf_dict

    return to_hf_dict(rope)


def _from_hf(config: Mapping[str, Any], layer_type: str | None) -> RopeConfig:
    from ropekit.hf_format import from_hf_config

    return from_hf_config(dict(config), layer_type=layer_type)


def is_native(scaling: ScalingConfig | None) -> bool:
    """True when transformers computes ``scaling`` itself (same name, same frequencies at every length)."""
    if scaling is None:
        return True
    if scaling.rope_type not in NATIVE_TYPES:
        return False
    if getattr(scaling, "ramp", "transformers") != "transformers":
        return False
    return getattr(scaling, "fixed_seq_len", None) is None


@dataclass(frozen=True)
class NativeRope:
    """How one RoPE is written natively.

    Attributes:
        rope_parameters: the transformers 5.x ``rope_parameters`` dict (JSON-ready).
        max_position_embeddings: the value the model-level key must have for the dict to mean what it should
            (``dynamic`` only: its original length), else ``None`` (the caller's choice).
        how: one sentence: which native form was used and why.
    """

    rope_parameters: dict[str, Any]
    max_position_embeddings: int | None
    how: str


def native_rope(rope: RopeConfig, *, original_length: int) -> NativeRope:
    """The native transformers form of ``rope`` (base, rotary dim and scaling), exact to float32 rounding.

    Args:
        rope: the model's RoPE with the scaling to write.
        original_length: the pre-training length, written as ``original_max_position_embeddings`` when the
            native form needs one the scaling does not carry (the ``longrope`` form).

    Returns:
        A :class:`NativeRope`.

    Raises:
        ValueError: ``rope`` cannot be written natively (interleaved pairs, pairs with frequency <= 0).
    """
    if rope.interleaved:
        raise ValueError(
            "interleaved=True cannot be written as a transformers config: transformers' models rotate half-split "
            "pairs (i, i + d/2); permute the q/k projection weights to the half-split layout first"
        )
    scaling = rope.scaling
    if is_native(scaling):
        params = _hf_dict(rope)
        name = params["rope_type"]
        if name == "dynamic":
            original = scaling.original_max_position_embeddings
            return NativeRope(params, original, f"dynamic (native; max_position_embeddings = {original}, its L)")
        return NativeRope(params, None, f"{name} (native)")
    if scaling.rope_type in _BASE_CHANGES:  # the new base is known exactly; no need to recover it from θ'_1
        params = _hf_dict(rope)
        return NativeRope(params, None, f"default with rope_theta = {params['rope_theta']:.9g} ({scaling.rope_type})")
    freqs = frequencies(rope)
    ours = np.asarray(freqs.inv_freq, dtype=np.float64)
    if not np.all(np.isfinite(ours)) or np.any(ours <= 0):
        raise ValueError(
            f"{scaling.rope_type} leaves some pairs with frequency <= 0, which no per-pair factor can express "
            "(it would be infinite); use rope_type 'proportional' for pairs that do not rotate"
        )
    dim = rope.dim
    attention = float(freqs.attention_factor)
    if attention == 1.0 and len(ours) > 1:
        new_base = float(ours[1] ** (-dim / 2))  # θ'_1 = b'^(−2/d)
        if new_base > 1 and np.allclose(ours, inv_freq(dim, new_base), rtol=_BASE_CHANGE_RTOL, atol=0):
            params = _hf_dict(dataclasses.replace(rope, base=new_base, scaling=None))
            return NativeRope(
                params, None, f"default with rope_theta = {new_base:.9g} ({scaling.rope_type} is a base change)"
            )
    from ropekit.scaling.longrope import LongRopeScaling

    factors = tuple(float(x) for x in inv_freq(dim, rope.base) / ours)  # θ_i / θ'_i, so θ'_i = 1 / (f_i·b^(2i/d))
    original = int(getattr(scaling, "original_max_position_embeddings", None) or original_length)
    factor = max(float(getattr(scaling, "factor", 1.0) or 1.0), 1.0)
    as_longrope = LongRopeScaling(
        short_factor=factors,
        long_factor=factors,
        original_max_position_embeddings=original,
        factor=factor,
        attention_factor=attention,
    )
    params = _hf_dict(dataclasses.replace(rope, scaling=as_longrope))
    return NativeRope(
        params,
        None,
        f"longrope with per-pair factors and attention_factor {attention:.9g} ({scaling.rope_type} is static; "
        "short_factor = long_factor, so transformers' choice between them cannot matter)",
    )


def has_rope(config: Mapping[str, Any]) -> bool:
    """Whether a ``config.json`` dict describes a RoPE model (it has a rope dict or a RoPE base)."""
    return any(
        config.get(key) is not None for key in ("rope_parameters", "rope_scaling", "rope_theta", "rotary_emb_base")
    )


def layer_types_of(config: Mapping[str, Any]) -> list[str] | None:
    """The layer types of a per-layer-type RoPE config (``rope_parameters`` keyed by layer type), else ``None``."""
    params = config.get("rope_scaling") or config.get("rope_parameters") or {}
    nested = sorted(key for key, value in params.items() if isinstance(value, Mapping))
    return nested or None


def model_rope(config: Mapping[str, Any], layer_type: str | None = None) -> RopeConfig:
    """The RoPE a ``config.json`` dict describes (its native scaling included).

    Raises:
        ValueError: the config has no RoPE.
    """
    if not has_rope(config):
        kind = config.get("model_type", "this model")
        raise ValueError(
            f"--model: {kind} is not a RoPE model (its config has no rope_parameters, rope_scaling or rope_theta); "
            "ropekit extends RoPE models only"
        )
    return _from_hf(config, layer_type)


def original_length_of(config: Mapping[str, Any], rope: RopeConfig) -> int:
    """The pre-training length: the native scaling's original length if any, else ``max_position_embeddings``."""
    original = getattr(rope.scaling, "original_max_position_embeddings", None)
    if original:
        return int(original)
    if not config.get("max_position_embeddings"):
        raise ValueError("--original-length is needed: the config has no max_position_embeddings")
    return int(config["max_position_embeddings"])


def extended_config(
    config: Mapping[str, Any],
    scaling: ScalingConfig | None,
    *,
    target_length: int,
    layer_types: Sequence[str] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """A ``config.json`` dict whose RoPE is the model's own with ``scaling`` (replacing any native scaling).

    Args:
        config: the source model's ``config.json`` dict.
        scaling: the method to write (``None``: plain RoPE at the model's base).
        target_length: written as ``max_position_embeddings`` (except for ``dynamic``, which needs its L there).
        layer_types: for per-layer-type configs, which layer types get ``scaling`` (default ``full_attention``
            when present, else all); ignored otherwise.

    Returns:
        ``(new_config, notes)``; ``notes`` says, per layer type, which native form was written.

    Raises:
        ValueError: no RoPE, an unknown layer type, or a scaling transformers cannot express.
    """
    new = json.loads(json.dumps(dict(config)))  # deep copy, JSON-clean
    nested = layer_types_of(new)
    key = "rope_parameters"
    new.pop("rope_scaling", None)  # 4.x key; transformers prefers it over rope_parameters, so it must not linger
    notes: list[str] = []
    lengths: set[int] = set()
    if nested is None:
        native = model_rope(config)
        written = native_rope(native.replace(scaling=scaling), original_length=original_length_of(config, native))
        new[key] = written.rope_parameters  # its rope_theta/partial_rotary_factor win over top-level keys
        notes.append(written.how)
        if written.max_position_embeddings is not None:
            lengths.add(written.max_position_embeddings)
        original = written.rope_parameters.get("original_max_position_embeddings")
    else:
        chosen = list(layer_types) if layer_types else (["full_attention"] if "full_attention" in nested else nested)
        unknown = sorted(set(chosen) - set(nested))
        if unknown:
            raise ValueError(f"layer_types must be among {nested}, got {unknown}")
        params = dict(config.get("rope_scaling") or config.get("rope_parameters"))
        original = None
        for layer_type in nested:
            if layer_type not in chosen:
                continue
            native = model_rope(config, layer_type)
            written = native_rope(native.replace(scaling=scaling), original_length=original_length_of(config, native))
            if written.rope_parameters["rope_type"] == "longrope":
                raise ValueError(
                    f"{scaling.rope_type} on a per-layer-type model needs rope_type 'longrope' for {layer_type}, which "
                    "transformers 5.18 cannot run per layer type (dynamic_rope_update raises UnboundLocalError on its "
                    "second call beyond original_max_position_embeddings); use a method transformers names (yarn with "
                    "its own ramp, linear, llama3) or a base change (--base, ntk)"
                )
            params[layer_type] = written.rope_parameters
            notes.append(f"{layer_type}: {written.how}")
            if written.max_position_embeddings is not None:
                lengths.add(written.max_position_embeddings)
            original = written.rope_parameters.get("original_max_position_embeddings", original)
        notes += [f"{t}: unchanged" for t in nested if t not in chosen]
        new[key] = params
    if original is not None and "original_max_position_embeddings" in new:
        new["original_max_position_embeddings"] = original  # Phi-3 style: the top-level key wins in transformers
    new["max_position_embeddings"] = lengths.pop() if lengths else int(target_length)
    return new, notes


#: files that are the old model's weights or config; everything else in the folder is copied as is.
_NOT_COPIED = {"config.json"}


def check_out_dir(out: str | Path, *, force: bool) -> Path:
    """``out`` as a Path, refusing an existing non-empty folder unless ``force``.

    Raises:
        FileExistsError: ``out`` exists (a file, or a folder with files) and ``force`` is false.
    """
    out = Path(out)
    if out.exists() and not out.is_dir() and not out.is_file():  # /dev/null, a socket: never removed, even with force
        raise FileExistsError(f"--out {str(out)!r} exists and is neither a folder nor a file")
    if out.exists() and (out.is_file() or any(out.iterdir())) and not force:
        raise FileExistsError(f"--out {str(out)!r} exists; pass --force to overwrite it")
    return out


def _prepare_out(out: Path, source: Path | None) -> None:
    if source is not None and out.resolve() == source.resolve():
        raise ValueError(f"--out {str(out)!r} is the source model; choose a new folder")
    if out.is_file():
        out.unlink()
    elif out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)


def write_config(out: Path, config: Mapping[str, Any]) -> None:
    """Write ``config.json`` (sorted keys, as transformers does)."""
    (out / "config.json").write_text(json.dumps(dict(config), indent=2, sort_keys=True) + "\n")


def load_config(model: str | Path) -> dict[str, Any]:
    """The ``config.json`` dict of a model folder, or of a ``.gguf`` file (read by transformers, not dequantised).

    Raises:
        FileNotFoundError: no such folder/file, or no ``config.json`` in the folder.
    """
    path = Path(model)
    if path.suffix == ".gguf":
        if not path.is_file():
            raise FileNotFoundError(f"--model {str(path)!r}: no such GGUF file")
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(path.parent, gguf_file=path.name, local_files_only=True).to_dict()
        return {key: value for key, value in config.items() if not key.startswith("_")}  # _name_or_path: local
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"--model {str(path)!r}: no config.json there (a transformers folder or a .gguf file)")
    return json.loads((path / "config.json").read_text())


def load_model(model: str | Path, *, dtype: Any = None, attention: str | None = None):
    """``(model, tokenizer or None)`` from a transformers folder or a ``.gguf`` file, offline, in ``dtype``
    (default float32).

    A GGUF model is dequantised by transformers, which then marks it quantized (not trainable with ``.float()``, not
    savable); its weights are moved into a plain model built from the same config, which is both.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(model)
    options: dict[str, Any] = {"local_files_only": True, "dtype": dtype or torch.float32}
    if attention is not None:
        options["attn_implementation"] = attention
    if path.suffix == ".gguf":
        folder, extra = path.parent, {"gguf_file": path.name}
    else:
        folder, extra = path, {}
    loaded = AutoModelForCausalLM.from_pretrained(folder, **options, **extra)
    if extra:
        plain = AutoModelForCausalLM.from_config(
            loaded.config, dtype=options["dtype"], attn_implementation=attention or "sdpa"
        )
        plain.load_state_dict(loaded.state_dict())
        plain.tie_weights()
        loaded = plain.eval()
    tokenizer = None
    if extra or any((path / n).is_file() for n in ("tokenizer.json", "tokenizer.model", "vocab.json")):
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True, **extra)
    return loaded, tokenizer


def save_extended(model, tokenizer, out: Path, config: Mapping[str, Any], *, source: Path | None = None) -> None:
    """Save ``model``'s weights (safetensors) and ``tokenizer`` into ``out`` and write ``config``.

    ``source``: a model folder whose other files (tokenizer, generation config) are copied when no tokenizer is
    given.
    """
    model.save_pretrained(out, safe_serialization=True)
    if tokenizer is not None:
        tokenizer.save_pretrained(out)
    elif source is not None and source.is_dir():
        for item in source.iterdir():
            if item.is_file() and item.name not in _NOT_COPIED and not (out / item.name).exists():
                shutil.copy2(item, out / item.name)
    write_config(out, config)


@dataclass(frozen=True)
class ExtendResult:
    """What :func:`extend` wrote: the folder, its config, and one note per (layer type's) RoPE."""

    out: Path
    config: dict[str, Any]
    notes: list[str]


def extend(
    model: str | Path,
    scaling: ScalingConfig | None,
    out: str | Path,
    *,
    target_length: int | None = None,
    layer_types: Sequence[str] | None = None,
    force: bool = False,
) -> ExtendResult:
    """Copy ``model`` to ``out`` with a ``config.json`` giving it ``scaling`` natively.

    A folder is copied file by file (weights untouched) and its ``config.json`` rewritten; a ``.gguf`` file is
    dequantised through transformers and saved as safetensors with its tokenizer.

    Args:
        model: a transformers model folder or a ``.gguf`` file.
        scaling: the method (``None``: plain RoPE at the model's base, dropping a native scaling).
        out: the new folder.
        target_length: ``max_position_embeddings`` to write; default: the original length times the method's
            ``factor`` (the original length for methods without one).
        layer_types: for per-layer-type models, which layer types to scale (see :func:`extended_config`).
        force: overwrite an existing ``out``.

    Raises:
        FileExistsError: ``out`` exists and ``force`` is false.
        FileNotFoundError: no model at ``model``.
        ValueError: not a RoPE model, a target not above the original length, or a method transformers cannot
            express.
    """
    source = Path(model)
    out = check_out_dir(out, force=force)
    config = load_config(source)
    rope = model_rope(config, _first(config, layer_types) if layer_types_of(config) else None)
    original = original_length_of(config, rope)
    target = default_target(scaling, original) if target_length is None else int(target_length)
    if target < original:
        raise ValueError(f"target_length must be >= the original length {original}, got {target}")
    new_config, notes = extended_config(config, scaling, target_length=target, layer_types=layer_types)
    _prepare_out(out, source if source.is_dir() else None)
    if source.suffix == ".gguf":
        loaded, tokenizer = load_model(source)
        save_extended(loaded, tokenizer, out, new_config)
    else:
        for item in source.iterdir():
            if item.name in _NOT_COPIED:
                continue
            if item.is_dir():
                shutil.copytree(item, out / item.name)
            else:
                shutil.copy2(item, out / item.name)
        write_config(out, new_config)
    return ExtendResult(out, new_config, notes)


def _first(config: Mapping[str, Any], layer_types: Sequence[str] | None) -> str:
    nested = layer_types_of(config) or []
    chosen = list(layer_types) if layer_types else (["full_attention"] if "full_attention" in nested else nested)
    return chosen[0]


def default_target(scaling: ScalingConfig | None, original: int) -> int:
    """``original × factor`` for methods with a factor (rounded), else ``original``."""
    factor = getattr(scaling, "factor", None)
    return math.floor(original * factor + 0.5) if factor else original
