"""What a fine-tuning run is asked to do (:class:`FinetuneRequest`), and every check of it before training.

:func:`prepare` is the one place for those checks, in the order a user meets them: the output folder (free,
resumable, overlapping no input), the model (RoPE, a tokenizer, a target above its original and current length, a
method transformers can write), the text (it exists, reads, and fills one training window plus the held-out tail), a
resumed run's settings and text, and the launch (``accelerate``'s FSDP on a machine without GPUs). It returns what
training needs (:class:`PreparedRun`); nothing is written and no weights load. ``ropekit finetune`` calls it once,
before its plan, so ``--dry-run`` refuses exactly what the run refuses; :func:`ropekit.finetune.run.finetune` calls
it for library callers. The one check left to training is the model's output head
(:func:`ropekit.integrations.hf.output_head.check_head`), which runs the loaded weights; the dry run makes it when it
loads them for its measured step.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ropekit._validate import require_int
from ropekit.errors import MissingFile
from ropekit.finetune.data import PackedText
from ropekit.finetune.processes import fsdp_fallback_note, make_accelerator
from ropekit.finetune.settings import FinetuneSettings
from ropekit.scaling.registry import ScalingConfig

#: where the training artefacts go inside the output model folder
WORK_DIR = "finetune"


@dataclass(frozen=True)
class FinetuneRequest:
    """A fine-tuning run: the model, the method, the text, where it goes and how it trains.

    Attributes:
        model: the model folder (transformers ``save_pretrained`` layout, with its tokenizer).
        scaling: the RoPE method to train with (``None``: plain RoPE).
        text: the training text (a UTF-8 file, a ``.jsonl`` with ``text``, or a folder of them).
        out: the new model folder.
        settings: how to train (:class:`ropekit.finetune.settings.FinetuneSettings`).
        layer_types: the layer types the method applies to (default: every RoPE layer).
        original_length: the pre-training length (default: from the config), the table's shorter length.
        resume: continue the interrupted run of ``out``.
        force: start over, replacing the files of ``out`` the run writes (the user's other files stay).
        evaluate: the before/after table (perplexity, passkey) once the model is written.
        eval_tokens: tokens scored per perplexity length in the table.
        passkey_trials: passkey trials at the target length in the table.
    """

    model: Path
    scaling: ScalingConfig | None
    text: Path
    out: Path
    settings: FinetuneSettings
    layer_types: tuple[str, ...] | None = None
    original_length: int | None = None
    resume: bool = False
    force: bool = False
    evaluate: bool = True
    eval_tokens: int = 16384
    passkey_trials: int = 5

    def __post_init__(self) -> None:
        for name in ("model", "text", "out"):
            object.__setattr__(self, name, Path(getattr(self, name)))
        if self.layer_types is not None:
            object.__setattr__(self, "layer_types", tuple(self.layer_types))
        if self.original_length is not None:
            object.__setattr__(self, "original_length", require_int("original_length", self.original_length, minimum=1))
        object.__setattr__(self, "eval_tokens", require_int("eval_tokens", self.eval_tokens, minimum=1))
        object.__setattr__(self, "passkey_trials", require_int("passkey_trials", self.passkey_trials, minimum=1))
        if self.settings.mixed_window:  # short sequences take the short list: equal lists become the original RoPE
            from ropekit.mixed_window import mixed_window_scaling

            object.__setattr__(self, "scaling", mixed_window_scaling(self.scaling))


@dataclass
class PreparedRun:
    """What :func:`prepare` checked and read: everything training and export need but the weights.

    Attributes:
        original: the original (pre-training) length.
        config: the ``config.json`` to write; ``notes`` says how the method is written.
        identity: what a resumed run must match (model, method, text path and sha256).
        copy_from: a finished run's work folder to resume from (``None``: the hidden partial folder's, or a new run).
        data: the training windows and the held-out tokens.
        heldout_windows: ``(count, target_length)`` windows of the held-out loss.
        mixed: with ``settings.mixed_window``, the training rows (:class:`ropekit.finetune.mixed.MixedRows`), which
            replace ``data.windows``.
        accelerator: the run's :class:`accelerate.Accelerator`.
        log: prints on the main process only.
    """

    request: FinetuneRequest
    original: int
    config: dict[str, Any]
    notes: list[str]
    identity: dict[str, Any]
    copy_from: Path | None
    tokenizer: Any
    data: PackedText
    heldout_windows: torch.Tensor
    accelerator: Any
    log: Callable[[str], None] = field(default=lambda message: None)
    mixed: Any = None  # the mixed-window rows (ropekit.finetune.mixed.MixedRows) when settings.mixed_window


def prepare(
    request: FinetuneRequest, *, log: Callable[[str], None] = lambda message: None, out_checked: bool = False
) -> PreparedRun:
    """Every check of ``request`` before training (see the module docstring); the data, tokenized and packed.

    ``out_checked``: the caller has run :func:`check_run_out` on these paths (``ropekit finetune`` runs it first,
    before it reads the model to resolve the method), so it is not run again.

    Raises:
        ValueError: not a RoPE model, no tokenizer, a target not above the original length (or below the model's
            current one), a method transformers cannot express, a text shorter than one window plus the held-out
            tail, an ``out`` that is, holds or lies inside the model or the text, ``resume`` with other settings,
            another text or nothing to resume, or FSDP asked for on a machine without GPUs.
        FileExistsError: ``out`` holds a run, or files the run writes, and neither ``force`` nor ``resume`` is
            given (files the run does not write are left alone).
        FileNotFoundError: no model, no text, or no parent folder for ``out``.
    """
    from ropekit.finetune.data import pack, tokenize_text
    from ropekit.integrations.hf.load import load_tokenizer

    if not out_checked:
        check_run_out(request.out, request.model, request.text, resume=request.resume, force=request.force)
    from ropekit.finetune.sharded import refusal

    if refused := refusal(request.settings, resume=request.resume):  # what the engines cannot run, by name
        raise refused
    original, config, notes, documents = _check_inputs(request)
    identity = {
        "model": str(request.model.resolve()),
        "scaling": repr(request.scaling),
        "text": str(request.text.resolve()),
        "text_sha256": documents.sha256,
    }
    copy_from = _check_resume(request, identity)
    accelerator = make_accelerator(request.settings)
    if not accelerator.is_main_process:
        log = lambda message: None  # noqa: E731 - one process speaks
    if note := fsdp_fallback_note(accelerator):
        log(note)
    tokenizer = load_tokenizer(request.model)
    settings, target = request.settings, request.settings.target_length
    data = pack(tokenize_text(tokenizer, documents), target, window=settings.window)
    count = max(1, min(settings.heldout_windows, (len(data.heldout) - 1) // target))
    heldout_windows = data.heldout[: count * target].reshape(count, target)  # (count, target)
    log(data_summary(data, settings, notes))
    mixed = None
    if settings.mixed_window:
        mixed = _mixed_rows(request, tokenizer, documents, data)
        log(mixed.summary(request.scaling, pose=settings.window is not None))
    return PreparedRun(
        request, original, config, notes, identity, copy_from, tokenizer, data, heldout_windows, accelerator, log, mixed
    )


def _mixed_rows(request: FinetuneRequest, tokenizer, documents, data: PackedText):
    """The mixed-window rows of the training documents, each tokenized alone and ended by the end-of-sequence token
    (the stream :func:`ropekit.finetune.data.pack` cut, document by document, up to the held-out tail)."""
    from ropekit.finetune.mixed import pack_mixed

    eos = [] if tokenizer.eos_token_id is None else [int(tokenizer.eos_token_id)]
    budget, kept = data.tokens - len(data.heldout), []
    for document in documents.documents:  # the held-out tail is the end of the stream: stop where it starts
        if budget <= 0:
            break
        ids = tokenizer(document.decode("utf-8"), add_special_tokens=True)["input_ids"] + eos
        kept.append(torch.tensor(ids[:budget], dtype=torch.int64))
        budget -= len(ids)
    settings = request.settings
    return pack_mixed(
        kept,
        original=request.scaling.original_max_position_embeddings,
        target_length=settings.target_length,
        window=settings.window,
    )


def data_summary(data: PackedText, settings: FinetuneSettings, notes: Sequence[str]) -> str:
    """One line: the tokens, the training windows, what is held out and what no window holds."""
    windows, size = data.windows.shape
    pose = ""
    if settings.window is not None:
        pose = f" (PoSE: positions over {settings.target_length:,}, {settings.chunks} chunks)"
    left = f", {data.left_out:,} left out (the incomplete last window)" if data.left_out else ""
    return (
        f"{data.tokens:,} tokens: {windows:,} training windows of {size:,}{pose}, {len(data.heldout):,} held out"
        f"{left}; RoPE: {'; '.join(notes)}"
    )


#: what ``finetune`` writes at the top of ``out`` whatever the model (beside the model's files, see :func:`run_names`)
RUN_NAMES = ("config.json", WORK_DIR)


def run_names(model: Path) -> list[str]:
    """The names checked in ``out`` before the run: :data:`RUN_NAMES` and the files ``extend`` would copy from the
    model (the saved model has the source's weights, tokenizer and generation files); what the save writes beyond
    them is checked once it is written, before anything is renamed into ``out``."""
    from ropekit.integrations.hf.extend import written_names

    return sorted({*RUN_NAMES, *written_names(model), *(("model.safetensors",) if not model.is_dir() else ())})


def check_run_out(out: Path, model: Path, text: str | Path, *, resume: bool, force: bool) -> None:
    """The checks of the output folder, the first :func:`prepare` makes (cheap: they read no model or text).

    Raises:
        ValueError: ``out`` is, holds or lies inside the model or the text; ``resume`` with no checkpoint.
        FileExistsError: ``out`` (or the hidden folder an interrupted run of it left) holds a run, and neither
            ``resume`` nor ``force`` is given; ``out`` holds files the run writes (:func:`run_names`) without
            ``force`` (other files there are left alone); ``out`` is a file.
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


def _check_inputs(request: FinetuneRequest) -> tuple[int, dict[str, Any], list[str], Any]:
    """The model, the method and the text: ``(original length, config to write, notes, the text's documents)``."""
    from ropekit.eval.text import read_text
    from ropekit.integrations.hf.input_checks import check_not_shorter, check_tokenizer
    from ropekit.integrations.hf.load import transformers_config
    from ropekit.integrations.hf.model_config import extended_config, first_scaled_type, original_length_of, rope_of

    target, layer_types = request.settings.target_length, request.layer_types
    config = transformers_config(request.model)  # written with the fine-tuned model: every key
    rope = rope_of(config, first_scaled_type(config, layer_types))
    check_tokenizer(request.model)
    original = request.original_length or original_length_of(config, rope)
    if target <= original:
        raise ValueError(
            f"target_length must be above the model's original length {original:,}, got {target:,}; fine-tuning "
            "extends the context"
        )
    check_not_shorter(config, rope, request.scaling, original, target)
    new_config, notes = extended_config(config, request.scaling, target_length=target, layer_types=layer_types)
    if not request.text.exists():
        raise MissingFile("text", str(request.text), message=f"text {str(request.text)!r} does not exist")
    return original, new_config, notes, read_text(request.text)


def _check_resume(request: FinetuneRequest, identity: dict[str, Any]) -> Path | None:
    """A resumed run's settings and text against the interrupted run's; the finished run to copy from, if any."""
    from ropekit._output import partial_dir

    if not request.resume:
        return None
    work, finished = partial_dir(request.out) / WORK_DIR, request.out / WORK_DIR
    if (work / "checkpoint" / "progress.json").is_file():
        _same_settings(work, request.settings, identity)
        return None
    _same_settings(finished, request.settings, identity)  # check_run_out found a checkpoint in one of them
    return finished


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
