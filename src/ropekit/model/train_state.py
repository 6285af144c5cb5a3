"""A training run's files: the checkpoint (weights and AdamW state, staged and renamed in together), the check that
a run may write its folder, resuming and starting from another checkpoint's weights."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from ropekit.errors import InvalidArgument
from ropekit.model.checkpoint import save
from ropekit.model.tiny import TinyLM

#: what a training run writes into its output folder (a checkpoint and the optimizer state that resumes it)
CHECKPOINT_FILES = ("model.safetensors", "config.json", "train_state.safetensors", "train_state.json")


def _save_state(directory: Path, model: TinyLM, optimizer: torch.optim.Optimizer, step: int, history: list) -> None:
    from safetensors.torch import save_file

    names = dict(model.named_parameters())
    tensors = {}
    for name, param in names.items():
        state = optimizer.state.get(param, {})
        for key in ("exp_avg", "exp_avg_sq"):
            if key in state:
                tensors[f"{key}/{name}"] = state[key].contiguous().cpu()
    save_file(tensors, str(directory / "train_state.safetensors"))
    (directory / "train_state.json").write_text(json.dumps({"step": step, "history": history}) + "\n")


def checkpoint(
    out: Path, model: TinyLM, optimizer: torch.optim.Optimizer, step: int, history: list, metadata: dict
) -> None:
    """Weights and optimizer state, written together beside ``out`` and renamed into it (:mod:`ropekit._output`;
    the names were checked when the run started, so they are the run's own)."""
    from ropekit._output import staged_output

    with staged_output(out, force=True) as staged:
        save(model, staged, metadata=metadata)
        _save_state(staged, model, optimizer, step, history)


def check_train_out(out: str | Path, *, resume: bool = True, force: bool = False) -> bool:
    """Whether a run into ``out`` resumes (``resume`` and a ``train_state`` there); otherwise ``out`` must not hold
    any of :data:`CHECKPOINT_FILES` unless ``force`` (they would be replaced; other files are left alone).

    Raises:
        ropekit._output.OutputExists: ``out`` holds checkpoint files of no run to resume, and ``force`` is false.
        FileExistsError: ``out`` is a file.
    """
    from ropekit._output import refuse_existing

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"out {str(out)!r} exists and is not a folder")
    if resume and (out / "train_state.json").is_file():
        return True
    refuse_existing(out, CHECKPOINT_FILES, force=force)
    return False


def load_state(directory: Path, model: TinyLM, optimizer: torch.optim.Optimizer) -> tuple[int, list]:
    from safetensors.torch import load_file

    from ropekit.model.checkpoint import load

    model.load_state_dict(load(directory).state_dict())
    tensors = load_file(str(directory / "train_state.safetensors"))
    meta = json.loads((directory / "train_state.json").read_text())
    for name, param in model.named_parameters():
        if f"exp_avg/{name}" in tensors:
            optimizer.state[param] = {
                "step": torch.tensor(float(meta["step"])),
                "exp_avg": tensors[f"exp_avg/{name}"].to(param.device),
                "exp_avg_sq": tensors[f"exp_avg_sq/{name}"].to(param.device),
            }
    return meta["step"], meta["history"]


def copy_weights(init: str | Path, model: TinyLM) -> None:
    """Load ``init``'s weights into ``model``; a different shape is a clear error."""
    from ropekit.model.checkpoint import load

    try:
        source = load(init).state_dict()
    except (OSError, ValueError) as error:
        reason = str(error)
        raise InvalidArgument("init", str(init), message=lambda n: f"{n('init', str(init))}: {reason}") from error
    target = model.state_dict()
    mismatched = sorted(
        k for k in set(source) | set(target) if k not in source or k not in target or source[k].shape != target[k].shape
    )
    if mismatched:
        raise InvalidArgument(
            "init",
            str(init),
            message=lambda n: (
                f"{n('init', str(init))} has a different shape from the model being trained (first mismatches: "
                f"{mismatched[:3]}); use the checkpoint's d_model, n_layers, n_heads, n_kv_heads and ffn_dim"
            ),
        )
    model.load_state_dict(source)
