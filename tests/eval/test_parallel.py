"""Data-parallel evaluation: ``ropekit eval tasks|perplexity|passkey`` on two CPU processes joined by gloo prints and
writes, byte for byte, what one process does, once; one process failing fails the run with its error, on one line,
without a hang.

Oracle: the same commands in one plain process (no launcher, so accelerate is never imported). ``dp_worker.py``
starts the two processes as ``accelerate launch`` starts its workers (its docstring says how).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ropekit.eval.parallel import dealt

WORKER = Path(__file__).with_name("dp_worker.py")
SRC = Path(__file__).resolve().parents[2] / "src"

#: small runs on the bundled tiny model (training length 256): every kind of unit, several methods and lengths
COMMANDS = {
    "tasks": [
        "eval", "tasks", "--model", "tiny", "--methods", "none,yarn,self_extend", "--tasks", "niah_single_1,vt",
        "--multiples", "1,2", "--samples", "3",
    ],
    "perplexity": ["eval", "perplexity", "--model", "tiny", "--methods", "none,yarn", "--multiples", "1,2,4",
                   "--max-tokens", "512"],
    "passkey": ["eval", "passkey", "--model", "tiny", "--methods", "none,yarn", "--multiples", "1,2",
                "--depths", "0,0.5,1", "--trials", "2"],
}  # fmt: skip

#: one process: the same commands in one interpreter, then whether anything imported accelerate
ONE_PROCESS = """
import json, sys
from ropekit.cli.app import app
for args in json.loads(sys.argv[1]):
    try:
        app(args, prog_name="ropekit")
    except SystemExit as done:
        if done.code not in (0, None):
            raise
print("accelerate imported:", "accelerate" in sys.modules, file=sys.stderr)
"""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    return {**env, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}


def _commands(folder: Path) -> list[list[str]]:
    return [[*args, "--out", str(folder / name), "--json"] for name, args in COMMANDS.items()]


def _two_processes(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(WORKER), "--processes", "2", *args],
        capture_output=True, text=True, timeout=600, check=False, env=_env(),
    )  # fmt: skip


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.distributed
def test_two_processes_print_and_write_what_one_process_does(tmp_path):
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    two = _two_processes([arg for command in _commands(tmp_path / "two") for arg in ["--", *command]])
    assert two.returncode == 0, two.stderr[-3000:]
    one = subprocess.run(
        [sys.executable, "-c", ONE_PROCESS, json.dumps(_commands(tmp_path / "one"))],
        capture_output=True, text=True, timeout=600, check=False, env=_env(),
    )  # fmt: skip
    assert one.returncode == 0, one.stderr[-3000:]
    assert "accelerate imported: False" in one.stderr

    assert two.stdout == one.stdout  # the main process printed the three results; the other printed nothing
    assert two.stdout.count('"context"') == 3
    assert "2 processes: each measures a share" in two.stderr  # the main process's progress says what it counts
    assert _error_lines(two.stderr) == []
    written = _files(tmp_path / "one")
    assert sorted(written) == [
        "passkey/passkey.csv", "passkey/results.json", "perplexity/perplexity.csv", "perplexity/results.json",
        "tasks/tasks.json",
    ]  # fmt: skip
    assert _files(tmp_path / "two") == written
    rows = json.loads(written["tasks/tasks.json"])["rows"]
    assert len(rows) == 3 * 2 * 2 and {r["method"] for r in rows} == {"none", "yarn", "self_extend"}


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


@pytest.mark.distributed
def test_one_process_failing_fails_the_run_with_its_error(tmp_path):
    """Process 1's first sample raises: both processes stop (no hang: the failure travels through the gather), the
    run exits non-zero, the main process prints process 1's error on one line and writes nothing."""
    out = tmp_path / "out"
    failed = _two_processes(["--fail-rank", "1", "--", *COMMANDS["tasks"], "--out", str(out), "--json"])
    assert failed.returncode == 2, failed.stderr[-3000:]
    assert _error_lines(failed.stderr) == ["error: evaluation failed: rank 1 of 2: injected failure in rank 1"]
    assert failed.stdout == ""
    assert not (out / "tasks.json").exists()


@pytest.mark.distributed
def test_a_sweep_failing_in_one_process_keeps_the_methods_before_it(tmp_path):
    """As in one process, the methods measured before the failing one are written, by the main process alone."""
    out = tmp_path / "out"
    args = [*COMMANDS["perplexity"], "--out", str(out)]
    failed = _two_processes(["--fail-rank", "1", "--fail-method", "yarn", "--", *args])
    assert failed.returncode == 2, failed.stderr[-3000:]
    [line] = _error_lines(failed.stderr)
    assert line.startswith("error: evaluation failed at --methods yarn: rank 1 of 2: injected failure in rank 1; ")
    kept = json.loads((out / "results.json").read_text())
    assert kept["context"]["partial"] is True
    assert [(r["method"], r["length"]) for r in kept["perplexity"]] == [("none", 256), ("none", 512), ("none", 1024)]


@pytest.mark.parametrize("processes", [2, 3, 4])
def test_dealing_gives_equal_counts_and_near_equal_costs(processes):
    """The split of ``split_between_processes`` (contiguous chunks, the first ``len % n`` one longer) of the dealt
    order: every unit once, counts within one, and costs within the largest unit's (sorted round-robin)."""
    costs = [(7919 * i) % 101 + 1 for i in range(23)]
    order = dealt(costs, processes)
    base, extra = divmod(len(costs), processes)
    hands, start = [], 0
    for rank in range(processes):
        end = start + base + (rank < extra)
        hands.append(order[start:end])
        start = end
    assert sorted(order) == list(range(len(costs)))
    assert max(map(len, hands)) - min(map(len, hands)) <= 1
    sums = [sum(costs[i] for i in hand) for hand in hands]
    assert max(sums) - min(sums) <= max(costs)
    assert dealt(costs, processes) == order  # deterministic


def test_report_refuses_several_processes(monkeypatch):
    """``report`` is not split: on several processes each would write the whole report into one folder."""
    from typer.testing import CliRunner

    from ropekit.cli.app import app

    launch = {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    for name, value in launch.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(app, ["report", "--model", "tiny"])
    assert result.exit_code == 2
    assert "error: report runs in one process, not on 2;" in result.output
