"""The plan of a sharded run (``finetune --sequence-parallel N`` / ``--context-parallel N --dry-run``).

Oracle: ms-swift's published peaks for Qwen2.5-3B LoRA at 65,536 tokens (75.35 / 48.5 / 27.78 / 17.92 GiB at 1 / 2 /
4 / 8 devices, "Ultra-Long Sequence Parallelism: Ulysses + Ring-Attention", ModelScope, 2025), from a folder that holds
only the model's public config.json (no weights, no tokenizer); the engines' divisibility rules; a scan of every
length for the longest sequence that fits.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ropekit.cli.app import app

pytest.importorskip("transformers")
runner = CliRunner()

#: Qwen2.5-3B's public config.json, the keys a plan reads
QWEN25_3B = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_size": 2048,
    "intermediate_size": 11008,
    "num_hidden_layers": 36,
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "tie_word_embeddings": True,
    "rope_theta": 1000000.0,
    "max_position_embeddings": 32768,
    "torch_dtype": "bfloat16",
    "hidden_act": "silu",
    "rms_norm_eps": 1e-6,
}
#: ms-swift's measured peak per device (GiB) by the number of devices sharing each 65,536-token row
MS_SWIFT_GIB = {1: 75.35, 2: 48.5, 4: 27.78, 8: 17.92}


@pytest.fixture(scope="module")
def qwen_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("qwen2.5-3b")
    (folder / "config.json").write_text(json.dumps(QWEN25_3B))
    return folder


def _dry_run(model: Path, tmp_path: Path, *extra: str):
    text = tmp_path / "T.txt"
    text.write_text("a text the dry run does not read")
    args = ["finetune", "--model", str(model), "--scaling", "yarn", "--factor", "2", "--target-length", "64k"]
    args += ["--lora-rank", "8", "--mixed-precision", "bf16", "--batch-size", "1", "--text", str(text)]
    return runner.invoke(app, [*args, "--out", str(tmp_path / "O"), *extra, "--dry-run"])


def test_plan_within_15_percent_of_ms_swift(qwen_dir, tmp_path, monkeypatch):
    monkeypatch.setattr("ropekit._free_memory.available_memory", lambda device=None: 10**15)
    for degree, measured in MS_SWIFT_GIB.items():
        result = _dry_run(qwen_dir, tmp_path, "--sequence-parallel", str(degree), "--json")
        assert result.exit_code == 0, result.output
        plan = json.loads(result.stdout)
        assert plan["degree"] == degree and plan["sequence"] == 65536
        assert abs(plan["per_device_bytes"] / 2**30 / measured - 1) <= 0.15, (degree, plan["per_device_bytes"] / 2**30)
        assert not (tmp_path / "O").exists()


@pytest.mark.parametrize(
    ("option", "degree", "said"),
    [
        ("--sequence-parallel", "3", "16 attention heads are not divisible by 3"),
        ("--context-parallel", "3", "not divisible by 2 × 3"),
    ],
)
def test_refuses_what_the_engine_cannot_shard(qwen_dir, tmp_path, option, degree, said):
    result = _dry_run(qwen_dir, tmp_path, option, degree)
    assert result.exit_code == 2, result.output
    line = " ".join(result.output.split())
    assert f"{option} {degree}" in line and said in line, result.output
    assert "Traceback" not in result.output


def test_longest_sequence_is_the_last_that_fits():
    """Against a scan of every multiple of the rule's step: the search returns the longest that fits."""
    from ropekit.finetune.fit import Shapes
    from ropekit.finetune.fit_parallel import ShardedRun, largest_sequence, sharded_plan

    shapes = Shapes(parameters=10**6, trainable=10**5, layers=2, hidden=64, kv_width=32, intermediate=128, vocab=1000)
    for kind in ("sequence", "context"):
        run = ShardedRun(kind=kind, degree=2, sequence=8)
        available = int(sharded_plan(shapes, ShardedRun(kind=kind, degree=2, sequence=3000)).per_device_bytes / 0.9)
        step = 4 if kind == "context" else 2
        scan = [s for s in range(step, 8000, step) if sharded_plan(shapes, ShardedRun(kind=kind, degree=2, sequence=s),
                                                                   available=available).fits]  # fmt: skip
        assert largest_sequence(shapes, run, available) == max(scan)
        assert largest_sequence(shapes, run, 1000) is None


def test_sharding_divides_what_is_per_token():
    """Per device, the checkpointed hidden states, the layer's working set and the logits fall as 1/N; the weights
    (ZeRO-2) stay; AdamW state falls as 1/N."""
    from ropekit.finetune.fit import Shapes
    from ropekit.finetune.fit_parallel import ShardedRun, sharded_plan

    shapes = Shapes(parameters=10**6, trainable=10**5, layers=2, hidden=64, kv_width=32, intermediate=128, vocab=1000)
    one, four = (sharded_plan(shapes, ShardedRun(kind="sequence", degree=n, sequence=4096)) for n in (1, 4))
    for term in ("layer_inputs", "layer", "logits", "optimizer", "gradients"):
        assert getattr(four, term) * 4 == pytest.approx(getattr(one, term), rel=1e-6), term
    assert four.weights == one.weights == 2 * shapes.parameters
    assert one.logits == (2 + 4) * shapes.vocab * 4096
