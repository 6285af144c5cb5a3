"""What ``ropekit plan`` says about the training-free attention methods at a target length.

For each registered method: the parameters it derives for the target (Self-Extend by its authors' rule of thumb,
:func:`ropekit.attention.self_extend.suggest`), the largest relative position the target then reaches (to compare
with the training length) and the ``--methods``/``--param`` to evaluate it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ropekit.attention.registry import ATTENTIONS, list_attentions
from ropekit.attention.self_extend import suggest

__all__ = ["attention_plan"]


def attention_plan(train_length: int, target_length: int) -> list[dict[str, Any]]:
    """One JSON-ready row per attention method at ``target_length`` for a model trained at ``train_length``.

    Raises:
        ValueError: a length below 2 (training) or 1 (target).
    """
    rows = []
    for name in list_attentions():
        spec = ATTENTIONS[name]
        method = spec.from_options(train_length=train_length, length=target_length)
        params = dataclasses.asdict(method)
        row = {
            "method": name,
            "paper": spec.paper,
            "params": params,
            "max_relative_position": method.max_relative(target_length),
            "eval": f"--methods {name} --attention-param " + ",".join(f"{k}={v:g}" for k, v in params.items()),
        }
        if name == "self_extend":
            found = suggest(train_length, target_length)
            row["rule"] = (
                f"(L - window) * group + window >= target: ({train_length} - {found['window']}) * {found['group']} + "
                f"{found['window']} = {found['extended_length']:,} >= {target_length:,} (Jin et al.: group 2-64 and "
                "window 512-1536 work for Llama-2 at L = 4096; a larger group with a smaller window often works too)"
            )
        rows.append(row)
    return rows
