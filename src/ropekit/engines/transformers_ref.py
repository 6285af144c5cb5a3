"""transformers, the reference: its own rotary module and model on the folder (float32, CPU)."""

from __future__ import annotations

import copy
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


def read_config(folder: Path):
    """transformers' config of ``folder`` as it reads it (older keys and ``layer_types`` defaults resolved; the text
    part of a multimodal config), its warnings silenced."""
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


def compared_layer(folder: Path) -> tuple[int, str | None]:
    """``(layer index, layer type)`` whose RoPE is compared: the first ``full_attention`` layer of a per-layer-type
    model (the one ropekit scales by default), else layer 0 with no type."""
    config = read_config(folder)
    params = getattr(config, "rope_parameters", None) or {}
    types = list(getattr(config, "layer_types", None) or [])
    if isinstance(params, dict) and "rope_type" not in params and "full_attention" in types:
        return types.index("full_attention"), "full_attention"
    return 0, None


def rope_parameters(folder: Path) -> dict:
    """The rope dict transformers runs on the compared layer (:func:`compared_layer`), JSON-clean: what an engine
    that loads the folder through transformers' config (vLLM, SGLang) is given."""
    params = read_config(folder).rope_parameters
    layer_type = compared_layer(folder)[1]
    return json.loads(json.dumps(params[layer_type] if layer_type is not None else params))


def reference_answer(folder: Path, probe: Probe) -> Answer:
    """transformers' tables (a fresh copy of its rotary module per served length, so a length-following method
    starts from its original state), softmax scale and logits for ``probe``. The pairs are the module's
    ``inv_freq``: most models return cos/sin repeated over both halves, gpt-oss one half."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    index, layer_type = compared_layer(folder)
    rotary = model.model.rotary_emb
    answer = Answer(softmax_scale=float(model.model.layers[index].self_attn.scaling))
    with torch.no_grad():
        for served in probe.served_lengths:
            module = copy.deepcopy(rotary)
            position_ids = torch.arange(served)[None]
            x = torch.zeros(1, served, 1, dtype=torch.float32)
            extra = {} if layer_type is None else {"layer_type": layer_type}
            cos, sin = module(x, position_ids, **extra)
            half = getattr(module, "inv_freq" if layer_type is None else f"{layer_type}_inv_freq").shape[-1]
            picked = torch.as_tensor(positions_below(probe, served))
            table = torch.stack([cos[0, picked, :half], sin[0, picked, :half]], dim=-1)
            answer.tables[served] = table.double().numpy()
        if probe.ids:
            logits = model(torch.tensor([probe.ids])).logits[0]
            answer.logits = logits.double().numpy()
    return answer


def rotary_half(answer: Answer) -> int:
    """d/2, the number of rotating pairs, from a reference answer."""
    return int(next(iter(answer.tables.values())).shape[1])
