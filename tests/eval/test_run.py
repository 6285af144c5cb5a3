"""The library entry point: an Evaluation built and written in Python gives the same report folder, file for file,
as ``ropekit report`` with the same settings (the oracle: the command's own output; only the run time differs)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ropekit.cli.app import app
from ropekit.eval.loader import load_eval_model
from ropekit.eval.run import Evaluation, evaluate, write_report
from ropekit.eval.sweep import SweepSettings
from ropekit.eval.tasks.run import TaskSettings

METHODS = ("none", "linear", "yarn")
CLI = [
    "report",
    "--model", "tiny",
    "--methods", ",".join(METHODS),
    "--perplexity-multiples", "1,2",
    "--passkey-multiples", "1",
    "--depths", "0.5",
    "--trials", "1",
    "--max-tokens", "512",
    "--task-samples", "1",
    "--tasks", "niah_single_1",
    "--task-multiples", "1",
]  # fmt: skip
RUN_TIME = re.compile(rb"run time \d+ s")


@pytest.fixture(scope="module")
def evaluation() -> Evaluation:
    settings = SweepSettings(
        methods=METHODS, multiples=(1.0, 2.0), passkey_multiples=(1.0,), depths=(0.5,), trials=1, max_tokens=512
    )
    tasks = TaskSettings(methods=METHODS, tasks=("niah_single_1",), multiples=(1.0,), samples=1)
    return evaluate(load_eval_model("tiny"), settings, tasks=tasks)


def test_library_report_equals_the_command(evaluation: Evaluation, tmp_path: Path) -> None:
    index = write_report(evaluation, tmp_path / "library")
    result = CliRunner().invoke(app, [*CLI, "--out", str(tmp_path / "cli"), "--json"])
    assert result.exit_code == 0, result.output
    assert index == tmp_path / "library" / "index.html"
    library = sorted(p.name for p in (tmp_path / "library").iterdir())
    assert library == sorted(p.name for p in (tmp_path / "cli").iterdir())
    assert {"index.html", "summary.json", "tasks.json", "results.json", "perplexity.png"} <= set(library)
    for name in library:
        ours, theirs = (tmp_path / "library" / name).read_bytes(), (tmp_path / "cli" / name).read_bytes()
        assert RUN_TIME.sub(b"", ours) == RUN_TIME.sub(b"", theirs), name


def test_evaluation_holds_both_sections(evaluation: Evaluation) -> None:
    assert {row["method"] for row in evaluation.sweep.perplexity} == set(METHODS)
    assert {row["length"] for row in evaluation.sweep.passkey} == {evaluation.model.train_length}
    assert evaluation.tasks is not None and evaluation.tasks.context["dropped"] == {}
    assert evaluation.elapsed_s > 0


def test_write_report_refuses_existing_files_without_force(evaluation: Evaluation, tmp_path: Path) -> None:
    write_report(evaluation, tmp_path)
    before = (tmp_path / "summary.json").read_bytes()
    with pytest.raises(OSError):
        write_report(evaluation, tmp_path)
    write_report(evaluation, tmp_path, force=True)
    assert (tmp_path / "summary.json").read_bytes() == before
