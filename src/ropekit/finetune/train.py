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

import json
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ropekit.finetune.lora import lora_model
from ropekit.finetune.loss import ChunkedCausalLM, prepared_model
from ropekit.finetune.loss_log import StepRecord, plot_loss, read_loss_log, write_loss_log
from ropekit.finetune.mixed import MixedRows
from ropekit.finetune.pose import PoseSettings
from ropekit.finetune.processes import any_process, main_thread, make_accelerator, progress_bar, save_checkpoint
from ropekit.finetune.settings import FinetuneSettings
from ropekit.integrations.hf.output_head import check_head


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


def checked_model(build_model: Callable[[], nn.Module]) -> nn.Module:
    """``build_model()``, refused unless training's loss is the model's own (its output head, as ropekit computes it
    in chunks: :func:`ropekit.integrations.hf.output_head.check_head`). Training and the dry run's measured step load
    through this."""
    model = build_model()
    check_head(model, what="train on its loss")
    return model


def train(
    build_model: Callable[[], nn.Module],
    windows: torch.Tensor | MixedRows,
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
        windows: ``(n, target_length)`` training windows (``(n, window)`` with PoSE: ``settings.window``), or
            mixed-window rows (:class:`ropekit.finetune.mixed.MixedRows`, with ``settings.mixed_window``).
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
            build_model,
            windows,
            heldout,
            settings,
            work_dir,
            resume=resume,
            on_step=on_step,
            progress=progress,
            title=title,
            accelerator=accelerator,
            stop=stop,
        )
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def _train(
    build_model: Callable[[], nn.Module],
    windows: torch.Tensor,
    heldout: torch.Tensor,
    settings: FinetuneSettings,
    work_dir: Path,
    *,
    resume: bool,
    on_step: Callable[[StepRecord], None] | None,
    progress: bool,
    title: str,
    accelerator: Any,
    stop: dict[str, bool],
) -> TrainResult:
    """:func:`train` once its Ctrl-C handler is installed; ``stop["requested"]`` is set by that handler."""
    from accelerate.utils import set_seed

    accelerator = make_accelerator(settings) if accelerator is None else accelerator
    set_seed(settings.seed)
    loop = _Loop.build(build_model, windows, heldout, settings, work_dir, accelerator, progress=progress, title=title)
    start, log = loop.restore() if resume else (0, [])
    result = TrainResult(
        start,
        False,
        log,
        processes=data_parallel(accelerator, settings) * (settings.sequence_parallel or 1),
        distributed=str(accelerator.distributed_type.value),
    )
    result.heldout_before = log[0].heldout_loss if log and log[0].step == 0 else None
    if not resume:
        result.heldout_before = loop.heldout_loss("before training")
        log.append(StepRecord(0, float("nan"), 0.0, 0, 0.0, result.heldout_before))
    loop.run(result, start, on_step, stop)
    loop.checkpoint(result.steps_done)
    if accelerator.is_main_process:
        plot_loss(work_dir / "loss.png", log, title)
    if result.interrupted:
        return result
    result.heldout_after = loop.heldout_loss("after training")
    log[-1].heldout_loss = result.heldout_after
    if accelerator.is_main_process:
        write_loss_log(work_dir / "loss.csv", log)
        plot_loss(work_dir / "loss.png", log, title)
    result.model = _final_model(accelerator, loop.wrapper, build_model, settings)
    accelerator.wait_for_everyone()
    return result


