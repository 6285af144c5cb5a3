"""The hand-kept engine facts (``ropekit.engines.rules``): one table the engine modules read. The oracles: the
installed engine's own files (each MLX-LM rule names a file MLX-LM ships) and the table's own vocabulary."""

from __future__ import annotations

import pytest

from ropekit.engines.rules import CONDITIONS, KINDS, RULES, Context, reasons


def test_every_rule_names_a_known_kind_and_condition_and_its_file() -> None:
    for rule in RULES:
        assert rule.kind in KINDS and rule.when in CONDITIONS, rule
        assert rule.engine in ("vLLM", "SGLang", "MLX-LM") and rule.versions and rule.file and rule.reason, rule


def test_a_rule_holds_at_the_version_it_was_read_in_only() -> None:
    """vLLM's dynamic keeps its base in 0.33: at 0.33.x the reason is given; at another version it is not (an upgrade
    shows as an unexplained difference, never as a stale reason); unknown versions get every rule."""
    context = Context({"rope_type": "dynamic", "factor": 4.0}, {"model_type": "llama"}, target=1024)
    assert any("keeps the base" in r for r in reasons("vLLM", "behaviour", "0.33.0", context))
    assert reasons("vLLM", "behaviour", "0.34.0", context) == []
    assert reasons("vLLM", "behaviour", None, context) == reasons("vLLM", "behaviour", "0.33.0", context)


def test_conditions_pick_the_rules_a_configuration_meets() -> None:
    """LongRoPE in vLLM: the list-choice rule needs lists that differ, the attention-factor rule a given factor."""
    same = Context({"rope_type": "longrope", "short_factor": [1.0], "long_factor": [1.0]}, {}, target=4096)
    assert reasons("vLLM", "behaviour", "0.33.0", same) == []
    given = Context({**same.params, "long_factor": [2.0], "attention_factor": 1.2}, {}, target=4096)
    found = reasons("vLLM", "behaviour", "0.33.0", given)
    assert len(found) == 2 and "4,096 > L0" in found[0]
    mla = Context({"rope_type": "default"}, {"model_type": "deepseek_v3", "rope_interleave": False})
    assert reasons("vLLM", "rewrite", "0.33.0", mla) == [
        "vLLM's latent-attention classes rotate pairs (2i, 2i + 1) and read no rope_interleave"
    ]


def test_each_mlx_lm_rule_names_a_file_mlx_lm_ships() -> None:
    pytest.importorskip("mlx_lm")
    from importlib.util import find_spec
    from pathlib import Path

    root = Path(find_spec("mlx_lm").origin).parent.parent
    for rule in RULES:
        if rule.engine == "MLX-LM":
            assert (root / rule.file).is_file(), rule.file
