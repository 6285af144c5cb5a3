"""The conformance matrix: every causal-LM architecture transformers ships whose config has RoPE, built as a tiny
random model from its config class's defaults, extended with each method by ``ropekit extend``, then compared by
``ropekit engines`` (both in-process, through the CLI a user runs).

Each cell is a verdict with its largest difference, or the one-line refusal (``extend``'s or ``engines``'s
``error:`` line). A raw traceback is recorded as ``TRACEBACK`` and counted: the matrix exists to find them.
"""

from __future__ import annotations

import contextlib
import functools
import json
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

METHODS = ("none", "linear", "yarn", "llama3", "longrope", "dynamic")
#: a ``@shipped`` row's first cell: the tiny model as its release ships it, compared by ``engines`` without ``extend``
SHIPPED_METHOD = "shipped"
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


def tiny_folder(model_type: str, path: Path, keys: dict[str, Any] | None = None) -> Path:
    """A tiny random ``model_type`` model saved at ``path``: its config class's defaults, or ``keys`` given to it as
    arguments (a release's shipped keys, :mod:`shipped`), shrunk where the keys leave a size unset."""
    import torch
    import transformers
    from transformers import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    config = CONFIG_MAPPING[model_type](**(keys or {}))
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    kept = set(keys or {}) | set((keys or {}).get("text_config", {}))
    for target in {id(config): config, id(text): text}.values():
        shrink(target, kept=kept)
    torch.manual_seed(0)
    model_class = getattr(transformers, MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type])
    # a composite config's causal LM is its text model (Llama 4, Qwen3.5): built from the config class it takes
    model = model_class(config if isinstance(config, model_class.config_class) else text)
    model.save_pretrained(path)
    return path


