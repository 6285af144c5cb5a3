"""``ropekit finetune`` end to end: check everything, train on accelerate, export natively, compare before/after.

Every check that can fail runs first, before anything is written or any weights load
(:func:`ropekit.finetune.request.prepare`: the output folder, the model, the method, the text, a resume, the launch).
Output layout (``NEW_DIR``): exactly what ``ropekit extend`` writes (weights, tokenizer, ``config.json``), plus
``finetune/`` with ``settings.json``, ``loss.csv``, ``loss.png``, ``checkpoint/`` (resumable) and ``report.json``.

The run is built in a fixed hidden sibling of ``NEW_DIR`` (:func:`ropekit._output.partial_dir`) whose files are
renamed into ``NEW_DIR`` when the model is written (:func:`ropekit._output.publish`: the user's other files there are
left alone), so an existing ``NEW_DIR`` survives Ctrl-C and errors. After Ctrl-C the sibling keeps the resumable
checkpoint that ``--resume`` continues (as does a finished ``NEW_DIR``'s own ``finetune/checkpoint``);
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

from ropekit.finetune.loss_log import StepRecord
from ropekit.finetune.request import WORK_DIR, FinetuneRequest, PreparedRun, prepare
from ropekit.finetune.train import TrainResult, train
from ropekit.integrations.hf.extend import save_extended
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


def load_for_training(
    model: Path, scaling: ScalingConfig | None, layer_types: Sequence[str] | None, *, mixed_window: bool = False
):
    """The transformers model of ``model`` in float32 (transformers' default attention) with ``scaling`` applied, as
    training loads it; with ``mixed_window``, each sequence takes the short or the long ``longrope`` list by its own
    positions (:func:`ropekit.integrations.hf.mixed_window.use_mixed_window`; the config stays native ``longrope``)."""
    from ropekit.integrations.hf.load import load_model
    from ropekit.integrations.hf.mixed_window import use_mixed_window
    from ropekit.integrations.hf.patch_rope import apply_scaling

    loaded, _ = load_model(model, dtype=torch.float32)  # attention: transformers' default (sdpa where it runs)
    if layer_types is not None:
        patched = apply_scaling(loaded, scaling, layer_types=layer_types)
    else:
        patched = apply_scaling(loaded, scaling)
    return use_mixed_window(patched) if mixed_window else patched


def finetune(
    request: FinetuneRequest,
    *,
    progress: bool = True,
    on_step: Callable[[StepRecord], None] | None = None,
    log: Callable[[str], None] = lambda message: None,
) -> FinetuneReport:
    """Fine-tune ``request.model`` with its method at the target length on its text; write ``request.out`` like
    ``extend``: :func:`ropekit.finetune.request.prepare` (every check), then :func:`run_prepared`.

    Call it on every process (``accelerate launch``); only the main process writes and evaluates.

    Raises:
        ValueError, FileExistsError, FileNotFoundError: as :func:`ropekit.finetune.request.prepare`.
    """
    return run_prepared(prepare(request, log=log), progress=progress, on_step=on_step)


def run_prepared(
    prepared: PreparedRun, *, progress: bool = True, on_step: Callable[[StepRecord], None] | None = None
) -> FinetuneReport:
    """Train, export and evaluate a run :func:`ropekit.finetune.request.prepare` checked (every process calls it).

    ``on_step`` is called on the main process after each optimizer step; ``progress`` shows a bar there.
    """
    from ropekit._output import partial_dir

    request, state = prepared.request, prepared.accelerator
    partial = partial_dir(request.out)
    work = partial / WORK_DIR
    _start_work(prepared, partial)
    try:
        result = train(
            lambda: load_for_training(
                request.model, request.scaling, request.layer_types, mixed_window=request.settings.mixed_window
            ),
            prepared.data.windows if prepared.mixed is None else prepared.mixed,
            prepared.heldout_windows,
            request.settings,
            work,
            resume=request.resume,
            on_step=on_step,
            progress=progress,
            title=f"fine-tune {prepared.original:,} → {request.settings.target_length:,}",
            accelerator=state,
        )
    except BaseException:
        if state.is_main_process and not (work / "checkpoint" / "progress.json").is_file():
            shutil.rmtree(partial, ignore_errors=True)  # nothing to resume: leave no trace
        raise
    target = request.settings.target_length
    report = FinetuneReport(
        request.out, prepared.original, target, prepared.notes, result, checkpoint=work / "checkpoint"
    )
    if not result.interrupted:
        if state.is_main_process:
            _finish(prepared, report, partial)
        state.wait_for_everyone()
    return report


def _start_work(prepared: PreparedRun, partial: Path) -> None:
    """The hidden work folder: a new one with ``settings.json``, a finished run's copied in to resume, or the
    interrupted one as it is."""
    request, state = prepared.request, prepared.accelerator
    work = partial / WORK_DIR
    if state.is_main_process and (not request.resume or prepared.copy_from is not None):
        if partial.exists():
            shutil.rmtree(partial)
        if prepared.copy_from is not None:
            shutil.copytree(prepared.copy_from, work)
        else:
            work.mkdir(parents=True)
            settings_json = {"settings": request.settings.to_dict(), **prepared.identity}
            (work / "settings.json").write_text(json.dumps(settings_json, indent=2) + "\n")
    state.wait_for_everyone()


def _finish(prepared: PreparedRun, report: FinetuneReport, partial: Path) -> None:
    """On the main process: write the model beside ``out``, rename its files in, evaluate, write ``report.json``."""
    from ropekit._output import publish, staged_output

    request, result = prepared.request, report.train
    source = request.model
    save_extended(
        result.model, prepared.tokenizer, partial, prepared.config, source=source if source.is_dir() else None
    )
    result.model = None
    try:
        publish(partial, request.out, force=request.force or request.resume)  # a resumed run was checked at its start
    except OSError:  # a name known only now is already in out: out is unchanged
        if not (partial / WORK_DIR / "checkpoint" / "progress.json").is_file():
            shutil.rmtree(partial, ignore_errors=True)
        raise
    finished = request.out / WORK_DIR
    report.checkpoint = finished / "checkpoint"
    if request.evaluate:
        report.rows = before_after(
            source,
            request.scaling,
            request.out,
            prepared.data.heldout,
            original=prepared.original,
            target=request.settings.target_length,
            layer_types=request.layer_types,
            eval_tokens=request.eval_tokens,
            trials=request.passkey_trials,
            log=prepared.log,
        )
    with staged_output(finished, force=True) as staged:  # the run's own folder, published above
        (staged / "report.json").write_text(json.dumps(report.to_dict(), indent=2) + "\n")


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
    from ropekit.eval.loader import load_eval_model

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
