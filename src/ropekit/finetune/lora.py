"""LoRA for long-context fine-tuning: adapters on every linear layer but the head, with the norms and embeddings
trainable too (LongLoRA, Chen et al. 2023, arXiv 2309.12307 §3.2: LoRA alone does not learn a longer context)."""

from __future__ import annotations

from torch import nn


def lora_model(model: nn.Module, *, rank: int, alpha: float | None = None) -> nn.Module:
    """``model`` wrapped by peft with LoRA adapters of ``rank`` (scaling numerator ``alpha``, default ``2 × rank``) on
    every linear layer but the output head, and its norms and embeddings trainable."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=rank,
        lora_alpha=alpha or 2.0 * rank,
        lora_dropout=0.0,
        target_modules="all-linear",
        bias="none",
    )
    wrapped = get_peft_model(model, config)
    for name, parameter in wrapped.named_parameters():
        if "norm" in name or "embed" in name:  # LongLoRA's trainable "embed,norm"
            parameter.requires_grad_(True)
    return wrapped
