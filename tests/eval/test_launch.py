"""A launch is told from a ``WORLD_SIZE`` left in the shell: without the variables torchrun sets in every process it
starts, the commands refuse in one line before joining anyone; a launch whose peers never come stops at the
rendezvous timeout with one line instead of waiting (torch's own default would be the gather's seven days).

Oracle: torchrun's contract (it sets ``RANK``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT`` beside
``WORLD_SIZE``), and a rendezvous at a port where no peer ever connects."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ropekit.cli.app import app
from ropekit.eval.parallel import LAUNCH_VARIABLES, LaunchError, launched_processes

SRC = Path(__file__).resolve().parents[2] / "src"
LAUNCH = {"RANK": "0", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


@pytest.fixture
def no_launch(monkeypatch):
    for name in ("WORLD_SIZE", *LAUNCH_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_a_launch_needs_every_variable_torchrun_sets(no_launch):
    assert launched_processes() == 1
    no_launch.setenv("WORLD_SIZE", "1")
    assert launched_processes() == 1  # one process needs no peers
    no_launch.setenv("WORLD_SIZE", "2")
    with pytest.raises(LaunchError, match=r"WORLD_SIZE=2 but RANK, LOCAL_RANK, MASTER_ADDR, MASTER_PORT are not set"):
        launched_processes()
    for name, value in LAUNCH.items():
        no_launch.setenv(name, value)
    assert launched_processes() == 2
    no_launch.delenv("MASTER_PORT")
    with pytest.raises(LaunchError, match="but MASTER_PORT is not set") as caught:
        launched_processes()
    assert caught.value.argument == "WORLD_SIZE"


@pytest.mark.parametrize(
    ("world_size", "rank", "message"),
    [
        ("two", "0", "WORLD_SIZE must be a positive whole number of processes, got 'two'"),
        ("0", "0", "WORLD_SIZE must be a positive whole number of processes, got '0'"),
        ("-2", "0", "WORLD_SIZE must be a positive whole number"),
        ("2", "2", "RANK must be a whole number below WORLD_SIZE=2, got '2'"),
        ("2", "-1", "RANK must be a whole number below WORLD_SIZE=2, got '-1'"),
    ],
)
def test_a_bad_world_size_or_rank_is_refused(no_launch, world_size, rank, message):
    for name, value in {**LAUNCH, "RANK": rank, "WORLD_SIZE": world_size}.items():
        no_launch.setenv(name, value)
    with pytest.raises(LaunchError) as caught:
        launched_processes()
    assert message in str(caught.value)


@pytest.mark.parametrize(
    "args",
    [
        ["eval", "perplexity", "--model", "tiny", "--methods", "none", "--multiples", "1"],
        ["eval", "tasks", "--model", "tiny", "--methods", "none", "--tasks", "vt", "--samples", "1"],
        ["report", "--model", "tiny"],
    ],
)
def test_a_leftover_world_size_is_one_line_before_any_work(no_launch, args):
    no_launch.setenv("WORLD_SIZE", "2")
    result = CliRunner().invoke(app, args)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert lines[0].startswith("error: WORLD_SIZE=2 but RANK, LOCAL_RANK, MASTER_ADDR, MASTER_PORT are not set")
    assert "accelerate launch" in lines[0]


#: one process of a launch of two whose peer never starts, with the rendezvous timeout made short
ALONE = """
import sys
from datetime import timedelta
import ropekit.eval.parallel as parallel
from ropekit.cli.app import app
parallel.RENDEZVOUS_TIMEOUT = timedelta(seconds=2)
app(["eval", "perplexity", "--model", "tiny", "--methods", "none", "--multiples", "1"], prog_name="ropekit")
"""


@pytest.mark.distributed
def test_a_peer_that_never_comes_ends_the_rendezvous_in_one_line():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", *LAUNCH_VARIABLES)}
    env.update(LAUNCH, MASTER_PORT=str(port), WORLD_SIZE="2", ACCELERATE_USE_CPU="true", PYTHONPATH=str(SRC))
    env.update(OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    # the subprocess timeout only guards the test run against a hang; the rendezvous ends after 2 s of waiting
    done = subprocess.run(
        [sys.executable, "-c", ALONE], capture_output=True, text=True, timeout=300, check=False, env=env
    )
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 2, done.stderr[-3000:]
    assert len(errors) == 1, done.stderr[-3000:]
    assert errors[0].startswith(f"error: the 2 processes of WORLD_SIZE did not join at 127.0.0.1:{port} within 2 s (")
    assert errors[0].endswith("); start them together with accelerate launch (or torchrun)")


def test_finetune_refuses_a_leftover_world_size_before_accelerate(no_launch):
    from ropekit.finetune.settings import FinetuneSettings
    from ropekit.finetune.train import make_accelerator

    no_launch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match="WORLD_SIZE=2 but RANK, LOCAL_RANK, MASTER_ADDR, MASTER_PORT are not set"):
        make_accelerator(FinetuneSettings(target_length=128, steps=1))
