"""Data-parallel evaluation of SmolLM2-135M (its GGUF dequantised: the torch path) through ``accelerate launch`` on
two CPU processes joined by gloo: ``eval tasks``, ``eval perplexity`` and ``eval passkey`` print and write what one
process does, byte for byte.

Oracle: the same commands in one plain process (no launcher). Both runs execute the commands in one interpreter each
(``helpers/run_commands.py``), so torch and the model's code load once per process; the lengths are the shortest
that give each process units of every command on both methods (yarn at s = 2, so that it measures another model
than none): per method 2 task samples, 2 perplexity lengths and 2 passkey cells."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.real, pytest.mark.slow, pytest.mark.distributed]
pytest.importorskip("accelerate")

RUN = Path(__file__).resolve().parents[1] / "helpers" / "run_commands.py"
SRC = Path(__file__).resolve().parents[2] / "src"
METHODS = ["--methods", "none,yarn", "--factor", "2"]


def commands(model: Path, out: Path) -> list[list[str]]:
    common = ["--model", str(model), *METHODS]
    return [
        ["eval", "tasks", *common, "--tasks", "cwe,fwe", "--lengths", "512", "--samples", "1", "--out", str(out / "tasks")],
        ["eval", "perplexity", *common, "--multiples", "0.03125,0.0625", "--max-tokens", "512", "--out", str(out / "perplexity")],
        ["eval", "passkey", *common, "--multiples", "0.0625", "--depths", "0,1", "--trials", "1",
         "--out", str(out / "passkey")],
    ]  # fmt: skip


def run(launcher: list[str], model: Path, out: Path) -> subprocess.CompletedProcess:
    out.mkdir()
    args = json.dumps([[*command, "--json"] for command in commands(model, out)])
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    env.update(PYTHONPATH=str(SRC), OMP_NUM_THREADS="1", ACCELERATE_USE_CPU="true")
    return subprocess.run(
        [*launcher, str(RUN), args], capture_output=True, text=True, timeout=1200, check=False, env=env
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def documents(text: str) -> list[dict]:
    """The JSON documents printed one after the other."""
    decoder, found, at = json.JSONDecoder(), [], 0
    while (at := text.find("{", at)) >= 0:
        document, at = decoder.raw_decode(text, at)
        found.append(document)
    return found


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_two_accelerate_processes_give_what_one_process_gives(smollm2_path, tmp_path):
    accelerate = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
                  "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                  "--main_process_port", str(free_port())]  # fmt: skip
    two = run(accelerate, smollm2_path, tmp_path / "two")
    assert two.returncode == 0, two.stderr[-3000:]
    one = run([sys.executable], smollm2_path, tmp_path / "one")
    assert one.returncode == 0, one.stderr[-3000:]

    assert "2 processes: each measures a share" in two.stderr
    printed = documents(one.stdout)
    assert two.stdout == one.stdout and len(printed) == 3  # the main process alone printed, what one process prints
    written = files(tmp_path / "one")
    assert files(tmp_path / "two") == written
    tasks, perplexity, passkey = printed
    assert [(r["method"], r["task"]) for r in tasks["rows"]] == [
        ("none", "cwe"), ("none", "fwe"), ("yarn", "cwe"), ("yarn", "fwe")
    ]  # fmt: skip
    assert [(r["method"], r["length"]) for r in perplexity["perplexity"]] == [
        ("none", 256), ("none", 512), ("yarn", 256), ("yarn", 512)
    ]  # fmt: skip
    ppl = {(r["method"], r["length"]): r["perplexity"] for r in perplexity["perplexity"]}
    assert ppl["none", 512] != ppl["yarn", 512] and all(1 < p < 1e3 for p in ppl.values())
    assert len(passkey["passkey"]) == 2 * 2
