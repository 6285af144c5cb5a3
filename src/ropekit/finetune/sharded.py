"""Training with each row's sequence sharded over processes, on the engines: DeepSpeed Ulysses / ALST through
accelerate (``ParallelismConfig(sp_backend="deepspeed", sp_size=N)``), with ropekit supplying what the engine asks of
its caller.

* **The engine.** :func:`sequence_parallel_accelerator` is the :class:`accelerate.Accelerator` of a
  ``--sequence-parallel N`` run: DeepSpeed (ZeRO-2, gradient clipping, accumulation) with Ulysses over groups of
  ``N`` processes. accelerate's ``prepare`` registers Ulysses' attention with transformers (two all-to-alls around
  the model's own attention kernel) and wraps the data loader in DeepSpeed's ``UlyssesSPDataLoaderAdapter``, which
  cuts each row into ``N`` contiguous shards and shifts the labels before cutting.
* **What the engine asks of the caller** (:func:`sharded_rows`, :class:`ropekit.finetune.loss.ShardedCausalLM`): position ids in every
  batch (PoSE's skipping ones as they are), labels for the adapter to pre-shift, each row's whole length for the RoPE
  (:mod:`ropekit.integrations.hf.shard_length`: LongRoPE's list and dynamic NTK's base follow the row, not the
  shard), and a token-weighted loss: each shard's summed cross-entropy over the group's count of predictions, so the
  gradient the engine sums is the row's mean and the loss every rank reports is the row's.
* **What it refuses** (:func:`refusal`), by name: mixed windows (Ulysses drops the attention mask, and transformers'
  sdpa then attends across packed documents), FSDP (one engine at a time: DeepSpeed shards the weights here), a
  resumed run (the adapter's data order is not the one ``skip_first_batches`` skips), and context parallelism on a
  machine without GPUs (torch's ring attention runs only on the flash, efficient and cuDNN SDPA kernels).
"""

from __future__ import annotations

import os
from typing import Any

import torch

from ropekit.errors import InvalidArgument
from ropekit.finetune.loss import IGNORED

#: DeepSpeed's ZeRO stage for sequence-parallel runs (weights replicated; AdamW state and gradients sharded)
ZERO_STAGE = 2


def refusal(settings: Any, *, resume: bool = False) -> InvalidArgument | None:
    """Why a sharded run cannot start here (see the module docstring), or ``None``."""
    if settings.sharding is None:
        return None
    kind, degree = settings.sharding
    name = f"{kind}_parallel"

    def refused(reason) -> InvalidArgument:  # reason: the namer → the sentence after the option
        return InvalidArgument(name, degree, message=lambda n: f"{n(name, degree)}: {reason(n)}")

    if kind == "context":
        if not torch.cuda.is_available():
            return refused(
                lambda n: (
                    "torch's ring attention (accelerate's cp_size) runs only on GPUs (flash, efficient or cuDNN "
                    f"SDPA); this machine has none: use {n('sequence_parallel')} (DeepSpeed Ulysses runs on CPU over gloo)"
                )
            )
        return refused(
            lambda n: (
                f"the ring-attention run is not wired yet (a dry run gives its plan); use {n('sequence_parallel')}"
            )
        )
    if settings.mixed_window:
        return refused(
            lambda n: (
                f"{n('mixed_window')} packs documents, and DeepSpeed Ulysses drops the attention mask that keeps "
                "them apart (transformers' sdpa then attends across documents): train mixed windows without sequence "
                "parallelism"
            )
        )
    if os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true":
        return refused(
            lambda n: (
                "the launch asks for FSDP, and DeepSpeed is the engine here: launch with configs/sequence_parallel.yaml"
            )
        )
    if resume:
        return refused(
            lambda n: (
                f"a sharded run does not {n('resume')} (the engine's data adapter reorders batches): start over "
                f"with {n('force')}"
            )
        )
    return None


