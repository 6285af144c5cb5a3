"""``finetune --sequence-parallel 2``: DeepSpeed Ulysses (through accelerate) over two CPU processes (gloo) gives the
one-process run's step losses, held-out losses and trained weights, for plain RoPE, YaRN and LongRoPE (whose first
shard, positions below L0, would rotate with the short list if the RoPE followed the shard), and PoSE's skipping
positions.

Oracle: the same command in one process, unsharded (each row whole, ropekit's usual loss), on the same rows in the
same order. What the engines cannot run is refused by name before training.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from helpers.hf_models import byte_tokenizer, random_hf_model
from helpers.same_training import assert_same_run
from ropekit.cli.app import app

pytest.importorskip("deepspeed", reason="DeepSpeed Ulysses is the sequence-parallel engine (pip install deepspeed)")
WORKER = Path(__file__).with_name("sharded_worker.py")
runner = CliRunner()


def _args(model: Path, text: Path, out: Path, method: list[str], *extra: str) -> list[str]:
    return [
        "finetune", "--model", str(model), "--scaling", *method, "--target-length", "128", "--text", str(text),
        "--steps", "2", "--batch-size", "1", "--lr", "1e-3", "--mixed-precision", "no", "--checkpoint-every", "0",
        "--no-evaluate", "--out", str(out), *extra,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def phi3_dir(tmp_path_factory) -> Path:
    """A Phi-3 with LongRoPE (L0 64, short and long lists apart) and the byte tokenizer."""
    pairs = 8
    rope = {
        "rope_type": "longrope",
        "rope_theta": 10000.0,
        "short_factor": [1.0 + 0.25 * i for i in range(pairs)],
        "long_factor": [1.0 + 1.5 * i for i in range(pairs)],
    }
    path = tmp_path_factory.mktemp("phi3") / "model"
    tokens = {"vocab": 257, "eos_token_id": 256, "bos_token_id": 256, "pad_token_id": 0}
    model = random_hf_model("phi3", positions=128, original_max_position_embeddings=64, rope_parameters=rope, **tokens)
    model.save_pretrained(path)
    byte_tokenizer().save_pretrained(path)
    return path


CASES = {
    "longrope": ("phi3", ["longrope", "--factor", "2"], []),
    "yarn": ("llama", ["yarn", "--factor", "2"], []),
    "plain": ("llama", ["base", "--base", "10000"], []),
    "pose": ("llama", ["yarn", "--factor", "2"], ["--window", "64"]),
}


@pytest.mark.distributed
@pytest.mark.parametrize(
    "case", [pytest.param(name, marks=[] if name == "longrope" else pytest.mark.slow) for name in CASES]
)
def test_sequence_parallel_matches_one_process(llama_dir, phi3_dir, text_file, tmp_path, case):
    which, method, extra = CASES[case]
    model = phi3_dir if which == "phi3" else llama_dir
    sharded = subprocess.run(
        [sys.executable, str(WORKER), "--processes", "2", "--",
         *_args(model, text_file, tmp_path / "sharded", method, *extra, "--sequence-parallel", "2")],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert sharded.returncode == 0, sharded.stderr[-3000:]
    one = runner.invoke(app, _args(model, text_file, tmp_path / "one", method, *extra))
    assert one.exit_code == 0, one.output

    reports = {
        name: json.loads((tmp_path / name / "finetune" / "report.json").read_text()) for name in ("sharded", "one")
    }
    assert (reports["sharded"]["processes"], reports["sharded"]["distributed"]) == (2, "DEEPSPEED")
    # DeepSpeed clips and steps on flattened fp32 partitions and Ulysses reorders the attention's sums: a few float32
    # units per step, not one (measured: 5e-8 at most); a sharding error moves weights by about lr
    assert_same_run(tmp_path / "sharded", tmp_path / "one", steps=2, lr=1e-3, rounding=1e-3 * 1e-3)


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--sequence-parallel", "2", "--mixed-window"], "drops the attention mask"),
        (["--context-parallel", "2"], "runs only on GPUs"),
        (["--sequence-parallel", "1"], "runs under a launcher"),
    ],
    ids=["mixed-window", "context-parallel-on-cpu", "no-launcher"],
)
def test_refused_by_name_before_training(phi3_dir, text_file, tmp_path, extra, said):
    import torch

    if "--context-parallel" in extra and torch.cuda.is_available():
        pytest.skip("this machine has GPUs: ring attention is not refused for want of them")
    result = runner.invoke(app, _args(phi3_dir, text_file, tmp_path / "out", ["longrope", "--factor", "2"], *extra))
    assert result.exit_code == 2, result.output
    assert said in " ".join(result.output.split()), result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_shipped_sequence_parallel_config_parses():
    from accelerate.commands.config.config_args import load_config_from_file

    from ropekit.finetune.sharded import ZERO_STAGE

    config = load_config_from_file(str(Path(__file__).resolve().parents[2] / "configs" / "sequence_parallel.yaml"))
    assert config.distributed_type.value == "DEEPSPEED"
    assert config.deepspeed_config["zero_stage"] == ZERO_STAGE
