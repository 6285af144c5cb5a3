"""A search's memory plan, made before its first forward pass: how many samples each forward scores.

A candidate's score is one forward pass per batch of needle samples at the target length. The memory one needs is
the evaluation's estimate (:func:`ropekit.eval.sweep.peak_memory_estimate`: weights, activations per token, a chunk
of logits) against what is free where the model runs (:func:`ropekit._free_memory.available_memory`). Without a
batch size the search takes the largest that fits (all samples at once when they do); a target at which a single
sample does not fit, or a batch size that does not, is refused by name before any work.
"""

from __future__ import annotations

from typing import Any

from ropekit.errors import InvalidArgument

#: the share of the free memory the planned forward passes may take (the estimate is not a bound)
MEMORY_SHARE = 0.8


def rows_per_forward(model: Any, request: Any, target: int, *, sharing: int = 1) -> int | None:
    """The batch size the search runs with: ``request.batch_size`` when it fits, else the largest that fits
    (``None``: every sample in one forward). Where the model's size or the free memory is unknown, the request's.

    Args:
        model: the :class:`~ropekit.eval.protocol.EvalModel`.
        request: the :class:`~ropekit.search.request.SearchRequest`.
        target: the sample length in tokens.
        sharing: how many processes (each with its own copy of the model) share this machine's memory: the free
            memory of a model on the CPU is divided among them (on an accelerator each process has its own).

    Raises:
        InvalidArgument: about the target length (one sample does not fit) or ``batch_size`` (it does not fit).
    """
    from ropekit._free_memory import available_memory
    from ropekit.eval.sweep import peak_memory_estimate

    one, two = peak_memory_estimate(model, target, 1), peak_memory_estimate(model, target, 2)
    free = available_memory(model.device())
    if free is not None and model.device().type == "cpu":
        free //= sharing
    if one is None or two is None or free is None:
        return request.batch_size
    budget = MEMORY_SHARE * free
    if one > budget:
        argument, value = request.target_argument()
        raise InvalidArgument(
            argument,
            value,
            message=lambda n: (
                f"{n(argument)}: one sample of {target:,} tokens needs about {_gib(one)} GiB, but only "
                f"{_gib(free)} GiB is free ({MEMORY_SHARE:.0%} of it may be planned); give a shorter {n(argument)} "
                "or a smaller dtype"
            ),
            leads=True,
        )
    per_row = two - one
    fits = max(1, int((budget - (one - per_row)) // per_row)) if per_row > 0 else None
    rows = max(request.samples, request.heldout_samples)
    if request.batch_size is not None:
        if fits is not None and request.batch_size > fits:
            size = request.batch_size
            raise InvalidArgument(
                "batch_size",
                size,
                message=lambda n: (
                    f"{n('batch_size')} {size} needs about {_gib(one + (size - 1) * per_row)} GiB at {target:,} "
                    f"tokens, but only {_gib(free)} GiB is free; the largest that fits is {fits}"
                ),
                leads=True,
            )
        return request.batch_size
    return None if fits is None or fits >= rows else fits


def _gib(count: float) -> str:
    return f"{count / 2**30:.1f}"
