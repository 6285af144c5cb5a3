"""The ``accelerate`` plumbing of a training run: the run's Accelerator, every process stops at the same step, a
checkpoint is swapped in whole, and one process shows the progress bar."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import torch

from ropekit.finetune.settings import FinetuneSettings, resolved_mixed_precision


def main_thread() -> bool:
    """Whether this is the main thread (only it may install the SIGINT handler that stops a run cleanly)."""
    import threading

    return threading.current_thread() is threading.main_thread()


def any_process(accelerator, flag: bool) -> bool:
    """Whether ``flag`` is set on any process (so every process stops at the same step)."""
    if accelerator.num_processes == 1:
        return flag
    value = torch.tensor([1.0 if flag else 0.0], device=accelerator.device)
    return bool(accelerator.reduce(value, reduction="sum").item() > 0)


def save_checkpoint(accelerator, state_dir: Path, step: int) -> None:
    """A resumable checkpoint at ``step``: written beside the old one, then swapped in (a crash keeps one)."""
    fresh = state_dir.with_name(state_dir.name + ".new")
    if accelerator.is_main_process and fresh.exists():
        shutil.rmtree(fresh)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(fresh))
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        (fresh / "progress.json").write_text(json.dumps({"step": step}) + "\n")
        if state_dir.exists():
            shutil.rmtree(state_dir)
        fresh.rename(state_dir)
    accelerator.wait_for_everyone()


def progress_bar(accelerator, enabled: bool, total: int, done: int, title: str):
    if not (enabled and accelerator.is_main_process):
        return None
    from ropekit._progress import progress_bar as make_bar

    bar = make_bar(title, steps=True)
    bar.start()
    return bar, bar.add_task("", total=total, completed=done)


def make_accelerator(settings: FinetuneSettings):
    """The run's Accelerator. Create it before any other accelerate state: a bare ``PartialState()`` made first
    ignores ``ACCELERATE_USE_CPU`` and leaves each launched CPU worker a single process of its own.

    A ``WORLD_SIZE`` without a launcher is refused first (:func:`ropekit.eval.parallel.launched_processes`); the
    processes of a launch then join within torch's process-group timeout (30 minutes on gloo, 10 on NCCL), which
    is also how long a training collective may wait, and a rendezvous that times out is a ``ValueError``."""
    from accelerate import Accelerator

    from ropekit.eval.parallel import join_error, launched_processes

    launched_processes()  # a WORLD_SIZE left in the shell is refused before accelerate waits for its peers
    try:
        if settings.sequence_parallel is not None:  # DeepSpeed (Ulysses over groups of N processes)
            from ropekit.finetune.sharded import sequence_parallel_accelerator

            return sequence_parallel_accelerator(settings)
        return Accelerator(
            gradient_accumulation_steps=settings.grad_accum,
            mixed_precision=resolved_mixed_precision(settings.mixed_precision),
        )
    except RuntimeError as error:  # accelerate 1.15's FSDP plugin, sync_module_states on a machine with no GPU
        if isinstance(error, torch.distributed.DistError):  # the launch's processes did not join
            raise join_error(error) from None
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
