"""``ropekit finetune`` end to end: check everything, train on accelerate, export natively, compare before/after.

Every check that can fail (the model has RoPE, the target is above the original length, the method can be written
natively, the text fills a window, the output folder is free or resumable) runs before any weights load. Output
layout (``NEW_DIR``): exactly what ``ropekit extend`` writes (weights, tokenizer, ``config.json``), plus
``finetune/`` with ``settings.json``, ``loss.csv``, ``loss.png``, ``checkpoint/`` (resumable) and ``report.json``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ropekit.finetune.data import pack, tokenize_text
from ropekit.finetune.export import (
    check_out_dir,
    extended_config,
    layer_types_of,
    load_config,
    model_rope,
    original_length_of,
    save_extended,
)
from ropekit.finetune.train import (
    WORK_DIR,
    FinetuneSettings,
    StepRecord,
    TrainResult,
    fsdp_fallback_note,
    make_accelerator,
    train,
)
from ropekit.scaling.registry import ScalingConfig


@dataclass
class FinetuneReport:
    """The outcome: where the model went, the training result and the before/after rows."""

    out: Path
    original_length: int
    target_length: int
    notes: list[str]
    train: TrainResult
    rows: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "out": str(self.out),
            "original_length": self.original_length,
            "target_length": self.target_length,
            "rope": self.notes,
            "steps_done": self.train.steps_done,
            "interrupted": self.train.interrupted,
            "heldout_loss_before": self.train.heldout_before,
            "heldout_loss_after": self.train.heldout_after,
            "tokens_per_second": self.train.tokens_per_second,
            "processes": self.train.processes,
            "distributed": self.train.distributed,
            "before_after": self.rows,
        }


def _tokenizer(model: Path):
    from transformers import AutoTokenizer

    if model.suffix == ".gguf":
        return AutoTokenizer.from_pretrained(model.parent, gguf_file=model.name, local_files_only=True)
    return AutoTokenizer.from_pretrained(model, local_files_only=True)


def _load_for_training(model: Path, scaling: ScalingConfig | None, layer_types: Sequence[str] | None):
    from ropekit.finetune.export import load_model
    from ropekit.integrations.hf import apply_scaling

    loaded, _ = load_model(model, dtype=torch.float32, attention="sdpa")
    if layer_types is not None:
        return apply_scaling(loaded, scaling, layer_types=layer_types)
    return apply_scaling(loaded, scaling)


def _same_settings(work: Path, settings: FinetuneSettings, identity: dict[str, Any]) -> None:
    saved = json.loads((work / "settings.json").read_text())
    diff = [f"settings.{k}" for k, v in settings.to_dict().items() if saved["settings"].get(k) != v]
    diff += [k for k, v in identity.items() if saved.get(k) != v]
    if diff:
        raise ValueError(
            f"--resume: these settings differ from the interrupted run's ({work / 'settings.json'}): {diff}"
        )


def finetune(
    model: str | Path,
    scaling: ScalingConfig | None,
    text: str | Path,
    out: str | Path,
    settings: FinetuneSettings,
    *,
    layer_types: Sequence[str] | None = None,
    original_length: int | None = None,
    resume: bool = False,
    force: bool = False,
    evaluate: bool = True,
    eval_tokens: int = 16384,
    passkey_trials: int = 5,
    progress: bool = True,
    on_step: Callable[[StepRecord], None] | None = None,
    log: Callable[[str], None] = lambda message: None,
) -> FinetuneReport:
    """Fine-tune ``model`` with ``scaling`` at ``settings.target_length`` on ``text``; write ``out`` like ``extend``.

    Call it on every process (``accelerate launch``); only the main process writes and evaluates.
    ``original_length``: the pre-training length (default: from the config), the table's shorter length.

    Raises:
        ValueError: not a RoPE model, a target not above the original length, a method transformers cannot
            express, a text shorter than one window, or ``--resume`` with other settings / nothing to resume.
        FileExistsError: ``out`` exists and neither ``force`` nor ``resume`` is given.
        FileNotFoundError: no model or no text.
    """
    source, out = Path(model), Path(out)
    target = settings.target_length
    config = load_config(source)
    rope = model_rope(config, _first_type(config, layer_types))
    original = original_length or original_length_of(config, rope)
    if target <= original:
        raise ValueError(
            f"--target-length must be above the model's original length {original:,}, got {target:,}; fine-tuning "
            "extends the context"
        )
    new_config, notes = extended_config(config, scaling, target_length=target, layer_types=layer_types)
    work = out / WORK_DIR
    identity = {"model": str(source.resolve()), "scaling": repr(scaling), "text": str(Path(text).resolve())}
    if resume:
        if not (work / "checkpoint" / "progress.json").is_file():
            raise ValueError(f"--resume: no checkpoint in {str(work / 'checkpoint')!r} to resume from")
        _same_settings(work, settings, identity)
    else:
        if out.exists() and (work / "checkpoint").exists() and not force:
            raise FileExistsError(
                f"--out {str(out)!r} holds a fine-tune run; pass --resume to continue it if it was interrupted, "
                "or --force to start over"
            )
        check_out_dir(out, force=force)
        if out.exists() and out.resolve() == source.resolve():
            raise ValueError(f"--out {str(out)!r} is the source model; choose a new folder")
    state = make_accelerator(settings)
    if not state.is_main_process:
        log = lambda message: None  # noqa: E731 - one process speaks
    if note := fsdp_fallback_note(state):
        log(note)
    if not Path(text).exists():
        raise FileNotFoundError(f"--text {str(text)!r} does not exist")
    tokenizer = _tokenizer(source)
    packed = pack(tokenize_text(tokenizer, text), target)
    count = max(1, min(settings.heldout_windows, (len(packed.heldout) - 1) // target))
    heldout_windows = packed.heldout[: count * target].reshape(count, target)  # (count, target)
    log(
        f"{packed.tokens:,} tokens: {len(packed.windows):,} training windows of {target:,}, "
        f"{len(packed.heldout):,} held out; RoPE: {'; '.join(notes)}"
    )

    if state.is_main_process and not resume:
        if out.is_dir():
            shutil.rmtree(out)
        elif out.exists():
            out.unlink()
        work.mkdir(parents=True)
        (work / "settings.json").write_text(json.dumps({"settings": settings.to_dict(), **identity}, indent=2) + "\n")
    state.wait_for_everyone()

    result = train(
        lambda: _load_for_training(source, scaling, layer_types),
        packed.windows,
        heldout_windows,
        settings,
        work,
        resume=resume,
        on_step=on_step,
        progress=progress,
        title=f"fine-tune {original:,} → {target:,}",
        accelerator=state,
    )
    report = FinetuneReport(out, original, target, notes, result)
    if result.interrupted:
        return report
    if state.is_main_process:
        save_extended(result.model, tokenizer, out, new_config, source=source if source.is_dir() else None)
        result.model = None
        if evaluate:
            report.rows = before_after(
                source, scaling, out, packed.heldout, original, target, layer_types, eval_tokens, passkey_trials, log
            )
        (work / "report.json").write_text(json.dumps(report.to_dict(), indent=2) + "\n")
    state.wait_for_everyone()
    return report


def _first_type(config: dict[str, Any], layer_types: Sequence[str] | None) -> str | None:
    nested = layer_types_of(config)
    if not nested:
        return None
    if layer_types:
        return layer_types[0]
    return "full_attention" if "full_attention" in nested else nested[0]


def before_after(
    source: Path,
    scaling: ScalingConfig | None,
    out: Path,
    heldout: torch.Tensor,
    original: int,
    target: int,
    layer_types: Sequence[str] | None,
    eval_tokens: int,
    trials: int,
    log: Callable[[str], None],
) -> list[dict[str, Any]]:
    """Perplexity at the original and the target length and passkey accuracy at the target length, for the source
    model as shipped (the baseline: at the original length the fine-tuned model should not be worse), the source
    with the method applied training-free ("before") and ``out`` loaded natively by transformers ("after").
    """
    from ropekit.eval.models import load_eval_model

    rows = []

    def row(label: str, model) -> None:
        log(f"evaluating {label} ...")
        rows.append({"model": label, **measure(model, heldout, original, target, eval_tokens, trials)})

    model = load_eval_model(source, dtype="float32")  # once for both source rows: set_scaling switches in place
    row("source (as shipped)", model)
    if layer_types is not None:
        model.set_scaling(scaling, layer_types=tuple(layer_types))
    else:
        model.set_scaling(scaling)
    row("before (training-free)", model)
    del model
    row("after fine-tune", load_eval_model(out, dtype="float32"))
    return rows


def measure(model, heldout: torch.Tensor, original: int, target: int, eval_tokens: int, trials: int) -> dict[str, Any]:
    """``{ppl_original, ppl_target, passkey_correct, passkey_trials}`` of an evaluation model on ``heldout`` ids."""
    from ropekit.eval.passkey import passkey_grid
    from ropekit.eval.perplexity import perplexity_at

    at_original = perplexity_at(model, heldout, original, original, max_tokens=max(eval_tokens, original))
    at_target = perplexity_at(model, heldout, target, original, max_tokens=max(eval_tokens, target))
    encode = lambda text: model.encode(text).numpy()  # noqa: E731
    cells = passkey_grid(model, heldout.numpy(), [target], [0.5], trials=trials, batch_size=1, encode=encode)
    return {
        "ppl_original": at_original.perplexity,
        "ppl_target": at_target.perplexity,
        "passkey_correct": sum(c.correct for c in cells),
        "passkey_trials": sum(c.trials for c in cells),
    }
