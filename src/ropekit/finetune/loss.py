"""The fine-tuning loss: the mean next-token cross-entropy of a transformers causal LM, the head in chunks.

The head, its final-logit transforms and the chunked cross-entropy are :mod:`ropekit.integrations.hf.output_head`,
shared with evaluation; this module wraps a model (or a peft model) so that its forward is that loss, for
``accelerate``: the whole row (:class:`ChunkedCausalLM`), or one shard of it under sequence parallelism
(:class:`ShardedCausalLM`, :mod:`ropekit.finetune.sharded`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ropekit._validate import require_int
from ropekit.finetune.lora import lora_model
from ropekit.integrations.hf.output_head import (
    TRAIN_CHUNK_BYTES,
    causal_lm,
    chunk_positions,
    chunked_cross_entropy,
    decoder,
    head_logits,
)


class ChunkedCausalLM(nn.Module):
    """A transformers causal LM (or a peft model around one) whose forward returns the mean next-token loss.

    The output head with the model's own final-logit transforms
    (:func:`ropekit.integrations.hf.output_head.head_logits`: soft-capping, Cohere's ``logit_scale``, Granite's
    ``logits_scaling``) runs on chunks of positions under activation checkpointing, so one chunk of logits
    (``chunk_bytes`` of float32) is alive at once, in the forward and in the backward pass. When all the logits fit in
    ``chunk_bytes`` they are formed at once without checkpointing (recomputing the head costs ~15% of a step for a small
    model). The loss and its gradients equal transformers' ``model(input_ids, position_ids=position_ids,
    labels=input_ids).loss``; run :func:`ropekit.integrations.hf.output_head.check_head` on the model first (training
    does).

    Position ids that skip (PoSE, :mod:`ropekit.finetune.pose`) go with an all-ones attention mask: without a mask
    and without a cache, transformers 5.x reads every jump in ``position_ids`` as the start of another packed
    document (``masking_utils.find_packed_sequence_indices``) and stops attention across it. Packed documents (mixed
    windows, :mod:`ropekit.finetune.mixed`) come with their document numbers instead: a 4-D mask keeps each document
    to itself (:func:`ropekit.integrations.hf.mixed_window.attention_mask_for`) and the loss is the mean over the
    predictions inside a document (a document's last token predicts nothing), per row and then over rows.

    Shapes:
        input_ids ``(batch, seq)``, position_ids ``(batch, seq)`` or ``None`` (``0 .. seq - 1``), documents
        ``(batch, seq)`` or ``None`` → scalar loss (mean over ``batch × (seq − 1)`` predictions, or the mean over rows
        of each row's mean over its predictions inside a document).
    """

    def __init__(self, model: nn.Module, *, chunk_bytes: int = TRAIN_CHUNK_BYTES) -> None:
        super().__init__()
        self.model = model
        self.chunk_bytes = require_int("chunk_bytes", chunk_bytes, minimum=1)
        self._no_split_modules = getattr(causal_lm(model), "_no_split_modules", None)  # for FSDP's auto-wrap

    def forward(
        self, input_ids: torch.Tensor, position_ids: torch.Tensor | None = None, documents: torch.Tensor | None = None
    ) -> torch.Tensor:
        inputs = {"input_ids": input_ids[:, :-1], "use_cache": False}
        if position_ids is not None:  # one document whose positions skip, not packed documents
            inputs.update(position_ids=position_ids[:, :-1], attention_mask=torch.ones_like(input_ids[:, :-1]))
        if documents is not None:  # packed documents (mixed windows): each sees only itself, predicts only itself
            from ropekit.integrations.hf.mixed_window import attention_mask_for

            dtype = causal_lm(self.model).get_input_embeddings().weight.dtype
            inputs["attention_mask"] = attention_mask_for(causal_lm(self.model), documents[:, :-1], dtype)
        body = decoder(self.model)(**inputs)
        hidden = body.last_hidden_state  # (batch, seq - 1, d_model)
        targets = input_ids[:, 1:]  # (batch, seq - 1)
        vocab = causal_lm(self.model).get_output_embeddings().weight.shape[0]
        chunk = chunk_positions(vocab, self.chunk_bytes, rows=targets.shape[0])
        losses = chunked_cross_entropy(
            lambda part: head_logits(self.model, part), hidden, targets, chunk=chunk, recompute=True
        )  # (batch, seq - 1)
        if documents is None:
            return losses.sum() / targets.numel()
        inside = (documents[:, 1:] == documents[:, :-1]).to(losses.dtype)  # (batch, seq - 1): not across documents
        # each row's mean, then the mean over rows: the same loss however the rows are split over processes
        return ((losses * inside).sum(-1) / inside.sum(-1).clamp(min=1.0)).mean()


#: the label the sequence-parallel engine pads a shard with, and the cross-entropy ignores
IGNORED = -100


class ShardedCausalLM(ChunkedCausalLM):
    """:class:`ropekit.finetune.loss.ChunkedCausalLM` whose training forward takes one shard of each row.

    ``forward(input_ids, position_ids, shift_labels, rope_lengths)`` (one shard, labels pre-shifted by the engine)
    returns a loss whose value is the whole row's mean next-token cross-entropy (the same on every rank of the group)
    and whose gradient is this shard's share of it (the engine sums the shares). The logits of the shard are formed
    at once (the engines' convention; :mod:`ropekit.finetune.fit_parallel` counts them). Called with the ids alone
    it is the unsharded loss of its parent (held-out windows outside training).

    Shapes:
        input_ids, position_ids, shift_labels, rope_lengths ``(batch, shard)`` → scalar.
    """

    def __init__(self, model: nn.Module) -> None:
        super().__init__(model)
        self.config = causal_lm(model).config  # what the engine reads to register its attention

    def forward(
        self,
        input_ids: torch.Tensor,
        position_ids: torch.Tensor | None = None,
        documents: torch.Tensor | None = None,
        shift_labels: torch.Tensor | None = None,
        rope_lengths: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if shift_labels is None:
            return super().forward(input_ids, position_ids, documents)
        from ropekit.integrations.hf.shard_length import sequence_lengths

        with sequence_lengths(self.model, None if rope_lengths is None else rope_lengths[:, 0]):
            body = decoder(self.model)(input_ids=input_ids, position_ids=position_ids, use_cache=False)
        logits = head_logits(self.model, body.last_hidden_state)  # (batch, shard, vocab) float32
        summed = nn.functional.cross_entropy(
            logits.flatten(0, 1), shift_labels.flatten(), ignore_index=IGNORED, reduction="sum"
        )
        counts = torch.stack([summed.detach(), (shift_labels != IGNORED).sum().to(summed.dtype)])
        if torch.distributed.is_initialized():
            torch.distributed.all_reduce(counts, group=_sequence_group())  # the whole row's sum and count
        count = counts[1].clamp(min=1.0)
        share = summed / count
        return share + (counts[0] / count - share).detach()  # value: the row's mean; gradient: this shard's share


def _sequence_group():
    """The process group of this rank's sequence-parallel group (DeepSpeed's)."""
    from deepspeed.utils import groups

    return groups._get_sequence_parallel_group()


def prepared_model(model: nn.Module, settings: Any) -> nn.Module:
    """``model`` set up for training (training and the fit plan's measured step both use it): gradient
    checkpointing, no KV cache, LoRA, wrapped in the chunked loss."""
    if settings.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False
    if settings.lora_rank:
        model = lora_model(model, rank=settings.lora_rank, alpha=settings.lora_alpha)
    if getattr(settings, "sequence_parallel", None) is not None:  # one shard of each row per process
        return ShardedCausalLM(model)
    return ChunkedCausalLM(model)
