"""The hand-kept engine facts, in one table: what an engine's code does with a configuration that its probe does not
measure or record (a class that rewrites what it is given, a list chosen once, a key it never reads), each read in
the engine's own file at a version.

Each :class:`Rule` names the engine, the versions it was read in, the model types and rope types it applies to, one
extra condition from a closed vocabulary (:data:`CONDITIONS`), its reason and the engine's file. The engine modules
ask :func:`reasons` for the rules that apply to a row; a rule read at another version than the one installed does not
apply, so an engine upgrade shows as an unexplained difference, never as a stale reason. The probes measure the rest:
what a model class passes to its rotary factory is recorded as it builds (:mod:`ropekit.engines._vllm_build`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: the rows a rule's reason is for: "rewrite" (the class does otherwise than the configuration says: the row
#: cannot express it), "behaviour" (a documented difference: a row that differs names it), "file" (MLX-LM's model
#: file runs another scaling: cannot express)
KINDS = ("rewrite", "behaviour", "file")


@dataclass(frozen=True)
class Context:
    """What a rule is tested against: transformers' rope dict of the compared layer, the folder's config, the
    compared layer's type, whether transformers rotates pairs (2i, 2i + 1), the engine's model file's text (MLX-LM),
    and the length the engine is served at."""

    params: dict[str, Any]
    config: dict[str, Any]
    layer_type: str | None = None
    interleaved: bool = False
    source: str = ""
    target: int = 0


#: a rule's ``rope_types`` for every rope type, plain RoPE included
ANY = frozenset({"*"})

#: the extra conditions a rule may name (empty: none)
CONDITIONS: dict[str, Callable[[Context], bool]] = {
    "": lambda c: True,
    "lists differ": lambda c: c.params.get("short_factor") != c.params.get("long_factor"),
    "attention_factor given": lambda c: c.params.get("attention_factor") is not None,
    "attention_factor without mscales": lambda c: (
        c.params.get("attention_factor") is not None
        and (c.params.get("mscale") is None or c.params.get("mscale_all_dim") is None)
    ),
    "truncate false": lambda c: c.params.get("truncate") is False,
    "rope_interleave false": lambda c: c.config.get("rope_interleave") is False,
    "sliding layer": lambda c: c.layer_type == "sliding_attention",
    "interleaved, file passes traditional=True": lambda c: c.interleaved and "traditional=True" in c.source,
}


@dataclass(frozen=True)
class Rule:
    """One hand-kept engine fact.

    Attributes:
        engine: the engine's name (``vLLM``, ``SGLang``, ``MLX-LM``).
        versions: the engine versions it was read in (a version prefix: ``0.33`` holds for 0.33.x).
        kind: one of :data:`KINDS`.
        reason: one line; ``{kind}`` is the rope type, ``{target}`` the served length.
        file: the engine's file that does it.
        model_types: the model types it applies to (empty: every one).
        rope_types: the rope types it applies to (empty: every scaled one; :data:`ANY`: every one).
        other_than: rope types it does not apply to.
        when: one of :data:`CONDITIONS`.
    """

    engine: str
    versions: str
    kind: str
    reason: str
    file: str
    model_types: frozenset[str] = frozenset()
    rope_types: frozenset[str] = frozenset()
    other_than: frozenset[str] = frozenset()
    when: str = ""

    def applies(self, model_type: str, version: str | None, context: Context) -> bool:
        """Whether the rule holds for this model type, engine version and context."""
        kind = context.params.get("rope_type", "default")
        if version is not None and not _within(version, self.versions):
            return False
        if self.model_types and model_type not in self.model_types:
            return False
        if self.rope_types != ANY and (kind not in self.rope_types if self.rope_types else kind == "default"):
            return False
        return kind not in self.other_than and CONDITIONS[self.when](context)


def _within(version: str, versions: str) -> bool:
    return version == versions or version.startswith(versions + ".")


#: the model types vLLM builds with DeepSeek's latent-attention classes (its registry's files for them:
#: deepseek_v2.py, the deepseek_v32 package, glm4_moe_lite.py, which imports deepseek_v2.py's); other
#: latent-attention models (MiniCPM3, Hunyuan) have files of their own
DEEPSEEK_MLA = frozenset({"deepseek_v2", "deepseek_v3", "deepseek_v32", "glm_moe_dsa", "glm4_moe_lite"})

RULES: tuple[Rule, ...] = (
    Rule(
        "vLLM", "0.33", "rewrite",
        "vLLM's latent-attention classes run every scaled rope_type as DeepSeek's YaRN: not {kind}",
        "vllm/model_executor/models/deepseek_v2.py", DEEPSEEK_MLA, other_than=frozenset({"yarn"}),
    ),
    Rule(
        "vLLM", "0.33", "rewrite",
        "vLLM's latent-attention classes rotate pairs (2i, 2i + 1) and read no rope_interleave",
        "vllm/model_executor/models/deepseek_v2.py", DEEPSEEK_MLA, ANY, when="rope_interleave false",
    ),
    Rule(
        "vLLM", "0.33", "behaviour",
        "vLLM chooses LongRoPE's list once by --max-model-len ({target:,} > L0: long at every position), "
        "transformers by the current length",
        "vllm/model_executor/layers/rotary_embedding/phi3_long_rope_scaled_rope.py",
        rope_types=frozenset({"longrope"}), when="lists differ",
    ),
    Rule(
        "vLLM", "0.33", "behaviour",
        "vLLM ignores longrope's attention_factor (it reads short_mscale/long_mscale, else derives "
        "sqrt(1 + ln(M/L0)/ln L0) from --max-model-len M)",
        "vllm/model_executor/layers/rotary_embedding/phi3_long_rope_scaled_rope.py",
        rope_types=frozenset({"longrope"}), when="attention_factor given",
    ),
    Rule(
        "vLLM", "0.33", "behaviour",
        "vLLM 0.33's dynamic class (dynamic_ntk_scaling_rope.py) keeps the base: max_trained_positions defaults to "
        "max_position, so it runs plain RoPE at every length",
        "vllm/model_executor/layers/rotary_embedding/dynamic_ntk_scaling_rope.py", rope_types=frozenset({"dynamic"}),
    ),
    Rule(
        "SGLang", "0.5.23", "behaviour",
        "SGLang's dynamic is static NTK: one table for max_position_embeddings × factor positions with the base of "
        "that length, at every position",
        "sglang/srt/layers/rotary_embedding", rope_types=frozenset({"dynamic"}),
    ),
    Rule(
        "SGLang", "0.5.23", "behaviour",
        "SGLang ignores yarn's attention_factor (it reads attn_factor, or mscale/mscale_all_dim)",
        "sglang/srt/layers/rotary_embedding", rope_types=frozenset({"yarn"}), when="attention_factor without mscales",
    ),
    Rule(
        "SGLang", "0.5.23", "behaviour",
        "SGLang ignores yarn's truncate: false (it always rounds the correction range)",
        "sglang/srt/layers/rotary_embedding", rope_types=frozenset({"yarn"}), when="truncate false",
    ),
    Rule(
        "SGLang", "0.5.23", "behaviour",
        "SGLang ignores longrope's attention_factor (it reads short_mscale/long_mscale, else derives "
        "sqrt(1 + ln(M/L0)/ln L0) from max_position_embeddings M)",
        "sglang/srt/layers/rotary_embedding", rope_types=frozenset({"longrope"}), when="attention_factor given",
    ),
    Rule(
        "SGLang", "0.5.23", "behaviour",
        "SGLang's LongRoPE keeps a batch whose last position is exactly L0 on its short cache, which holds positions "
        "0 to L0 - 1, so position L0 reads the next row of the joined caches: the long cache's position 0 "
        "(rope_variant.py, Phi3LongRoPEScaledRotaryEmbedding.forward: positions > L0)",
        "sglang/srt/layers/rotary_embedding/rope_variant.py", rope_types=frozenset({"longrope"}),
    ),
    Rule(
        "SGLang", "0.5.23", "behaviour",
        "SGLang picks LongRoPE's long list for a whole batch once a position in it exceeds L0 (L0 + 1 tokens still "
        "get the short list), transformers once the length exceeds L0",
        "sglang/srt/layers/rotary_embedding/rope_variant.py", rope_types=frozenset({"longrope"}), when="lists differ",
    ),
    Rule(
        "MLX-LM", "0.32", "file",
        "MLX-LM's minicpm3.py runs every rope_scaling as LongRoPE (SuScaledRoPE with its short/long factors, 1.0 "
        "where absent): not {kind}",
        "mlx_lm/models/minicpm3.py", frozenset({"minicpm3"}), other_than=frozenset({"longrope"}),
    ),
    Rule(
        "MLX-LM", "0.32", "file",
        "MLX-LM's qwen2_moe.py accepts only a linear rope_scaling, then builds nn.RoPE without its factor",
        "mlx_lm/models/qwen2_moe.py", frozenset({"qwen2_moe"}),
    ),
    Rule(
        "MLX-LM", "0.32", "file",
        "MLX-LM's rope_utils.py builds LongRoPE (SuScaledRoPE) without the traditional=True its model file passes: "
        "it rotates pairs (i, i + d/2) where the model rotates (2i, 2i + 1)",
        "mlx_lm/models/rope_utils.py", rope_types=frozenset({"longrope"}),
        when="interleaved, file passes traditional=True",
    ),
    Rule(
        "MLX-LM", "0.32", "file",
        "MLX-LM's gemma3_text.py builds its sliding layers' RoPE from rope_local_base_freq alone (its rope_scaling "
        "goes to the global layers only): no {kind} on a sliding layer",
        "mlx_lm/models/gemma3_text.py", frozenset({"gemma3", "gemma3_text"}), when="sliding layer",
    ),
)  # fmt: skip


def reasons(engine: str, kind: str, version: str | None, context: Context) -> list[str]:
    """The reasons of every rule of ``engine`` of this ``kind`` (:data:`KINDS`) that applies to ``context`` at
    ``version`` (``None``: an engine whose version is not known here; every rule read for it applies)."""
    model_type = str(context.config.get("model_type"))
    rope_type = context.params.get("rope_type", "default")
    return [
        rule.reason.format(kind=rope_type, target=context.target)
        for rule in RULES
        if rule.engine == engine and rule.kind == kind and rule.applies(model_type, version, context)
    ]
