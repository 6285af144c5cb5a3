"""FSDP2 on CPU: ``ropekit finetune`` sharded over two gloo processes with ``configs/fsdp.yaml``'s FSDP settings gives
the one-process run's step losses, held-out losses and final weights, also when stopped by Ctrl-C and resumed from
its sharded checkpoint.

Oracle: the same command in one process, unsharded, on the same global batch (the data order depends on the seed
alone). accelerate 1.15 shards only on GPUs, so ``fsdp_worker.py`` initialises accelerate's state as it would there
(its docstring says how); torch's FSDP2 ``fully_shard`` itself runs on CPU over gloo.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from helpers.same_training import assert_same_run, step_losses
from ropekit.cli.app import app

pytestmark = pytest.mark.distributed

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("fsdp_worker.py")


def _args(model: Path, text: Path, out: Path, batch_size: int, lora_rank: int) -> list[str]:
    return [
        "finetune", "--model", str(model), "--scaling", "yarn", "--factor", "2", "--target-length", "128",
        "--text", str(text), "--steps", "3", "--batch-size", str(batch_size), "--lr", "1e-3",
        "--lora-rank", str(lora_rank), "--checkpoint-every", "0", "--no-evaluate", "--out", str(out),
    ]  # fmt: skip


# LoRA (frozen base weights beside trainable adapters, norms and embeddings in one shard group) is the slow case
@pytest.mark.parametrize("lora_rank", [0, pytest.param(4, marks=pytest.mark.slow)], ids=["full", "lora"])
def test_fsdp2_on_two_cpu_processes_matches_one_process(llama_dir, text_file, tmp_path, lora_rank):
    sharded = subprocess.run(
        [sys.executable, str(WORKER), "--processes", "2", "--config", str(ROOT / "configs" / "fsdp.yaml"), "--",
         *_args(llama_dir, text_file, tmp_path / "sharded", 1, lora_rank)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert sharded.returncode == 0, sharded.stderr[-3000:]
    assert "accelerate chose MULTI_CPU" in sharded.stdout  # what accelerate itself does with this config on CPU
    one = CliRunner().invoke(app, _args(llama_dir, text_file, tmp_path / "one", 2, lora_rank))
    assert one.exit_code == 0, one.output

    reports = {
        name: json.loads((tmp_path / name / "finetune" / "report.json").read_text()) for name in ("sharded", "one")
    }
    assert (reports["sharded"]["processes"], reports["sharded"]["distributed"]) == (2, "FSDP")
    assert (reports["one"]["processes"], reports["one"]["distributed"]) == (1, "NO")
    shards = sorted(p.name for p in (tmp_path / "sharded" / "finetune" / "checkpoint").rglob("*.distcp"))
    assert shards == ["__0_0.distcp", "__0_0.distcp", "__1_0.distcp", "__1_0.distcp"]  # model and optimizer, 2 ranks

    assert_same_run(tmp_path / "sharded", tmp_path / "one", steps=3, lr=1e-3)


@pytest.mark.slow
def test_fsdp2_run_stopped_by_ctrl_c_resumes_from_its_sharded_checkpoint(llama_dir, text_file, tmp_path):
    """Ctrl-C to both sharded workers stops them after a step with a sharded checkpoint (exit 130); ``--resume``
    loads it and continues the loss curve of an uninterrupted one-process run."""
    (tmp_path / "run").mkdir()
    out = tmp_path / "run" / "sharded"
    args = _args(llama_dir, text_file, out, 1, 0)
    args[args.index("--steps") + 1] = "8"
    worker = [sys.executable, str(WORKER), "--processes", "2", "--config", str(ROOT / "configs" / "fsdp.yaml"), "--"]
    process = subprocess.Popen(
        [*worker, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    deadline = time.monotonic() + 400
    while time.monotonic() < deadline and process.poll() is None:
        logs = list((tmp_path / "run").rglob("loss.csv"))  # the run may write beside --out until it finishes
        if logs and len(logs[0].read_text().splitlines()) >= 3:  # header, step 0 (held-out), step 1
            break
        time.sleep(0.2)
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 130, stderr[-3000:]

    resumed = subprocess.run([*worker, *args, "--resume"], capture_output=True, text=True, timeout=600, check=False)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    one_args = _args(llama_dir, text_file, tmp_path / "one", 2, 0)
    one_args[one_args.index("--steps") + 1] = "8"
    one = CliRunner().invoke(app, one_args)
    assert one.exit_code == 0, one.output
    assert len(step_losses(out)) == 8
    assert step_losses(out) == pytest.approx(step_losses(tmp_path / "one"), abs=4e-6)
