"""The ``accelerate`` plumbing of a training run: every process stops at the same step, a checkpoint is swapped in
whole, and one process shows the progress bar."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch


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
