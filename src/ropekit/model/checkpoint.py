"""Checkpoints: ``model.safetensors`` + ``config.json`` (and, while training, ``train_state.*``). No pickle."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import torch

from ropekit._bundled import BUNDLED
from ropekit.model.tiny import TinyConfig, TinyLM


def resolve(name_or_path: str | Path) -> Path:
    """A bundled name (``"tiny"``) or a checkpoint directory → its path; missing ones raise."""
    if isinstance(name_or_path, str) and name_or_path in BUNDLED:
        path = Path(str(resources.files("ropekit").joinpath(BUNDLED[name_or_path])))
    else:
        path = Path(name_or_path)
    if not (path / "config.json").is_file() or not (path / "model.safetensors").is_file():
        raise FileNotFoundError(
            f"no checkpoint at {str(path)!r}: expected config.json and model.safetensors "
            f"(bundled names: {', '.join(BUNDLED)})"
        )
    return path


def save(model: TinyLM, directory: str | Path, *, metadata: dict | None = None) -> Path:
    """Write ``model`` to ``directory`` (created if needed)."""
    from safetensors.torch import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    state.pop("lm_head.weight", None)
    save_file(state, str(directory / "model.safetensors"))
    config = {"model": model.config.to_dict(), "metadata": metadata or {}}
    (directory / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return directory


def load(name_or_path: str | Path = "tiny", *, device: str | torch.device = "cpu") -> TinyLM:
    """Load a checkpoint: ``load("tiny")`` is the bundled model, ``load(path)`` any saved directory.

    Raises:
        FileNotFoundError: no checkpoint there.
        ValueError: the config does not match the weights.
    """
    from safetensors.torch import load_file

    path = resolve(name_or_path)
    model = TinyLM(load_tiny_config(path))
    state = load_file(str(path / "model.safetensors"), device=str(device))
    expected = model.state_dict()
    problems = [k for k in expected if k not in state] + [k for k in state if k not in expected]
    problems += [
        f"{k}: weights {tuple(state[k].shape)} vs config {tuple(v.shape)}"
        for k, v in expected.items()
        if k in state and state[k].shape != v.shape
    ]
    if problems:
        raise ValueError(f"config.json at {str(path)!r} does not match model.safetensors: {problems[:5]}")
    model.load_state_dict(state)
    return model.to(device).eval()


def load_tiny_config(name_or_path: str | Path = "tiny") -> TinyConfig:
    """The architecture of a checkpoint (its ``config.json``), without loading the weights."""
    return TinyConfig.from_dict(json.loads((resolve(name_or_path) / "config.json").read_text())["model"])


def hf_style_config(name_or_path: str | Path = "tiny") -> dict:
    """A tiny checkpoint's architecture as a transformers Llama ``config.json`` dict (half-split pairs, every layer
    rotating, its training length as ``max_position_embeddings``), so the commands that read a model's RoPE from a
    config (``inspect``, ``plan``) read the tiny model the way they read any other.

    Raises:
        FileNotFoundError: no checkpoint there. ValueError: the checkpoint has no RoPE (``position`` is not ``rope``).
    """
    from ropekit.hf_format import to_hf_config

    config = load_tiny_config(name_or_path)
    if config.position != "rope":
        raise ValueError(f"the tiny checkpoint {str(name_or_path)!r} has no RoPE (its position is {config.position!r})")
    shape = {
        "model_type": "llama",
        "architectures": ["ropekit TinyLM"],
        "hidden_size": config.d_model,
        "num_attention_heads": config.n_heads,
        "num_key_value_heads": config.n_kv_heads,
        "num_hidden_layers": config.n_layers,
        "intermediate_size": config.ffn_dim,
        "vocab_size": config.vocab_size,
        "max_position_embeddings": config.train_length,
    }
    return to_hf_config(config.rope, shape)


def metadata(name_or_path: str | Path = "tiny") -> dict:
    """The ``metadata`` block of a checkpoint's config.json (training command, bits per byte, …)."""
    return json.loads((resolve(name_or_path) / "config.json").read_text()).get("metadata", {})
