"""The output head of a transformers causal LM, a chunk of positions at a time: one place for evaluation and training.

transformers' ``*ForCausalLM.forward`` is ``body → lm_head → final-logit transforms → cross-entropy``. Evaluation
(:class:`ropekit.eval.hf_model.HFEvalModel`) and fine-tuning (:class:`ropekit.finetune.loss.ChunkedCausalLM`) both
stop at the body's final hidden states and form the logits here, ``chunk`` positions at a time, so ``(seq × vocab)``
logits never exist at once — at 32k tokens and a 49k vocabulary they would be 6.4 GB in float32.

The transforms (checked against transformers' modeling files): Gemma 2/3 ``final_logit_softcapping``
(``tanh(z / c) · c``), Cohere ``logit_scale`` (multiplies), Granite ``logits_scaling`` (divides). An architecture
doing anything else is refused by :func:`check_head` (it compares this head with the model's own forward) before
an evaluation or a training run starts, rather than scored or trained on a different loss.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

#: config keys of the final-logit transforms :func:`head_logits` applies, in the order transformers applies them
LOGIT_TRANSFORM_KEYS = ("final_logit_softcapping", "logit_scale", "logits_scaling")
#: bytes of float32 logits alive at once while evaluating (forward only)
EVAL_CHUNK_BYTES = 64 * 2**20
#: bytes of float32 logits alive at once in the training loss (forward and backward); below it, one piece
TRAIN_CHUNK_BYTES = 256 * 2**20


def causal_lm(model: nn.Module) -> nn.Module:
    """The transformers ``*ForCausalLM`` inside ``model`` (a peft model is unwrapped)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def decoder(model: nn.Module) -> nn.Module:
    """The decoder body (Llama: ``model.model``): ids → final hidden states, after the final norm."""
    lm = causal_lm(model)
    body = lm.get_decoder()
    if body is lm and isinstance(getattr(lm, "model", None), nn.Module):
        # Llama4ForCausalLM: its base_model_prefix ("language_model") names no attribute, so transformers'
        # get_decoder gives the LM itself; its body is .model
        body = lm.model
    return body


def head_logits(model: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    """Output head and final-logit transforms, as ``model``'s own forward applies them, in float32.

    The head runs in the model's dtype (as transformers does); the transforms run in float32, where
    transformers' loss also works (for float32 models the two orders are the same numbers).

    Shapes:
        hidden ``(..., d_model)`` → ``(..., vocab)`` float32.
    """
    lm = causal_lm(model)
    logits = lm.get_output_embeddings()(hidden).float()
    config = lm.config
    cap = getattr(config, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    if getattr(config, "logit_scale", None) is not None:
        logits = logits * config.logit_scale
    if getattr(config, "logits_scaling", None) is not None:
        logits = logits / config.logits_scaling
    return logits


def chunk_positions(vocab_size: int, budget_bytes: int, rows: int = 1) -> int:
    """Positions per chunk so that ``rows`` rows of float32 logits over ``vocab_size`` hold about ``budget_bytes``
    (at least 1)."""
    return max(1, budget_bytes // (4 * vocab_size * rows))


def chunked_cross_entropy(
    logits_of: Callable[[torch.Tensor], torch.Tensor],
    hidden: torch.Tensor,
    targets: torch.Tensor,
    *,
    chunk: int,
    recompute: bool = False,
    position_dim: int = -2,
) -> torch.Tensor:
    """Cross-entropy of ``targets`` under ``logits_of(hidden)``, formed ``chunk`` positions at a time.

    Args:
        logits_of: hidden states → float32 logits (e.g. :func:`head_logits` bound to a model).
        hidden: final hidden states; positions along ``position_dim``.
        targets: the next-token ids, ``hidden``'s shape without its last dimension.
        chunk: positions per chunk (:func:`chunk_positions`).
        recompute: checkpoint each chunk, so in the backward pass too only one chunk of logits is alive.

    Shapes:
        hidden ``(..., seq, d_model)``, targets ``(..., seq)`` → ``(..., seq)`` float32 losses (as transformers'
        loss computes them: cross-entropy of float32 logits).
    """

    def losses(part: torch.Tensor, wanted: torch.Tensor) -> torch.Tensor:
        logits = logits_of(part)  # (..., chunk, vocab)
        flat = F.cross_entropy(logits.flatten(0, -2), wanted.flatten(), reduction="none")
        return flat.view(wanted.shape)

    seq = hidden.shape[position_dim]
    if chunk >= seq:
        return losses(hidden, targets)
    parts = []
    for start in range(0, seq, chunk):
        part = hidden.narrow(position_dim, start, min(chunk, seq - start))
        wanted = targets.narrow(-1, start, part.shape[position_dim])
        parts.append(checkpoint(losses, part, wanted, use_reentrant=False) if recompute else losses(part, wanted))
    return torch.cat(parts, dim=-1)


def check_head(model: nn.Module, *, what: str = "score it in chunks") -> None:
    """Refuse ``model`` unless :func:`head_logits` of its body's hidden states gives its own ``forward`` logits.

    Runs 8 tokens through the model twice (no gradients); the model's train/eval mode is restored.

    Raises:
        ValueError: the model's forward transforms its logits in a way :func:`head_logits` does not reproduce.
    """
    lm = causal_lm(model)
    parameter = next(lm.parameters())
    vocab = lm.get_output_embeddings().weight.shape[0]
    ids = (torch.arange(8, dtype=torch.int64)[None, :] % vocab).to(parameter.device)
    training = lm.training
    lm.eval()
    try:
        with torch.no_grad():
            own = lm(input_ids=ids, use_cache=False).logits.float()
            ours = head_logits(lm, decoder(lm)(input_ids=ids, use_cache=False).last_hidden_state)
    finally:
        lm.train(training)
    scale = float(own.abs().max()) or 1.0
    tolerance = 1e-5 if parameter.dtype == torch.float32 else 2e-2
    if own.shape != ours.shape or float((own - ours).abs().max()) > tolerance * scale:
        raise ValueError(
            f"{type(lm).__name__}: its forward transforms the output logits in a way ropekit does not reproduce "
            f"(known: {', '.join(LOGIT_TRANSFORM_KEYS)}); cannot {what}"
        )
