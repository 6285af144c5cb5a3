"""Continued training at the target length, on ``accelerate`` (PI arXiv 2306.15595 §3; YaRN arXiv 2309.00071 §4;
Men et al. arXiv 2405.14591 §5; LongLoRA arXiv 2309.12307 for LoRA with trainable norms and embeddings).

One code path for one CPU, one GPU, DDP and FSDP: the :class:`accelerate.Accelerator` wraps the model, shards the
batches, synchronises gradients (with accumulation), applies bf16 autocast and saves/loads resumable state, so
``accelerate launch -m ropekit.cli finetune ...`` scales out without a change.

Data order is a function of the seed alone: the training windows are laid out as successive seeded permutations
(one per epoch) and read in order; a resumed run skips the batches already consumed, so it continues the exact loss
curve of an uninterrupted run. The loss is the mean next-token cross-entropy, computed from the decoder's final
hidden states a chunk of positions at a time (recomputed in the backward pass) once the logits would pass 256 MiB,
so ``(seq × vocab)`` logits never exist at once — at 32k tokens and a 49k vocabulary they would be 6.4 GB in fp32.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ropekit._validate import require_choice, require_float, require_int
from ropekit.finetune.lora import lora_model
from ropekit.finetune.loss import ChunkedCausalLM, prepared_model
from ropekit.finetune.loss_log import StepRecord, plot_loss, read_loss_log, write_loss_log
from ropekit.finetune.pose import PoseSettings
from ropekit.finetune.processes import any_process, main_thread, progress_bar, save_checkpoint
from ropekit.integrations.head import check_head

MIXED_PRECISION = ("auto", "bf16", "fp16", "no")
#: where the training artefacts go inside the output model folder
WORK_DIR = "finetune"


@dataclass(frozen=True, kw_only=True)
class FinetuneSettings:
    """How to train (everything that changes the loss curve; a resumed run must use the same values).

    Attributes:
        target_length: tokens per training window (the new context length).
        steps: optimizer steps.
        lr: peak learning rate (AdamW).
        warmup_steps: linear warm-up steps (default: 5% of ``steps``, at least 1), then cosine decay to
            ``min_lr_ratio × lr``.
        batch_size: windows per process per micro-step.
        grad_accum: micro-steps per optimizer step (global batch = batch_size × grad_accum × processes).
        weight_decay, max_grad_norm: AdamW weight decay; gradient clipping (0 disables).
        seed: data order and LoRA initialisation.
        lora_rank: 0 trains every weight; > 0 trains LoRA adapters (all linear layers but the output head) plus
            the norms and embeddings (LongLoRA's finding: LoRA alone fails at long context).
        lora_alpha: LoRA scaling numerator (default 2 × rank).
        gradient_checkpointing: recompute decoder layers in the backward pass.
        mixed_precision: ``auto`` (bf16 on a GPU that supports it, else what ``accelerate launch`` says, else none),
            ``bf16``, ``fp16`` or ``no``.
        checkpoint_every: save a resumable checkpoint every this many steps (0: only at the end or on Ctrl-C).
        eval_every: held-out loss every this many steps (0: only before and after).
        heldout_windows: at most this many held-out windows for the held-out loss.
        window: PoSE (:mod:`ropekit.finetune.pose`): train on windows of this many tokens whose position ids skip
            so that they span ``[0, target_length)``; ``None``: full-length windows of ``target_length``. The
            held-out loss stays at ``target_length``.
        chunks: PoSE chunks per window (2, as in the paper); the skips are drawn from ``seed`` and the sample index.
    """

    target_length: int
    steps: int = 400
    lr: float = 2e-5
    warmup_steps: int | None = None
    min_lr_ratio: float = 0.1
    batch_size: int = 1
    grad_accum: int = 1
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    seed: int = 0
    lora_rank: int = 0
    lora_alpha: float | None = None
    gradient_checkpointing: bool = True
    mixed_precision: str = "auto"
    checkpoint_every: int = 100
    eval_every: int = 0
    heldout_windows: int = 2
    window: int | None = None
    chunks: int = 2

    def __post_init__(self) -> None:
        # store what the checks return (plain Python numbers), so numpy inputs still give a JSON-ready to_dict()
        checked: dict[str, Any] = {"target_length": require_int("target_length", self.target_length, minimum=2)}
        checked["steps"] = require_int("steps", self.steps, minimum=1)
        checked["lr"] = require_float("lr", self.lr, above=0.0)
        warmup = max(1, checked["steps"] // 20) if self.warmup_steps is None else self.warmup_steps
        checked["warmup_steps"] = require_int("warmup_steps", warmup, minimum=0)
        checked["min_lr_ratio"] = require_float("min_lr_ratio", self.min_lr_ratio)
        if not 0.0 <= checked["min_lr_ratio"] <= 1.0:
            raise ValueError(f"min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}")
        for name in ("batch_size", "grad_accum"):
            checked[name] = require_int(name, getattr(self, name), minimum=1)
        checked["weight_decay"] = require_float("weight_decay", self.weight_decay, at_least=0.0)
        checked["max_grad_norm"] = require_float("max_grad_norm", self.max_grad_norm, at_least=0.0)
        checked["seed"] = require_int("seed", self.seed, minimum=0)
        checked["lora_rank"] = require_int("lora_rank", self.lora_rank, minimum=0)
        if self.lora_alpha is not None:
            checked["lora_alpha"] = require_float("lora_alpha", self.lora_alpha, above=0.0)
        require_choice("mixed_precision", self.mixed_precision, MIXED_PRECISION)
        for name in ("checkpoint_every", "eval_every"):
            checked[name] = require_int(name, getattr(self, name), minimum=0)
        checked["heldout_windows"] = require_int("heldout_windows", self.heldout_windows, minimum=1)
        if self.window is not None:
            if require_int("window", self.window, minimum=2) > checked["target_length"]:
                raise ValueError(
                    f"window must be at most target_length={checked['target_length']} (PoSE trains on windows "
                    f"shorter than the target), got {self.window}"
                )
            pose = PoseSettings(window=self.window, target_length=checked["target_length"], chunks=self.chunks)
            checked["window"], checked["chunks"] = pose.window, pose.chunks
        else:
            checked["chunks"] = require_int("chunks", self.chunks, minimum=1)
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def learning_rate(self, step: int) -> float:
        """The learning rate multiplier for optimizer step ``step`` (0-based): linear warm-up, then cosine."""
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        span = max(1, self.steps - self.warmup_steps)
        progress = min(1.0, (step - self.warmup_steps) / span)
        return self.min_lr_ratio + (1 - self.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def window_order(count: int, needed: int, seed: int) -> torch.Tensor:
    """Successive seeded permutations of ``range(count)`` (one per epoch), cut to ``needed`` indices."""
    epochs = -(-needed // count)
    order = [
        torch.randperm(count, generator=torch.Generator().manual_seed(seed * 100003 + epoch)) for epoch in range(epochs)
    ]
    return torch.cat(order)[:needed]


@dataclass
class TrainResult:
    """What a (possibly interrupted) training run did."""

    steps_done: int
    interrupted: bool
    log: list[StepRecord] = field(default_factory=list)
    heldout_before: float | None = None
    heldout_after: float | None = None
    model: nn.Module | None = None  # the trained (LoRA-merged) transformers model, main process only
    tokens_per_second: float = 0.0
    processes: int = 1
    distributed: str = "NO"  # accelerate's distributed type: NO, MULTI_CPU, MULTI_GPU, FSDP, ...


def _mixed_precision(name: str) -> str | None:
    if name != "auto":
        return name
    if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        return "bf16"
    return None if os.environ.get("ACCELERATE_MIXED_PRECISION") else "no"


def make_accelerator(settings: FinetuneSettings):
    """The run's Accelerator. Create it before any other accelerate state: a bare ``PartialState()`` made first
    ignores ``ACCELERATE_USE_CPU`` and leaves each launched CPU worker a single process of its own."""
    from accelerate import Accelerator

    try:
        return Accelerator(
            gradient_accumulation_steps=settings.grad_accum, mixed_precision=_mixed_precision(settings.mixed_precision)
        )
    except RuntimeError as error:  # accelerate 1.15's FSDP plugin, sync_module_states on a machine with no GPU
        if "no available devices" not in str(error):
            raise
        raise ValueError(
            "the accelerate config asks for FSDP (fsdp_sync_module_states: true), which accelerate runs only on GPUs "
            "(or other accelerators) and this machine has none; on CPU use configs/ddp.yaml with "
            "ACCELERATE_USE_CPU=true (data parallel over gloo) or a single process"
        ) from None


def fsdp_fallback_note(accelerator) -> str | None:
    """A note when the launch asked for FSDP but accelerate runs plain data parallelism (it does on CPU)."""
    asked = os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true"
    if not asked or accelerator.distributed_type.value == "FSDP":
        return None
    return (
        f"note: the accelerate config asks for FSDP, but accelerate runs FSDP only on GPUs; this run is "
        f"{accelerator.distributed_type.value} (every process holds the whole model and optimizer state)"
    )


def train(
    build_model: Callable[[], nn.Module],
    windows: torch.Tensor,
    heldout: torch.Tensor,
    settings: FinetuneSettings,
    work_dir: Path,
    *,
    resume: bool = False,
    on_step: Callable[[StepRecord], None] | None = None,
    progress: bool = True,
    title: str = "fine-tune",
    accelerator=None,
) -> TrainResult:
    """Train ``build_model()`` (a transformers causal LM with its new RoPE) on ``windows``; checkpoints in ``work_dir``.

    Every process calls this. Ctrl-C (SIGINT) on any process, from the moment this is called, stops all of them after
    the current (or first) optimizer step with a resumable checkpoint; so does an ``on_step`` that raises
    :class:`StopTraining`. A second Ctrl-C stops at once (``KeyboardInterrupt``, no checkpoint).

    Args:
        build_model: returns the model to train (called once per process, after the seed is set).
        windows: ``(n, target_length)`` training windows (``(n, window)`` with PoSE: ``settings.window``).
        heldout: ``(m, target_length)`` held-out windows.
        settings: see :class:`FinetuneSettings`.
        work_dir: where ``checkpoint/``, ``loss.csv`` and ``loss.png`` go.
        resume: continue from ``work_dir/checkpoint``.
        on_step: called on the main process after each optimizer step.
        progress: show a progress bar (main process).
        accelerator: the run's :class:`accelerate.Accelerator` (default: :func:`make_accelerator`).

    Returns:
        A :class:`TrainResult`; ``model`` (main process) is the trained transformers model, LoRA merged.
    """
    stop = {"requested": False}

    def on_sigint(signum, frame):
        if stop["requested"]:  # a second Ctrl-C: stop now, without a checkpoint
            raise KeyboardInterrupt
        stop["requested"] = True

    previous = signal.signal(signal.SIGINT, on_sigint) if main_thread() else None
    try:
        return _train(
            build_model, windows, heldout, settings, work_dir, resume, on_step, progress, title, accelerator, stop
        )
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def _train(build_model, windows, heldout, settings, work_dir, resume, on_step, progress, title, accelerator, stop):
    from accelerate.utils import set_seed

    accelerator = make_accelerator(settings) if accelerator is None else accelerator
    set_seed(settings.seed)
    model = build_model()
    check_head(model, what="train on its loss")  # before any step: the loss must be the model's own
    wrapper = prepared_model(model, settings)
    parameters = [p for p in wrapper.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(parameters, lr=settings.lr, betas=(0.9, 0.95), weight_decay=settings.weight_decay)
    # Stepped by hand once per optimizer step: a prepared scheduler steps once per process.
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, settings.learning_rate)
    global_batch = settings.batch_size * settings.grad_accum * accelerator.num_processes
    order = window_order(len(windows), settings.steps * global_batch, settings.seed)
    data: Any = windows[order]  # (samples, length)
    if settings.window is not None:  # PoSE: each sample's position ids, a function of (seed, sample number)
        pose = PoseSettings(
            window=settings.window, target_length=settings.target_length, chunks=settings.chunks, seed=settings.seed
        )
        data = torch.utils.data.TensorDataset(data, pose.batch(torch.arange(len(order))))
    loader = torch.utils.data.DataLoader(data, batch_size=settings.batch_size, shuffle=False, drop_last=True)
    wrapper, optimizer, loader = accelerator.prepare(wrapper, optimizer, loader)
    accelerator.register_for_checkpointing(scheduler)

    state_dir = work_dir / "checkpoint"
    log: list[StepRecord] = []
    start = 0
    if resume:
        accelerator.load_state(str(state_dir))
        meta = json.loads((state_dir / "progress.json").read_text())
        start = int(meta["step"])
        log = [r for r in read_loss_log(work_dir / "loss.csv") if r.step <= start]
        loader = accelerator.skip_first_batches(loader, start * settings.grad_accum)

    def heldout_loss() -> float:
        wrapper.eval()
        with torch.no_grad():
            losses = [
                wrapper(window[None].to(accelerator.device)).item() for window in heldout[: settings.heldout_windows]
            ]
        wrapper.train()
        return sum(losses) / len(losses)

    result = TrainResult(
        start, False, log, processes=accelerator.num_processes, distributed=str(accelerator.distributed_type.value)
    )
    result.heldout_before = log[0].heldout_loss if log and log[0].step == 0 else None
    if not resume:
        result.heldout_before = heldout_loss()
        log.append(StepRecord(0, float("nan"), 0.0, 0, 0.0, result.heldout_before))

    tokens_per_step = global_batch * (settings.window or settings.target_length)
    bar = progress_bar(accelerator, progress, settings.steps, start, title)
    elapsed = log[-1].seconds if log else 0.0
    session_seconds = 0.0  # this run's training time (for tokens/s; a resumed run does not count the old one)
    timed_steps = 0
    try:
        wrapper.train()
        batches = iter(loader)
        for step in range(start, settings.steps):
            t0 = time.perf_counter()
            losses = []
            for _ in range(settings.grad_accum):
                batch = next(batches)
                with accelerator.accumulate(wrapper):
                    loss = wrapper(*batch) if settings.window is not None else wrapper(batch)  # (ids, positions)
                    accelerator.backward(loss)
                    if accelerator.sync_gradients and settings.max_grad_norm:
                        # all of the prepared model's parameters: accelerate then uses FSDP's own sharded clipping
                        accelerator.clip_grad_norm_(wrapper.parameters(), settings.max_grad_norm)
                    optimizer.step()
                    optimizer.zero_grad()
                losses.append(loss.detach().float())
            lr = scheduler.get_last_lr()[0]
            scheduler.step()
            step_loss = accelerator.gather(torch.stack(losses).mean()[None]).mean().item()
            seconds = time.perf_counter() - t0
            elapsed += seconds
            session_seconds += seconds
            timed_steps += 1
            record = StepRecord(step + 1, step_loss, lr, tokens_per_step * (step + 1), elapsed)
            if settings.eval_every and (step + 1) % settings.eval_every == 0 and step + 1 < settings.steps:
                record.heldout_loss = heldout_loss()
            log.append(record)
            result.steps_done = step + 1
            if accelerator.is_main_process:
                write_loss_log(work_dir / "loss.csv", log)
                if on_step is not None:
                    try:
                        on_step(record)
                    except StopTraining:
                        stop["requested"] = True
            if bar is not None:
                rate = tokens_per_step * timed_steps / session_seconds
                bar[0].update(bar[1], advance=1, description=f"loss {step_loss:.4f}  {rate:,.0f} tok/s")
            if any_process(accelerator, stop["requested"]):
                result.interrupted = True
                break
            if settings.checkpoint_every and (step + 1) % settings.checkpoint_every == 0 and step + 1 < settings.steps:
                save_checkpoint(accelerator, state_dir, step + 1)
    finally:
        if bar is not None:
            bar[0].stop()
    result.log = log
    if session_seconds > 0:
        result.tokens_per_second = tokens_per_step * timed_steps / session_seconds
    save_checkpoint(accelerator, state_dir, result.steps_done)
    if accelerator.is_main_process:
        plot_loss(work_dir / "loss.png", log, title)
    if result.interrupted:
        return result
    result.heldout_after = heldout_loss()
    log[-1].heldout_loss = result.heldout_after
    if accelerator.is_main_process:
        write_loss_log(work_dir / "loss.csv", log)
        plot_loss(work_dir / "loss.png", log, title)
    result.model = _final_model(accelerator, wrapper, build_model, settings)
    accelerator.wait_for_everyone()
    return result


class StopTraining(Exception):
    """Raised by an ``on_step`` callback to stop after the current step with a resumable checkpoint."""


def _final_model(accelerator, wrapper: nn.Module, build_model, settings: FinetuneSettings) -> nn.Module | None:
    """The trained transformers model on the main process (LoRA merged); ``None`` elsewhere."""
    state = accelerator.get_state_dict(wrapper)  # gathers FSDP shards; every process must call it
    if not accelerator.is_main_process:
        return None
    if accelerator.distributed_type.value == "FSDP":
        model = build_model()
        if settings.lora_rank:
            model = lora_model(model, rank=settings.lora_rank, alpha=settings.lora_alpha)
        fresh = ChunkedCausalLM(model)
        fresh.load_state_dict(state)
        model = fresh.model
    else:
        model = accelerator.unwrap_model(wrapper).model
    if settings.lora_rank:
        model = model.merge_and_unload()
    if getattr(model, "is_gradient_checkpointing", False):
        model.gradient_checkpointing_disable()
    return model.float().cpu().eval()