def shrink(config: Any, depth: int = 0, kept: set[str] = frozenset()) -> None:
    """``config`` and its sub-configs (BLT's encoder, decoder, ...) with :data:`SHRINK`'s sizes where they have the
    key (but the ``kept`` keys, given as shipped), every per-layer list cut to the layers kept, MLA's key/value heads
    as many as its query heads (its keys are per head), a hybrid's attention on its last kept layer, and token ids
    inside the vocabulary; MLA's query head (``qk_head_dim``) the sum of its shrunk parts, a ``rotary_dim`` the same
    share of the shrunk head as of the class's, and HRM-Text's cache slots (``num_hidden_layers``) those of its shrunk
    stack. A layer count given in ``kept`` is kept, with every per-layer list as long."""
    from transformers import PretrainedConfig

    layers = getattr(config, "num_hidden_layers", None)
    head, rotary = _get(config, "head_dim"), _get(config, "rotary_dim")
    for key, value in SHRINK.items():
        if key not in kept and _get(config, key) is not None:
            _set(config, key, value)
    unset_head = "head_dim" in vars(config) and vars(config)["head_dim"] is None
    if "head_dim" not in kept and unset_head and _get(config, "num_attention_heads"):
        _set(config, "head_dim", SHRINK["head_dim"])  # classes that read it unset (Ministral, Hunyuan v1)
    if "rotary_dim" not in kept and isinstance(head, int) and isinstance(rotary, int) and _get(config, "head_dim"):
        _set(config, "rotary_dim", max(2, rotary * _get(config, "head_dim") // head // 2 * 2))  # its share of the head
    if _get(config, "qk_head_dim") and _get(config, "qk_nope_head_dim") and _get(config, "qk_rope_head_dim"):
        _set(config, "qk_head_dim", config.qk_nope_head_dim + config.qk_rope_head_dim)  # derived at __init__ only
    if _get(config, "kv_lora_rank") is not None and _get(config, "num_key_value_heads"):
        _set(config, "num_key_value_heads", SHRINK["num_attention_heads"])
    if _get(config, "mamba_n_heads") and _get(config, "mamba_d_head"):  # heads x size = d_ssm, else expand x d
        inner = _get(config, "mamba_d_ssm") or getattr(config, "mamba_expand", 2) * SHRINK["hidden_size"]
        _set(config, "mamba_d_head", inner // config.mamba_n_heads)
    if hasattr(config, "attn_layer_indices"):
        _set(config, "attn_layer_indices", [SHRINK["num_hidden_layers"] - 1])
    kept_layers = _get(config, "num_hidden_layers")  # SHRINK's, or the count the keys give
    for key, value in list(vars(config).items()):
        if isinstance(value, list) and layers and len(value) == layers and kept_layers and layers > kept_layers:
            _set(config, key, value[:kept_layers])
        elif isinstance(value, PretrainedConfig) and depth < 3:
            shrink(value, depth + 1, kept)
    if _get(config, "num_layers_per_stack") and "num_hidden_layers" not in kept:
        # HRM-Text: the stack has num_layers_per_stack layers; num_hidden_layers counts the cache's slots, one per
        # layer per cycle (per stack x H_cycles x (L_cycles + 1)), derived at __init__ only
        _set(config, "num_layers_per_stack", SHRINK["num_hidden_layers"])
        _set(config, "num_hidden_layers", SHRINK["num_hidden_layers"] * config.H_cycles * (config.L_cycles + 1))
    for key in ("pad_token_id", "bos_token_id", "eos_token_id"):
        if isinstance(getattr(config, key, None), int):
            _set(config, key, 0)


def _get(config: Any, key: str) -> Any:
    """``config.key``, ``None`` where it has none or it is per layer (Gemma 4's ``head_dim``)."""
    try:
        return getattr(config, key, None)
    except Exception:  # transformers' AmbiguousGlobalPerLayerAttributeError: the key differs between layers
        return None


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

    _build_app_once()
    result = CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})
    if result.exit_code == 0:
        return "ok", result
    if isinstance(result.exception, SystemExit):
        return "refused", _line(result.output)
    last = traceback.format_exception_only(type(result.exception), result.exception)[-1].strip()
    return "TRACEBACK", last[:200]


@functools.cache
def _build_app_once() -> None:
    """Typer's test runner builds the click command from the app on each call (0.1 CPU-s, a dozen calls a row):
    built once a process here; the app does not change during a run."""
    import typer.testing

    typer.testing._get_command = functools.cache(typer.testing._get_command)


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


def arch_row(name: str, workdir: Path, engines: str | None = None) -> Row:
    """One row: build, then ``extend`` and ``engines`` per method. ``name``: a model type (its config class's
    defaults), or ``<model type>@shipped`` (the keys its released checkpoints ship: :data:`shipped.SHIPPED`)."""
    from shipped import SHIPPED

    row = Row(name)
    model_type, _, variant = name.partition("@")
    keys = SHIPPED[model_type].keys if variant == "shipped" else None
    source = workdir / name.replace("@", "-")
    try:
        tiny_folder(model_type, source, keys)
    except Exception as error:
        row.built = f"not built: {type(error).__name__}: {' '.join(str(error).split())[:160]}"
        return row
    for method in (SHIPPED_METHOD, *METHODS) if keys else METHODS:
        out = workdir / f"{source.name}-{method}"
        if method == SHIPPED_METHOD:
            out = source  # the checkpoint as it ships, compared as it is
        else:
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


def shipped_rows() -> list[str]:
    """The rows built from shipped keys: ``<model type>@shipped`` for each family of :data:`shipped.SHIPPED`."""
    from shipped import SHIPPED

    return [f"{model_type}@shipped" for model_type in SHIPPED]


def run(names: list[str], engines: str | None = None) -> list[Row]:
    """The rows of ``names`` (model types, or ``<model type>@shipped``: :func:`arch_row`)."""
    with tempfile.TemporaryDirectory() as workdir:
        return [arch_row(name, Path(workdir), engines) for name in names]
