"""The conformance matrix: every causal-LM architecture transformers ships whose config has RoPE, built as a tiny
random model from its config class's defaults, extended with each method by ``ropekit extend``, then compared by
``ropekit engines`` (both in-process, through the CLI a user runs).

Each cell is a verdict with its largest difference, or the one-line refusal (``extend``'s or ``engines``'s
``error:`` line). A raw traceback is recorded as ``TRACEBACK`` and counted: the matrix exists to find them.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

METHODS = ("none", "linear", "yarn", "llama3", "longrope", "dynamic")
#: what shrinks a config (key → value), applied where the config class has the key
SHRINK = {
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "intermediate_size": 128,
    "moe_intermediate_size": 32,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "qk_rope_head_dim": 16,
    "qk_nope_head_dim": 16,
    "v_head_dim": 16,
    "kv_lora_rank": 32,
    "q_lora_rank": 32,
    "hidden_size_global": 64,
    "encoder_hash_byte_group_vocab": 300,
    "vocab_size": 300,
    "max_position_embeddings": 256,
    "n_routed_experts": 4,
    "num_experts": 4,
    "num_local_experts": 4,
    "num_experts_per_tok": 2,
}
FACTOR = 4


@dataclass
class Cell:
    method: str
    engine: str
    verdict: str
    detail: str = ""


@dataclass
class Row:
    arch: str
    built: str = "ok"
    cells: list[Cell] = field(default_factory=list)


def rope_architectures() -> list[str]:
    """The model types of ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`` whose default config has RoPE, sorted."""
    from transformers import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    from ropekit.integrations.hf.model_config import has_rope

    found = []
    for model_type in sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES):
        try:
            config = CONFIG_MAPPING[model_type]()
        except Exception:
            found.append(model_type)
            continue
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
        if has_rope(text.to_dict()):
            found.append(model_type)
    return found


def tiny_folder(model_type: str, path: Path) -> Path:
    """A tiny random ``model_type`` model (its config class's defaults, shrunk) saved at ``path``."""
    import torch
    import transformers
    from transformers import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    config = CONFIG_MAPPING[model_type]()
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    for target in {id(config): config, id(text): text}.values():
        shrink(target)
    torch.manual_seed(0)
    model_class = getattr(transformers, MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type])
    # a composite config's causal LM is its text model (Llama 4, Qwen3.5): built from the config class it takes
    model = model_class(config if isinstance(config, model_class.config_class) else text)
    model.save_pretrained(path)
    return path


