"""``ropekit extend --attention``: an attention method written into config.json for the engines that read it.

Only ``dual_chunk`` has such a key: Qwen's ``dual_chunk_attention_config``, which vLLM and SGLang read
(:mod:`ropekit.integrations.hf.dual_chunk_config` maps it; transformers ignores it and attends as usual).
"""

from __future__ import annotations

from typing import Any

import typer

from ropekit.cli.common import fail
from ropekit.cli.method_options import attention_params

ATTENTION = typer.Option(
    None,
    "--attention",
    help="Write an attention method's engine config: dual_chunk (ropekit's defaults for the original length) or "
    "dual_chunk:chunk_size=N,local_window=W; vLLM and SGLang read it as dual_chunk_attention_config and then build "
    "the RoPE from the base alone, so it is refused beside a scaling (plain RoPE or a base change only).",
)


def attention_entry(text: str | None, *, original: int, target: int | None) -> dict[str, Any]:
    """The config.json keys ``--attention TEXT`` adds (empty without it); exits 2 with a one-line error."""
    if text is None:
        return {}
    from ropekit.attention import DualChunk
    from ropekit.integrations.hf.dual_chunk_config import CONFIG_KEY, dual_chunk_config

    name, _, params = str(text).partition(":")
    if name.strip() != "dual_chunk":
        raise fail(
            f"--attention must be dual_chunk or dual_chunk:chunk_size=N,local_window=W (the one attention method "
            f"engines read from config.json), got {text!r}"
        )
    values = attention_params(params, "--attention") if params.strip() else {}
    try:
        method = DualChunk.from_options(train_length=original, length=target or original, **values)
        return {CONFIG_KEY: dual_chunk_config(method)}
    except (TypeError, ValueError) as error:
        raise fail(f"--attention {text!r}: {error}") from None
