"""transformers, the reference: its own rotary module and model on the folder (float32, CPU)."""

from __future__ import annotations

import json
from pathlib import Path

from ropekit.engines.probe import Answer, Probe, positions_below

NAME = "transformers"


def version() -> str | None:
    try:
        import transformers
    except ImportError:
        return None
    return transformers.__version__


#: transformers' reading of recent folders, keyed by the folder and its ``config.json`` text: a comparison reads
#: the folder's config a dozen times (compared layer, rope dict, each engine's request), and transformers formats
#: the whole config into a log line on each read, whatever the log level
_READ: dict[tuple[str, bytes], object] = {}
#: how many readings :data:`_READ` keeps
KEPT_READS = 8


def read_config(folder: Path):
    """transformers' config of ``folder`` as it reads it (older keys and ``layer_types`` defaults resolved; the text
    part of a multimodal config), its warnings silenced. Read once per folder and ``config.json`` text (the object
    is shared: callers only read it)."""
    file = Path(folder) / "config.json"
    if not file.is_file():
        return _read_config(folder)  # transformers' own error
    key = (str(file.resolve()), file.read_bytes())
    if key not in _READ:
        while len(_READ) >= KEPT_READS:
            del _READ[next(iter(_READ))]
        _READ[key] = _read_config(folder)
    return _READ[key]


def _read_config(folder: Path):
    import logging

    from transformers import AutoConfig

    logger = logging.getLogger("transformers")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        config = AutoConfig.from_pretrained(folder, local_files_only=True)
    finally:
        logger.setLevel(level)
    return config.get_text_config()


#: layer types whose layers have no RoPE attention (transformers' ``ALLOWED_ATTN_LAYER_TYPES`` that are recurrent,
#: convolutional or MLP-only; Bamba's and Zamba2's older names)
NO_ATTENTION = frozenset({"linear_attention", "conv", "moe", "mamba"})


def compared_layer(folder: Path) -> tuple[int, str | None]:
    """``(layer index, layer type)`` whose RoPE is compared: the first ``full_attention`` layer of a per-layer-type
    model (the one ropekit scales by default), else its layer 0 with that layer's type; with one rope dict for every
    layer, the first layer that has attention (layer 0, or the first after a hybrid's recurrent layers: Qwen3-Next,
    Qwen3.5), with no type; with a rope dict keyed by other names than layer types (DeepSeek-V4's ``main`` and
    ``compress``, which the model class chooses per layer: :func:`rope_parameters`), the first attention layer that
    does not slide, with no type."""
    config = read_config(folder)
    params = getattr(config, "rope_parameters", None) or {}
    types = list(getattr(config, "layer_types", None) or [])
    attending = [i for i, kind in enumerate(types) if kind not in NO_ATTENTION]
    if not isinstance(params, dict) or "rope_type" in params:
        return (attending[0] if attending else 0), None
    if "full_attention" in types:
        return types.index("full_attention"), "full_attention"
    if types and types[0] in params:  # every layer kept is of another type (Gemma 3's first layers slide)
        return 0, types[0]
    wide = [i for i in attending if "sliding" not in types[i]]
    return (wide or attending or [0])[0], None


def rope_parameters(folder: Path, key: str | None = None) -> dict:
    """The rope dict transformers runs on the compared layer (:func:`compared_layer`), JSON-clean: what an engine
    that loads the folder through transformers' config (vLLM, SGLang) is given. Where the dict is keyed by other
    names than layer types (DeepSeek-V4's ``main``/``compress``), the model class chooses one per layer: ``key`` is
    the one the compared layer ran in transformers' forward (:attr:`~ropekit.engines.probe.Answer.rope_key`)."""
    config = read_config(folder)
    params, layer_type = config.rope_parameters, compared_layer(folder)[1]
    if layer_type is None and "rope_type" not in params:
        if key in params:
            return json.loads(json.dumps(params[key]))
        raise ValueError(
            f"{type(config).__name__}'s rope dict is keyed by {sorted(params)}, which are not its layer types: "
            "which one a layer runs is its model class's choice, so no engine is given one here"
        )
    return json.loads(json.dumps(params[layer_type] if layer_type is not None else params))


def reference_answer(folder: Path, probe: Probe) -> Answer:
    """transformers' tables for ``probe``: the rotation its own modeling code applies in the compared layer
    (:mod:`ropekit.integrations.hf.rotation_capture`: its rotation function, on its rotary module's output at each served
    length), read in its own pairing; its softmax scale and logits."""
    import torch
    from transformers import AutoModelForCausalLM

    from ropekit.integrations.hf.rotation_capture import attention_of, capture, layers_of, pair_table

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    index, layer_type = compared_layer(folder)
    decoder, layers = layers_of(model)
    attention = attention_of(layers[index])
    scaling = getattr(attention, "scaling", None)
    answer = Answer(softmax_scale=None if scaling is None else float(scaling))
    rotation = capture(model, attention)
    answer.rope_key = rotation.rope_key()
    half = _pairs(decoder, layer_type or answer.rope_key, rotation)
    for served in probe.served_lengths:
        positions = positions_below(probe, served)
        table, answer.interleaved = pair_table(_rotating_block(rotation.matrices(served, positions), half), half)
        answer.tables[served] = table
    if probe.ids:
        with torch.no_grad():
            answer.logits = model(torch.tensor([probe.ids])).logits[0].double().numpy()
    return answer


def _rotating_block(matrices, half: int):
    """``matrices`` (``(positions, W, W)``) cut to the trailing ``2·half`` dims where those rotate and the leading
    ones do not (DeepSeek-V4 lays each head out as ``[nope | rope]``); unchanged otherwise."""
    import numpy as np

    width = matrices.shape[-1]
    if width <= 2 * half:
        return matrices
    moved = np.abs(matrices - matrices[:1]).max(axis=(0, 2)) > 1e-6  # per input dim: rotated at some position
    if moved[: 2 * half].any() or not moved[width - 2 * half :].any():
        return matrices
    return matrices[:, width - 2 * half :, width - 2 * half :]


def _pairs(decoder, layer_type: str | None, rotation) -> int:
    """The number of rotating pairs: the length of the rotary module's ``inv_freq`` (of the layer type)."""
    for recorded in rotation.capture.rotary_calls[::-1]:
        name = "inv_freq" if layer_type is None else f"{layer_type}_inv_freq"
        found = getattr(recorded.target, name, None)
        if found is None:
            found = getattr(recorded.target, "inv_freq", None)
        if found is not None:
            return int(found.shape[-1])
    return int(rotation.capture.apply_call.args[0].shape[-1]) // 2


def rotary_half(answer: Answer) -> int:
    """d/2, the number of rotating pairs, from a reference answer."""
    return int(next(iter(answer.tables.values())).shape[1])
