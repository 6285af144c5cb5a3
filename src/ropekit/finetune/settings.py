"""How a fine-tuning run trains: :class:`FinetuneSettings`, validated once (every value that changes the loss curve;
a resumed run must use the same ones), and the mixed precision it resolves to."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

import torch

from ropekit._schedule import warmup_cosine
from ropekit._validate import require_choice, require_float, require_int
from ropekit.errors import ArgumentType, InvalidArgument, Namer, Placeholder
from ropekit.finetune.pose import PoseSettings

MIXED_PRECISION = ("auto", "bf16", "fp16", "no")


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
        chunks: PoSE chunks per window (default 2, as in the paper; ``None`` without ``window``); the skips are
            drawn from ``seed`` and the sample index.
        mixed_window: LongRoPE2's mixed windows (:mod:`ropekit.finetune.mixed`, :mod:`ropekit.mixed_window`): rows
            packed from short documents (positions reset per document, the short list) or from long ones (the long
            list), chosen per row by ``max(position_ids) + 1 > L0``; needs a ``longrope`` scaling.
        sequence_parallel: train on accelerate's DeepSpeed engine, each row's sequence sharded over this many
            processes by Ulysses (:mod:`ropekit.finetune.sharded`; 1: the same engine, each row on one process); ``None``: not.
        context_parallel: each row sharded over this many GPUs by torch's ring attention (accelerate's ``cp_size``,
            FSDP2); ``None``: not.

    Raises:
        ValueError, TypeError: a value out of range, naming the field; ``chunks`` without ``window``.
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
    chunks: int | None = None
    mixed_window: bool = False
    sequence_parallel: int | None = None
    context_parallel: int | None = None

    def __post_init__(self) -> None:
        # store what the checks return (plain Python numbers), so numpy inputs still give a JSON-ready to_dict()
        checked: dict[str, Any] = {"target_length": require_int("target_length", self.target_length, minimum=2)}
        checked["steps"] = require_int("steps", self.steps, minimum=1)
        checked["lr"] = require_float("lr", self.lr, above=0.0)
        warmup = max(1, checked["steps"] // 20) if self.warmup_steps is None else self.warmup_steps
        checked["warmup_steps"] = require_int("warmup_steps", warmup, minimum=0)
        checked["min_lr_ratio"] = require_float("min_lr_ratio", self.min_lr_ratio)
        if not 0.0 <= checked["min_lr_ratio"] <= 1.0:
            raise InvalidArgument("min_lr_ratio", self.min_lr_ratio, "must be in [0, 1]", allowed="[0, 1]")
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
                target = checked["target_length"]
                raise InvalidArgument(
                    "window",
                    self.window,
                    allowed=f"<= {target}",
                    message=lambda n: (
                        f"{n('window')} must be at most {n('target_length', target)} (PoSE trains on windows "
                        f"shorter than the target), got {self.window}"
                    ),
                )
            chunks = 2 if self.chunks is None else self.chunks
            pose = PoseSettings(window=self.window, target_length=checked["target_length"], chunks=chunks)
            checked["window"], checked["chunks"] = pose.window, pose.chunks
        elif self.chunks is not None:
            raise InvalidArgument("chunks", self.chunks, message=self._chunks_alone, leads=True)
        if not isinstance(self.mixed_window, bool):
            raise ArgumentType("mixed_window", self.mixed_window, "must be True or False")
        for name in ("sequence_parallel", "context_parallel"):
            if getattr(self, name) is not None:
                checked[name] = require_int(name, getattr(self, name), minimum=1)
        if self.sequence_parallel is not None and self.context_parallel is not None:
            raise InvalidArgument(
                "context_parallel",
                self.context_parallel,
                message=lambda n: (
                    f"give one of {n('sequence_parallel')} and {n('context_parallel')}: accelerate shards a sequence "
                    "by one of them at a time"
                ),
            )
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    def _chunks_alone(self, n: Namer) -> str:
        """The message refusing ``chunks`` without ``window``, written by ``n``."""
        return (
            f"{n('chunks', self.chunks)} cuts PoSE windows, and there are none without {n('window', Placeholder('W'))}: give "
            f"{n('window', Placeholder('W'))} (tokens per training window) as well, or leave {n('chunks')} out"
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def sharding(self) -> tuple[str, int] | None:
        """``(kind, degree)`` of a sharded run (``sequence`` or ``context``), or ``None``."""
        if self.sequence_parallel is not None:
            return "sequence", self.sequence_parallel
        if self.context_parallel is not None:
            return "context", self.context_parallel
        return None

    def lr_factor(self, step: int) -> float:
        """The learning rate multiplier for optimizer step ``step`` (0-based): linear warm-up, then cosine."""
        span = max(1, self.steps - self.warmup_steps)
        progress = min(1.0, max(0, step - self.warmup_steps) / span)
        return warmup_cosine(1.0, step, warmup=self.warmup_steps, progress=progress, floor=self.min_lr_ratio)


def resolved_mixed_precision(name: str) -> str | None:
    """accelerate's ``mixed_precision`` for a :attr:`FinetuneSettings.mixed_precision` value (``auto`` resolved)."""
    if name != "auto":
        return name
    if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        return "bf16"
    return None if os.environ.get("ACCELERATE_MIXED_PRECISION") else "no"