@dataclass
class _Loop:
    """One process's training loop: the prepared model, optimizer, schedule and batches, and where it writes."""

    accelerator: Any
    wrapper: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: Any
    loader: Any
    settings: FinetuneSettings
    work_dir: Path
    heldout: torch.Tensor  # (at most settings.heldout_windows, target_length)
    progress: bool
    title: str

    @classmethod
    def build(cls, build_model, windows, heldout, settings, work_dir, accelerator, *, progress, title) -> _Loop:
        """The model (checked), AdamW, the schedule and the seeded batches, prepared by ``accelerator``."""
        wrapper = prepared_model(checked_model(build_model), settings)
        parameters = [p for p in wrapper.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(parameters, lr=settings.lr, betas=(0.9, 0.95), weight_decay=settings.weight_decay)
        # Stepped by hand once per optimizer step: a prepared scheduler steps once per process.
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, settings.lr_factor)
        global_batch = settings.batch_size * settings.grad_accum * data_parallel(accelerator, settings)
        order = window_order(len(windows), settings.steps * global_batch, settings.seed)
        pose = None
        if settings.window is not None:  # PoSE: each sample's position ids, a function of (seed, sample number)
            pose = PoseSettings(
                window=settings.window, target_length=settings.target_length, chunks=settings.chunks, seed=settings.seed
            )
        if settings.sequence_parallel is not None:  # rows as the engine's data adapter takes them
            from ropekit.finetune.sharded import sharded_rows

            positions = None if pose is None else pose.batch(torch.arange(len(order)))
            data: Any = sharded_rows(windows[order], positions)
        elif isinstance(windows, MixedRows):
            data = torch.utils.data.TensorDataset(*windows.samples(order, pose))
        elif pose is not None:
            data = torch.utils.data.TensorDataset(windows[order], pose.batch(torch.arange(len(order))))
        else:
            data = windows[order]  # (samples, length)
        loader = torch.utils.data.DataLoader(data, batch_size=settings.batch_size, shuffle=False, drop_last=True)
        wrapper, optimizer, loader = accelerator.prepare(wrapper, optimizer, loader)
        accelerator.register_for_checkpointing(scheduler)
        heldout_windows = heldout[: settings.heldout_windows]
        return cls(
            accelerator, wrapper, optimizer, scheduler, loader, settings, work_dir, heldout_windows, progress, title
        )

    @property
    def tokens_per_step(self) -> int:
        settings = self.settings
        global_batch = settings.batch_size * settings.grad_accum * data_parallel(self.accelerator, settings)
        return global_batch * (settings.window or settings.target_length)

    def restore(self) -> tuple[int, list[StepRecord]]:
        """Load the checkpoint and skip the batches it consumed: ``(its step, the loss log up to that step)``."""
        state_dir = self.work_dir / "checkpoint"
        self.accelerator.load_state(str(state_dir))
        start = int(json.loads((state_dir / "progress.json").read_text())["step"])
        log = [r for r in read_loss_log(self.work_dir / "loss.csv") if r.step <= start]
        self.loader = self.accelerator.skip_first_batches(self.loader, start * self.settings.grad_accum)
        return start, log

    def checkpoint(self, step: int) -> None:
        save_checkpoint(self.accelerator, self.work_dir / "checkpoint", step)

    def heldout_loss(self, when: str, own_bar: bool = True) -> float:
        """Mean loss over the held-out windows. They are full target length, a long forward, so outside training
        (``own_bar``) it shows a bar of its own; rich draws one live bar at a time."""
        accelerator, wrapper = self.accelerator, self.wrapper
        shown = progress_bar(accelerator, self.progress and own_bar, len(self.heldout), 0, f"held-out loss {when}")
        wrapper.eval()
        losses = []
        try:
            with torch.no_grad():
                for window in self.heldout:
                    losses.append(self._loss_of(window).item())
                    if shown is not None:
                        shown[0].update(shown[1], advance=1, description=f"windows of {len(window):,} tokens")
        finally:
            if shown is not None:
                shown[0].stop()
        wrapper.train()
        return sum(losses) / len(losses)

    def _loss_of(self, window: torch.Tensor) -> torch.Tensor:
        """One held-out window's loss (sharded like a training row under sequence parallelism)."""
        degree, device = self.settings.sequence_parallel, self.accelerator.device
        if degree is None:
            return self.wrapper(window[None].to(device))
        from ropekit.finetune.sharded import heldout_shard

        self.wrapper.train()  # the engine shards only in training mode (it is told to step aside in eval)
        return self.wrapper(**heldout_shard(window, degree, device))

    def step(self, batches) -> tuple[float, float]:
        """One optimizer step over ``grad_accum`` micro-batches: ``(mean loss over processes, learning rate)``."""
        accelerator, wrapper, settings = self.accelerator, self.wrapper, self.settings
        losses = []
        for _ in range(settings.grad_accum):
            batch = next(batches)
            with accelerator.accumulate(wrapper):
                # (ids, positions[, documents]) with PoSE or mixed windows, else ids
                loss = (
                    wrapper(**batch)
                    if isinstance(batch, dict)
                    else wrapper(*batch)
                    if isinstance(batch, (list, tuple))
                    else wrapper(batch)
                )
                accelerator.backward(loss)
                if accelerator.sync_gradients and settings.max_grad_norm:
                    # all of the prepared model's parameters: accelerate then uses FSDP's own sharded clipping
                    accelerator.clip_grad_norm_(wrapper.parameters(), settings.max_grad_norm)
                self.optimizer.step()
                self.optimizer.zero_grad()
            losses.append(loss.detach().float())
        lr = self.scheduler.get_last_lr()[0]
        self.scheduler.step()
        return accelerator.gather(torch.stack(losses).mean()[None]).mean().item(), lr

    def run(self, result: TrainResult, start: int, on_step, stop: dict[str, bool]) -> None:
        """Steps ``start … settings.steps − 1`` (until a stop is requested); fills ``result`` and its log."""
        accelerator, settings, log = self.accelerator, self.settings, result.log
        bar = progress_bar(accelerator, self.progress, settings.steps, start, self.title)
        elapsed = log[-1].seconds if log else 0.0
        session_seconds, timed_steps = 0.0, 0  # this run's training time (tokens/s leaves out a resumed run's past)
        try:
            self.wrapper.train()
            batches = iter(self.loader)
            for step in range(start, settings.steps):
                t0 = time.perf_counter()
                step_loss, lr = self.step(batches)
                seconds = time.perf_counter() - t0
                elapsed, session_seconds, timed_steps = elapsed + seconds, session_seconds + seconds, timed_steps + 1
                record = StepRecord(step + 1, step_loss, lr, self.tokens_per_step * (step + 1), elapsed)
                if settings.eval_every and (step + 1) % settings.eval_every == 0 and step + 1 < settings.steps:
                    if bar is not None:
                        bar[0].update(bar[1], description=f"held-out loss on {len(self.heldout)} window(s)…")
                    record.heldout_loss = self.heldout_loss(f"at step {step + 1}", own_bar=False)
                log.append(record)
                result.steps_done = step + 1
                self._after_step(log, on_step, stop)
                if bar is not None:
                    rate = self.tokens_per_step * timed_steps / session_seconds
                    bar[0].update(bar[1], advance=1, description=f"loss {step_loss:.4f}  {rate:,.0f} tok/s")
                if any_process(accelerator, stop["requested"]):
                    result.interrupted = True
                    break
                if (
                    settings.checkpoint_every
                    and (step + 1) % settings.checkpoint_every == 0
                    and step + 1 < settings.steps
                ):
                    self.checkpoint(step + 1)
        finally:
            if bar is not None:
                bar[0].stop()
        if session_seconds > 0:
            result.tokens_per_second = self.tokens_per_step * timed_steps / session_seconds

    def _after_step(self, log: list[StepRecord], on_step, stop: dict[str, bool]) -> None:
        """On the main process: the loss log written, then ``on_step`` with the step's record (it may ask to stop)."""
        if not self.accelerator.is_main_process:
            return
        write_loss_log(self.work_dir / "loss.csv", log)
        if on_step is not None:
            try:
                on_step(log[-1])
            except StopTraining:
                stop["requested"] = True


def data_parallel(accelerator, settings: FinetuneSettings) -> int:
    """Rows processed side by side: the processes, over ``sequence_parallel`` (one row per group of processes)."""
    processes = torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1
    return max(accelerator.num_processes, processes) // (settings.sequence_parallel or 1)


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
