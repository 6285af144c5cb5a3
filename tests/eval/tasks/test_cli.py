"""``ropekit eval tasks``: one-line errors (exit 2) before any work, and a small run on the bundled model."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ropekit.cli.app import app

runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tasks", "qa_1"], "--tasks"),
        (["--tasks", ""], "--tasks"),
        (["--samples", "0"], "--samples"),
        (["--multiples", "0"], "--multiples"),
        (["--multiples", "0.25"], "--multiples"),  # 64 bytes: too short for the tasks
        (["--lengths", "4k", "--multiples", "2"], "--lengths"),
        (["--lengths", "abc"], "--lengths"),
        (["--threshold", "150"], "--threshold"),
        (["--depth", "1.5"], "--depth"),
        (["--methods", "nope"], "--methods"),
        (["--text", "/no/such/file"], "--text"),
        (["--methods", "none,sinks", "--param", "group=4"], "--param: unknown params ['group']"),
        (["--methods", "self_extend", "--param", "group=0"], "--param: params of self_extend: group must be"),
        (["--param", "group"], "--param items must look like name=value"),
    ],
)
def test_bad_input_is_one_line(args, message):
    result = runner.invoke(
        app, ["eval", "tasks", "--samples", "1", *args] if "--samples" not in args else ["eval", "tasks", *args]
    )
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], result.output


def test_refuses_existing_results(tmp_path):
    (tmp_path / "tasks.json").write_text("{}")
    result = runner.invoke(app, ["eval", "tasks", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "--force" in result.output


def test_small_run_json(tmp_path):
    result = runner.invoke(
        app,
        [
            "eval",
            "tasks",
            "--tasks",
            "niah_single_1,vt",
            "--samples",
            "2",
            "--multiples",
            "1,2",
            "--methods",
            "none,yarn",
            "--json",
            "--out",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout[result.stdout.index("{") :])
    assert len(data["rows"]) == 2 * 2 * 2
    assert {m["length"] for m in data["summary"]["means"]} == {256, 512}
    assert json.loads((tmp_path / "tasks.json").read_text())["context"]["settings"]["samples"] == 2


def test_all_tasks_leave_out_those_that_do_not_fit(tmp_path):
    """``--tasks all`` at 160 bytes runs the tasks that fit (each generator's own error decides) and names the rest;
    the same task named explicitly is an error."""
    from ropekit.eval.tasks.base import Pieces
    from ropekit.eval.tasks.suite import TASKS, make_sample
    from ropekit.model.tokenizer import byte_ids

    pieces, fits = Pieces(byte_ids), []
    for task in TASKS:
        try:
            make_sample(task, 160, byte_ids, text=byte_ids(b"def f(x): return x\n" * 40), pieces=pieces)
            fits.append(task)
        except ValueError:
            pass
    assert 0 < len(fits) < len(TASKS)
    args = ["eval", "tasks", "--methods", "none", "--lengths", "160", "--samples", "1"]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout[result.stdout.index("{") :])["rows"]
    assert sorted(row["task"] for row in rows) == sorted(fits)
    left_out = [t for t in TASKS if t not in fits]
    assert all(f"left out {t}" in result.output for t in left_out)
    named = runner.invoke(app, [*args, "--tasks", left_out[0]])
    assert named.exit_code == 2 and left_out[0] in named.output