def sequence_parallel_accelerator(settings: Any):
    """The :class:`accelerate.Accelerator` of a ``--sequence-parallel N`` run (see the module docstring).

    Raises:
        ValueError: no launcher started this process, or the launch's process count is not a multiple of ``N``.
    """
    from accelerate import Accelerator
    from accelerate.utils import DeepSpeedPlugin, DeepSpeedSequenceParallelConfig, ParallelismConfig

    from ropekit.finetune.settings import resolved_mixed_precision

    degree = settings.sequence_parallel
    if "LOCAL_RANK" not in os.environ:  # DeepSpeed joins a launch's process group, even of one process
        raise InvalidArgument(
            "sequence_parallel",
            degree,
            message=lambda n: (
                f"{n('sequence_parallel', degree)} trains on DeepSpeed, which runs under a launcher: accelerate "
                "launch --config_file configs/sequence_parallel.yaml -m ropekit.cli finetune ... (a dry run plans "
                "without one)"
            ),
        )
    processes = int(os.environ.get("WORLD_SIZE", "1"))
    if processes % degree:
        raise InvalidArgument(
            "sequence_parallel",
            degree,
            message=lambda n: f"{n('sequence_parallel', degree)} must divide the launch's {processes} processes",
        )
    parallelism = None
    if degree > 1:  # 1: the same engine, each row whole on one process
        handler = DeepSpeedSequenceParallelConfig(sp_seq_length_is_variable=True, sp_attn_implementation="sdpa")
        parallelism = ParallelismConfig(sp_backend="deepspeed", sp_size=degree, sp_handler=handler)
    if (
        processes > 1 and not torch.cuda.is_available()
    ):  # accelerate names no backend for DeepSpeed on CPU and counts one process:
        from accelerate import PartialState  # gloo, as DeepSpeed's CPU accelerator uses, joins the launch's processes

        os.environ["ACCELERATE_USE_DEEPSPEED"] = "true"
        PartialState(backend="gloo")
    plugin = DeepSpeedPlugin(
        zero_stage=ZERO_STAGE, gradient_accumulation_steps=settings.grad_accum, gradient_clipping=settings.max_grad_norm
    )
    return Accelerator(
        mixed_precision=resolved_mixed_precision(settings.mixed_precision),
        deepspeed_plugin=plugin,
        parallelism_config=parallelism,
    )


def sharded_rows(ids: torch.Tensor, positions: torch.Tensor | None = None) -> list[dict[str, torch.Tensor]]:
    """Training rows as the engine's data adapter takes them: ``input_ids``, ``position_ids`` (``0 … seq − 1``
    unless given: PoSE's), ``labels`` (the ids: the adapter shifts them before it cuts the row) and
    ``rope_lengths`` (each row's whole length, repeated along the row so that every shard carries it).

    Shapes:
        ids ``(n, seq)``, positions ``(n, seq)`` or ``None`` → n dicts of ``(seq,)`` tensors.
    """
    from ropekit.integrations.hf.shard_length import row_lengths

    if positions is None:
        positions = torch.arange(ids.shape[1]).expand_as(ids)  # (n, seq)
    lengths = row_lengths(positions)[:, None].expand_as(ids)  # (n, seq)
    return [
        {"input_ids": i, "position_ids": p, "labels": i, "rope_lengths": n}
        for i, p, n in zip(ids, positions.contiguous(), lengths.contiguous(), strict=True)
    ]


def heldout_shard(window: torch.Tensor, degree: int, device: torch.device) -> dict[str, torch.Tensor]:
    """This rank's shard of one held-out window, cut as the engine's data adapter cuts a training row (contiguous
    shards; labels shifted before the cut, the last one ignored): every rank holds the same held-out windows.

    Shapes:
        window ``(seq,)`` → a dict of ``(1, seq / degree)`` tensors for :class:`ropekit.finetune.loss.ShardedCausalLM`.
    """
    row = sharded_rows(window[None])[0]
    shifted = torch.cat([row["labels"][1:], torch.tensor([IGNORED])])  # (seq,)
    size, rank = len(window) // degree, _sequence_rank() if degree > 1 else 0
    cut = slice(rank * size, (rank + 1) * size)
    return {
        "input_ids": row["input_ids"][None, cut].to(device),
        "position_ids": row["position_ids"][None, cut].to(device),
        "shift_labels": shifted[None, cut].to(device),
        "rope_lengths": row["rope_lengths"][None, cut].to(device),
    }


def _sequence_rank() -> int:
    from deepspeed.utils import groups

    return groups._get_sequence_parallel_rank()