def shrink(config: Any, depth: int = 0) -> None:
    """``config`` and its sub-configs (BLT's encoder, decoder, ...) with :data:`SHRINK`'s sizes where they have the
    key, every per-layer list cut to the layers kept, MLA's key/value heads as many as its query heads (its keys
    are per head), a hybrid's attention on its last kept layer, and token ids inside the vocabulary."""
    from transformers import PretrainedConfig

    layers = getattr(config, "num_hidden_layers", None)
    for key, value in SHRINK.items():
        if getattr(config, key, None) is not None:
            _set(config, key, value)
    if hasattr(config, "head_dim") and config.head_dim is None and getattr(config, "num_attention_heads", None):
        _set(config, "head_dim", SHRINK["head_dim"])  # classes that read it unset (Ministral, Hunyuan v1)
    if getattr(config, "kv_lora_rank", None) is not None and getattr(config, "num_key_value_heads", None):
        _set(config, "num_key_value_heads", SHRINK["num_attention_heads"])
    if getattr(config, "mamba_n_heads", None) and getattr(config, "mamba_d_head", None):  # heads x size = expand x d
        expand = getattr(config, "mamba_expand", 2)
        _set(config, "mamba_d_head", expand * SHRINK["hidden_size"] // config.mamba_n_heads)
    if hasattr(config, "attn_layer_indices"):
        _set(config, "attn_layer_indices", [SHRINK["num_hidden_layers"] - 1])
    for key, value in list(vars(config).items()):
        if isinstance(value, list) and layers and len(value) == layers and layers > SHRINK["num_hidden_layers"]:
            _set(config, key, value[: SHRINK["num_hidden_layers"]])
        elif isinstance(value, PretrainedConfig) and depth < 3:
            shrink(value, depth + 1)
    for key in ("pad_token_id", "bos_token_id", "eos_token_id"):
        if isinstance(getattr(config, key, None), int):
            _set(config, key, 0)


def _set(config: Any, key: str, value: Any) -> None:
    with contextlib.suppress(AttributeError):  # a property derived from other keys (Bamba's layers_block_type)
        setattr(config, key, value)


def _line(output: str) -> str:
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    return errors[0][len("error:") :].strip() if errors else " ".join(output.split())[-200:]


def _invoke(*args: Any) -> tuple[str, Any]:
    """``("ok", result)``, ``("refused", one line)`` or ``("TRACEBACK", last line)`` for ``ropekit ARGS``."""
    from typer.testing import CliRunner

    from ropekit.cli.app import app

    result = CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})
    if result.exit_code == 0:
        return "ok", result
    if isinstance(result.exception, SystemExit):
        return "refused", _line(result.output)
    last = traceback.format_exception_only(type(result.exception), result.exception)[-1].strip()
    return "TRACEBACK", last[:200]


def _extend_args(method: str, source: Path) -> list[str]:
    """``extend``'s method flags; longrope gets per-pair factors s^(i/(pairs-1)) (1 … s) in a file beside the model."""
    if method == "none":
        return ["--scaling", "none"]
    args = ["--scaling", method, "--factor", str(FACTOR)]
    if method == "longrope":
        from ropekit.integrations.hf.load import load_config
        from ropekit.integrations.hf.model_config import rope_of

        try:
            pairs = rope_of(load_config(source)).dim // 2
        except ValueError:
            return args  # extend's own refusal says why
        factors = source.parent / f"{source.name}-factors.json"
        factors.write_text(json.dumps([FACTOR ** (i / max(pairs - 1, 1)) for i in range(pairs)]))
        args += ["--factors", str(factors)]
    return args


def arch_row(model_type: str, workdir: Path, engines: str | None = None) -> Row:
    """One architecture's row: build, then ``extend`` and ``engines`` per method."""
    row = Row(model_type)
    source = workdir / model_type
    try:
        tiny_folder(model_type, source)
    except Exception as error:
        row.built = f"not built: {type(error).__name__}: {' '.join(str(error).split())[:160]}"
        return row
    for method in METHODS:
        out = workdir / f"{model_type}-{method}"
        status, result = _invoke("extend", "--model", source, *_extend_args(method, source), "-o", out, "--force")
        if status != "ok":
            row.cells.append(Cell(method, "extend", status, result))
            continue
        args = ["engines", "--model", out, "--logits", "0", "--json"] + (["--engines", engines] if engines else [])
        status, result = _invoke(*args)
        if status != "ok":
            row.cells.append(Cell(method, "engines", status, result))
            continue
        for entry in _engine_rows(result.output):
            row.cells.append(Cell(method, entry.get("engine", "?"), entry.get("verdict", "?"), _detail(entry)))
    return row


def _engine_rows(output: str) -> list[dict[str, Any]]:
    start = output.find("[") if output.lstrip().startswith("[") else output.find("{")
    data = json.loads(output[start:])
    return data if isinstance(data, list) else data.get("rows", data.get("engines", []))


def _detail(entry: dict[str, Any]) -> str:
    return " ".join(str(entry.get("detail") or "").split())


def run(model_types: list[str], engines: str | None = None) -> list[Row]:
    with tempfile.TemporaryDirectory() as workdir:
        return [arch_row(model_type, Path(workdir), engines) for model_type in model_types]
