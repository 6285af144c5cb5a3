"""``ropekit finetune`` end to end: check everything, train on accelerate, export natively, compare before/after.

Every check that can fail (the model has RoPE and a tokenizer, the target is above the original length and the
model's current one, the method can be written natively, the text fills a window, the output folder is free of what
the run writes or resumable, and overlaps no input) runs before anything is written or any weights load. Output
layout (``NEW_DIR``): exactly what ``ropekit extend`` writes (weights, tokenizer, ``config.json``), plus
``finetune/`` with ``settings.json``, ``loss.csv``, ``loss.png``, ``checkpoint/`` (resumable) and ``report.json``.

The run is built in a fixed hidden sibling of ``NEW_DIR`` (:func:`ropekit._output.partial_dir`) whose files are
renamed into ``NEW_DIR`` when the model is written (:func:`ropekit._output.publish`: the user's other files there are
left alone), so an existing ``NEW_DIR`` survives Ctrl-C and errors. After Ctrl-C the sibling keeps
the resumable checkpoint that ``--resume`` continues (as does a finished ``NEW_DIR``'s own ``finetune/checkpoint``);
after an error it is removed unless it holds a checkpoint.
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
from ropekit.finetune.export import save_extended
from ropekit.finetune.loss_log import StepRecord
from ropekit.finetune.settings import FinetuneSettings
from ropekit.finetune.train import (
    WORK_DIR,
    TrainResult,
    fsdp_fallback_note,
    make_accelerator,
    train,
)
from ropekit.integrations.hf_config import (
    extended_config,
    first_scaled_type,
    load_config,
    load_tokenizer,
    original_length_of,
    rope_of,
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
    checkpoint: Path | None = None

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


def _load_for_training(model: Path, scaling: ScalingConfig | None, layer_types: Sequence[str] | None):
    from ropekit.integrations.hf import apply_scaling
    from ropekit.integrations.hf_config import load_model

    loaded, _ = load_model(model, dtype=torch.float32, attention="sdpa")
    if layer_types is not None:
        return apply_scaling(loaded, scaling, layer_types=layer_types)
    return apply_scaling(loaded, scaling)


def _same_settings(work: Path, settings: FinetuneSettings, identity: dict[str, Any]) -> None:
    saved = json.loads((work / "settings.json").read_text())
    if saved.get("text_sha256") != identity["text_sha256"]:
        raise ValueError(
            f"resume=True: text {identity['text']!r} is not the text the interrupted run trained on (sha256 "
            f"{identity['text_sha256'][:12]}…, recorded {str(saved.get('text_sha256'))[:12]}…); resuming would train "
            "the remaining steps on other data: give the same text, or start over with force=True"
        )
    diff = [f"settings.{k}" for k, v in settings.to_dict().items() if saved["settings"].get(k) != v]
    diff += [k for k, v in identity.items() if saved.get(k) != v]
    if diff:
        raise ValueError(
            f"resume=True: these settings differ from the interrupted run's ({work / 'settings.json'}): {diff}"
        )


#: what ``finetune`` writes at the top of ``out`` whatever the model (beside the model's files, see :func:`run_names`)
RUN_NAMES = ("config.json", WORK_DIR)


def run_names(model: Path) -> list[str]:
    """The names checked in ``out`` before the run: :data:`RUN_NAMES` and the files ``extend`` would copy from the
    model (the saved model has the source's weights, tokenizer and generation files); what the save writes beyond
    them is checked once it is written, before anything is renamed into ``out``."""
    from ropekit.finetune.export import written_names

    return sorted({*RUN_NAMES, *written_names(model), *(("model.safetensors",) if not model.is_dir() else ())})


def check_run_out(out: Path, model: Path, text: str | Path, *, resume: bool, force: bool) -> None:
    """The checks of ``finetune``'s output, cheap enough to run before anything else (the CLI runs them first).

    Raises:
        ValueError: ``out`` is, holds or lies inside the model or the text; ``resume`` with no checkpoint.
        FileExistsError: ``out`` (or the hidden folder an interrupted run of it left) holds a run, and neither
            ``resume`` nor ``force`` is given; ``out`` holds files the run writes (``config.json``, ``finetune/``)
            without ``force`` (other files there are left alone); ``out`` is a file.
        FileNotFoundError: no parent folder for ``out``, or a dangling symlink.
    """
    from ropekit._output import check_output, partial_dir, refuse_existing

    inputs = [("model", Path(model)), ("text", Path(text))]
    check_output(out, inputs)  # overlaps, a missing parent, a file where the folder goes
    partial = partial_dir(out)
    if resume:  # the names were checked when the run started: what it writes is its own
        if not any((folder / WORK_DIR / "checkpoint" / "progress.json").is_file() for folder in (partial, out)):
            where = partial / WORK_DIR / "checkpoint"
            raise ValueError(f"resume=True: no checkpoint in {str(where)!r} (nor in out) to resume from")
        return
    for folder, where in ((partial, str(partial)), (out, f"out {str(out)!r}")):
        if (folder / WORK_DIR / "checkpoint").exists() and not force:
            raise FileExistsError(
                f"{where} holds a fine-tune run of out {str(out)!r}; pass resume=True to continue it if it was "
                "interrupted, or force=True to start over"
            )
    refuse_existing(out, run_names(Path(model)), force=force)


@dataclass(frozen=True)
class CheckedInputs:
    """What :func:`check_run_inputs` read: the original length, the config to write (and how), the text."""

    original: int
    config: dict[str, Any]
    notes: list[str]
    documents: Any  # ropekit.eval.text.EvalText


def check_run_inputs(
    model: Path,
    scaling: ScalingConfig | None,
    text: str | Path,
    target: int,
    *,
    layer_types: Sequence[str] | None = None,
    original_length: int | None = None,
) -> CheckedInputs:
    """Every check of ``finetune``'s inputs that needs no weights (the CLI runs them before planning).

    Raises:
        ValueError: not a RoPE model, no tokenizer, a target not above the original length (or below an extended
            model's), a method transformers cannot express, layer types the model lacks, an unreadable text.
        FileNotFoundError: no model or no text.
    """
    from ropekit.eval.text import read_text
    from ropekit.finetune.inputs import check_not_shorter, check_tokenizer

    config = load_config(model)
    rope = rope_of(config, first_scaled_type(config, layer_types))
    check_tokenizer(model)
    original = original_length or original_length_of(config, rope)
    if target <= original:
        raise ValueError(
            f"target_length must be above the model's original length {original:,}, got {target:,}; fine-tuning "
            "extends the context"
        )
    check_not_shorter(config, rope, scaling, original, target)
    new_config, notes = extended_config(config, scaling, target_length=target, layer_types=layer_types)
    if not Path(text).exists():
        raise FileNotFoundError(f"text {str(text)!r} does not exist")
    return CheckedInputs(original, new_config, notes, read_text(text))


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
        ValueError: not a RoPE model, no tokenizer, a target not above the original length (or below the model's
            current one), a method transformers cannot express, a text shorter than one window, an ``out`` that
            is, holds or lies inside the model or the text, or ``--resume`` with other settings, another text or
            nothing to resume.
        FileExistsError: ``out`` holds a run, or files the run writes, and neither ``force`` nor ``resume`` is
            given (files the run does not write are left alone).
        FileNotFoundError: no model, no text, or no parent folder for ``out``.
    """
    from ropekit._output import partial_dir, publish, staged_output

    source, out = Path(model), Path(out)
    target = settings.target_length
    check_run_out(out, source, text, resume=resume, force=force)
    checked = check_run_inputs(source, scaling, text, target, layer_types=layer_types, original_length=original_length)
    original, new_config, notes, documents = checked.original, checked.config, checked.notes, checked.documents
    partial = partial_dir(out)
    work, finished = partial / WORK_DIR, out / WORK_DIR
    identity = {
        "model": str(source.resolve()),
        "scaling": repr(scaling),
        "text": str(Path(text).resolve()),
        "text_sha256": documents.sha256,
    }
    copy_from = None
    if resume:
        if (work / "checkpoint" / "progress.json").is_file():
            _same_settings(work, settings, identity)
        else:  # check_run_out found one
            _same_settings(finished, settings, identity)
            copy_from = finished
    state = make_accelerator(settings)
    if not state.is_main_process:
        log = lambda message: None  # noqa: E731 - one process speaks
    if note := fsdp_fallback_note(state):
        log(note)
    tokenizer = load_tokenizer(source)
    packed = pack(tokenize_text(tokenizer, documents), target)
    count = max(1, min(settings.heldout_windows, (len(packed.heldout) - 1) // target))
    heldout_windows = packed.heldout[: count * target].reshape(count, target)  # (count, target)
    training = packed.windows  # (n, target)
    if settings.window is not None:  # PoSE: the same tokens in windows of W whose positions skip (finetune/pose.py)
        whole = (target // settings.window) * settings.window
        training = packed.windows[:, :whole].reshape(-1, settings.window)  # (n · target // W, W)
    pose = f" (PoSE: positions over {target:,}, {settings.chunks} chunks)" if settings.window is not None else ""
    log(
        f"{packed.tokens:,} tokens: {len(training):,} training windows of {training.shape[1]:,}{pose}, "
        f"{len(packed.heldout):,} held out; RoPE: {'; '.join(notes)}"
    )

    if state.is_main_process and (not resume or copy_from is not None):
        if partial.exists():
            shutil.rmtree(partial)
        if copy_from is not None:
            shutil.copytree(copy_from, work)
        else:
            work.mkdir(parents=True)
            settings_json = {"settings": settings.to_dict(), **identity}
            (work / "settings.json").write_text(json.dumps(settings_json, indent=2) + "\n")
    state.wait_for_everyone()

    try:
        result = train(
            lambda: _load_for_training(source, scaling, layer_types),
            training,
            heldout_windows,
            settings,
            work,
            resume=resume,
            on_step=on_step,
            progress=progress,
            title=f"fine-tune {original:,} → {target:,}",
            accelerator=state,
        )
    except BaseException:
        if state.is_main_process and not (work / "checkpoint" / "progress.json").is_file():
            shutil.rmtree(partial, ignore_errors=True)  # nothing to resume: leave no trace
        raise
    report = FinetuneReport(out, original, target, notes, result, checkpoint=work / "checkpoint")
    if result.interrupted:
        return report
    if state.is_main_process:
        save_extended(result.model, tokenizer, partial, new_config, source=source if source.is_dir() else None)
        result.model = None
        try:
            publish(partial, out, force=force or resume)  # a resumed run's names were checked when it started
        except OSError:  # a name known only now is already in out: out is unchanged
            if not (work / "checkpoint" / "progress.json").is_file():
                shutil.rmtree(partial, ignore_errors=True)
            raise
        report.checkpoint = finished / "checkpoint"
        if evaluate:
            report.rows = before_after(
                source,
                scaling,
                out,
                packed.heldout,
                original=original,
                target=target,
                layer_types=layer_types,
                eval_tokens=eval_tokens,
                trials=passkey_trials,
                log=log,
            )
        with staged_output(finished, force=True) as staged:  # the run's own folder, published above
            (staged / "report.json").write_text(json.dumps(report.to_dict(), indent=2) + "\n")
    state.wait_for_everyone()
    return report


def before_after(
    source: Path,
    scaling: ScalingConfig | None,
    out: Path,
    heldout: torch.Tensor,
    *,
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
