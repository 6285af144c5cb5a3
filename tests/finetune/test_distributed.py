"""Two CPU processes under `accelerate launch` (gloo) give the one-process first-step loss for the same global batch,
and the shipped accelerate configs do what they say on a machine without GPUs.

Each ``accelerate launch`` starts two workers that import torch and transformers (tens of seconds on 2 cores), so
those tests are ``distributed`` and ``slow``; ``test_fsdp.py`` is the multi-process test of the default suite.

accelerate 1.15 quirk: ``accelerate launch --cpu --num_processes 2`` starts ONE process (its CPU launcher needs
mpirun for more); ``--multi_gpu --num_processes 2`` with ``ACCELERATE_USE_CPU=true`` starts two torchrun workers
that run as MULTI_CPU with the gloo backend. The test checks that two processes really ran.
"""

from __future__ import annotations

import csv
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _step_losses(out: Path) -> list[float]:
    with (out / "finetune" / "loss.csv").open() as handle:
        return [float(r["loss"]) for r in csv.DictReader(handle) if r["step"] != "0"]


def _first_step_loss(out: Path) -> float:
    with (out / "finetune" / "loss.csv").open() as handle:
        return next(float(r["loss"]) for r in csv.DictReader(handle) if r["step"] == "1")


def _finetune_args(
    model: Path,
    text: Path,
    out: Path,
    batch_size: int,
    steps: int = 1,
    method: tuple[str, ...] = ("yarn", "--factor", "2"),
) -> list[str]:
    return [
        "finetune", "--model", str(model), "--scaling", *method, "--target-length", "128",
        "--text", str(text), "--steps", str(steps), "--batch-size", str(batch_size), "--lr", "1e-3",
        "--checkpoint-every", "0", "--no-evaluate", "--out", str(out),
    ]  # fmt: skip


#: CPU workers: one thread each, gloo (accelerate reads ACCELERATE_USE_CPU)
_ENV = {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "ACCELERATE_USE_CPU": "true"}


def _ropekit(args: list[str], launch: list[str] | None = None) -> subprocess.CompletedProcess:
    """``python -m ropekit.cli ARGS``, under ``accelerate launch LAUNCH ...`` with two processes when given."""
    command = [sys.executable, "-m", "ropekit.cli", *args]
    if launch is not None:
        port = ["--num_processes", "2", "--mixed_precision", "no", "--main_process_port", str(_free_port())]
        command = [sys.executable, "-m", "accelerate.commands.launch", *launch, *port, *command[1:]]
    return subprocess.run(command, env={**os.environ, **_ENV}, capture_output=True, text=True, timeout=300)


@pytest.mark.distributed
@pytest.mark.slow
def test_two_cpu_processes_match_one_process(llama_dir, text_file, tmp_path):
    two = _ropekit(_finetune_args(llama_dir, text_file, tmp_path / "two", 1), ["--multi_gpu", "--num_machines", "1"])
    assert two.returncode == 0, two.stderr[-3000:]
    one = _ropekit(_finetune_args(llama_dir, text_file, tmp_path / "one", 2))
    assert one.returncode == 0, one.stderr[-3000:]
    assert json.loads((tmp_path / "two" / "finetune" / "report.json").read_text())["processes"] == 2
    assert json.loads((tmp_path / "one" / "finetune" / "report.json").read_text())["processes"] == 1
    assert _first_step_loss(tmp_path / "two") == pytest.approx(_first_step_loss(tmp_path / "one"), rel=1e-6)


@pytest.mark.distributed
@pytest.mark.slow
def test_mixed_windows_on_two_cpu_processes_match_one_process(llama_dir, tmp_path):
    """Rows differ in their targets inside documents; the loss (each row's mean, then over rows) does not depend on
    how rows are split over processes."""
    from helpers.mixed_text import write_mixed_text

    factors = tmp_path / "factors.json"
    factors.write_text(json.dumps([1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0]))
    text = write_mixed_text(tmp_path / "t.jsonl")
    method = ("longrope", "--factors", str(factors), "--mixed-window")
    two_args = _finetune_args(llama_dir, text, tmp_path / "two", 1, method=method)
    two = _ropekit(two_args, ["--multi_gpu", "--num_machines", "1"])
    assert two.returncode == 0, two.stderr[-3000:]
    one = _ropekit(_finetune_args(llama_dir, text, tmp_path / "one", 2, method=method))
    assert one.returncode == 0, one.stderr[-3000:]
    assert json.loads((tmp_path / "two" / "finetune" / "report.json").read_text())["processes"] == 2
    assert _first_step_loss(tmp_path / "two") == pytest.approx(_first_step_loss(tmp_path / "one"), rel=1e-6)


@pytest.mark.distributed
@pytest.mark.slow
def test_fsdp_config_on_cpu_runs_data_parallel_and_says_so(llama_dir, text_file, tmp_path):
    """accelerate 1.15 runs FSDP only on GPUs: launched on CPU, configs/fsdp.yaml (FSDP2) trains as plain data
    parallelism (MULTI_CPU). ropekit says so and records it (test_fsdp.py runs the sharded path itself on CPU)."""
    config = ["--config_file", str(CONFIGS / "fsdp.yaml")]
    run = _ropekit(_finetune_args(llama_dir, text_file, tmp_path / "fsdp", 1), config)
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads((tmp_path / "fsdp" / "finetune" / "report.json").read_text())
    assert (report["processes"], report["distributed"]) == (2, "MULTI_CPU")
    assert "accelerate runs FSDP only on GPUs" in " ".join((run.stdout + run.stderr).split())


@pytest.mark.distributed
@pytest.mark.slow
def test_fsdp1_config_with_sync_module_states_on_cpu_is_a_clear_error(llama_dir, text_file, tmp_path):
    """An FSDP1 config with sync_module_states (broadcast from a GPU) on a machine without one: accelerate refuses it
    in its FSDP plugin; ropekit says why and names the CPU alternative."""
    fsdp1 = tmp_path / "fsdp1.yaml"
    fsdp1.write_text(
        (CONFIGS / "fsdp.yaml")
        .read_text()
        .replace("fsdp_version: 2", "fsdp_version: 1\n  fsdp_sync_module_states: true")
    )
    result = _ropekit(_finetune_args(llama_dir, text_file, tmp_path / "out", 1), ["--config_file", str(fsdp1)])
    assert result.returncode != 0
    assert "fsdp_sync_module_states" in result.stderr + result.stdout
    assert "configs/ddp.yaml" in " ".join((result.stderr + result.stdout).split())
    assert not (tmp_path / "out" / "model.safetensors").exists()


def test_shipped_accelerate_configs_parse():
    from accelerate.commands.config.config_args import load_config_from_file

    ddp = load_config_from_file(str(CONFIGS / "ddp.yaml"))
    fsdp = load_config_from_file(str(CONFIGS / "fsdp.yaml"))
    assert ddp.distributed_type.value == "MULTI_GPU"
    assert fsdp.distributed_type.value == "FSDP"
    # FSDP2: the version accelerate shards on CPU (test_fsdp.py); it keeps per-parameter requires_grad (LoRA)
    assert fsdp.fsdp_config["fsdp_version"] == 2
    assert fsdp.fsdp_config["fsdp_auto_wrap_policy"] == "TRANSFORMER_BASED_WRAP"
