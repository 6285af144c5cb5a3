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
        (["--methods", "none,sinks", "--attention-param", "group=4"], "--attention-param: unknown params ['group']"),
        (
            ["--methods", "self_extend", "--attention-param", "group=0"],
            "--attention-param: params of self_extend: group must be",
        ),
        (["--attention-param", "group"], "--attention-param items must look like name=value"),
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
    """``--tasks all`` (RULER's and the tasks beyond) at 160 bytes runs the tasks that fit (each generator's own error decides) and names the rest;
    the same task named explicitly is an error."""
    from ropekit.model.tokenizer import byte_ids
    from ropekit.synthetic.base import Pieces
    from ropekit.synthetic.suite import TASKS, make_sample

    pieces, fits = Pieces(byte_ids), []
    for task in TASKS:
        try:
            make_sample(task, 160, byte_ids, text=byte_ids(b"def f(x): return x\n" * 40), pieces=pieces)
            fits.append(task)
        except ValueError:
            pass
    assert 0 < len(fits) < len(TASKS)
    args = ["eval", "tasks", "--methods", "none", "--lengths", "160", "--samples", "1", "--tasks", "all"]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout[result.stdout.index("{") :])["rows"]
    assert sorted(row["task"] for row in rows) == sorted(fits)
    left_out = [t for t in TASKS if t not in fits]
    assert all(f"left out {t}" in result.output for t in left_out)
    named = runner.invoke(app, [*args[:-2], "--tasks", left_out[0]])
    assert named.exit_code == 2 and left_out[0] in named.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--lengths", "128m"], "--lengths: length 134,217,728 needs positions up to 134,217,734"),
        (["--lengths", "1M", "--tasks", "vt"], "needs positions up to 1,048,582 (a wrong answer is fed up to 7 tokens"),
        (["--multiples", "1e9"], "--multiples gives length 256,000,000,000 (training length 256); lengths must be"),
        (["--multiples", "1e308"], "--multiples: multiple 1e+308 of the training length 256 is not a finite length"),
        (["--lengths", "512k", "--samples", "100000"], "--lengths: 100,000 samples x 11 tasks at length 524,288"),
    ],
)
def test_lengths_beyond_the_model_or_memory_are_refused_before_any_sample(args, message, monkeypatch):
    """The bundled model has 1,048,576 positions (a wrong answer is fed up to 7 tokens past the length: budget =
    answer + 8, the last token not fed); the samples' memory is checked against what is free. Nothing is built
    first: building a sample here fails the test."""

    def no_sample(*args, **kwargs):
        raise AssertionError("a sample was built before the lengths were checked")

    monkeypatch.setattr("ropekit.eval.tasks.run.make_sample", no_sample)
    result = runner.invoke(app, ["eval", "tasks", *args])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], result.output


def test_report_refuses_task_lengths_by_its_own_option(monkeypatch, tmp_path):
    monkeypatch.setattr("ropekit.eval.tasks.run.make_sample", lambda *a, **k: pytest.fail("a sample was built"))
    args = ["report", "--out", str(tmp_path / "r"), "--task-multiples", "1e9", "--perplexity-multiples", "1"]
    result = runner.invoke(app, [*args, "--passkey-multiples", "1"])
    assert result.exit_code == 2 and result.output.startswith("error: --task-multiples gives length"), result.output


def test_the_plan_check_against_its_closed_form():
    from ropekit.eval.tasks.limits import BUILD_BYTES, MEMORY_SHARE, SAMPLE_BYTES, check_lengths

    lengths, tasks, samples = [1000, 4000], 3, 5
    needed = SAMPLE_BYTES * tasks * samples * 5000 + BUILD_BYTES * 4000
    check_lengths(lengths, tasks=tasks, samples=samples, slack=7, max_positions=4007, free_memory=needed / MEMORY_SHARE)
    with pytest.raises(ValueError, match=r"length 4,000 needs positions up to 4,006 .* below 4,006"):
        check_lengths(lengths, tasks=tasks, samples=samples, slack=7, max_positions=4006)
    with pytest.raises(ValueError, match="5 samples x 3 tasks at 2 lengths up to 4,000 tokens need about"):
        check_lengths(lengths, tasks=tasks, samples=samples, slack=7, free_memory=needed / MEMORY_SHARE - 1)


def test_without_none_the_output_says_nothing_was_judged():
    args = ["eval", "tasks", "--methods", "rerope", "--attention-param", "window=1", "--tasks", "niah_single_1,vt"]
    result = runner.invoke(app, [*args, "--multiples", "1", "--samples", "2", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout[result.stdout.index("{") :])["summary"]
    assert summary["not_learned"] is None and summary["own_method"] is None and "add none" in summary["note"]
    printed = runner.invoke(app, [*args, "--multiples", "1", "--samples", "2"])
    assert "not judged: no 'none' among the methods" in printed.output and "not learned by" not in printed.output


def test_latent_hops_and_path_traversal_run_on_the_tiny_model_out_of_the_box():
    """``--tasks latent_hop,path_traversal``: the latent score beside its literal twin with the paired gap, the long
    answer's exact share, and NoLiMa's relative effective length, in the JSON and the printed tables."""
    args = ["eval", "tasks", "--model", "tiny", "--tasks", "latent_hop,path_traversal", "--lengths", "256,512"]
    result = runner.invoke(app, [*args, "--samples", "2", "--methods", "none", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout[result.stdout.index("{") :])
    rows = {(r["task"], r["length"]): r for r in data["rows"]}
    assert set(rows) == {(t, n) for t in ("latent_hop", "path_traversal") for n in (256, 512)}
    for n in (256, 512):
        literal = rows["latent_hop", n]["twins"]["literal"]
        assert literal["samples"] == 2 and literal["gap"]["pairs"] == 2
        assert rows["path_traversal", n]["exact"]["samples"] == 2
    assert [(g["length"], g["tasks"]) for g in data["summary"]["twins"]] == [
        (256, ["latent_hop"]),
        (512, ["latent_hop"]),
    ]
    (effective,) = [e for e in data["summary"]["effective"] if e["subset"] == "all"]
    assert "short_relative_effective_length" in effective and "short_relative_interval" in effective
    printed = runner.invoke(app, [*args, "--samples", "1", "--methods", "none"])
    assert printed.exit_code == 0 and "twin questions on the same contexts" in printed.output, printed.output
    assert "relative to the shortest" in printed.output and "correct prefix and exact" in printed.output
