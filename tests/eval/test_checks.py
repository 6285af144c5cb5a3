"""The evaluation's checks before its first forward pass (``ropekit.eval.checks``, run by ``evaluate``): each
refusal is an ``InvalidArgument`` naming the settings field, raised before any forward pass, and the CLI's one-line
error is that refusal with the field's option in front. Oracles: the command's own error line, a forward pass that
fails the test if it runs, and ``make_samples`` / ``fitting_tasks`` called directly."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ropekit.cli.app import app
from ropekit.cli.common import error_message
from ropekit.errors import InvalidArgument
from ropekit.eval import run as eval_run
from ropekit.eval import sweep as eval_sweep
from ropekit.eval.checks import NoTaskFits, PreparedTasks, check_sweep, prepare_tasks
from ropekit.eval.loader import load_eval_model
from ropekit.eval.run import evaluate
from ropekit.eval.sweep import SweepSettings
from ropekit.eval.tasks.run import TaskSettings, fitting_tasks, make_samples


@pytest.fixture(scope="module")
def tiny():
    return load_eval_model("tiny")


@pytest.fixture
def no_forward(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("a forward pass ran before the checks refused the settings")

    monkeypatch.setattr(eval_sweep, "run_sweep", forbidden)
    monkeypatch.setattr(eval_run, "run_tasks", forbidden, raising=False)


def cli_error(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    return next(line for line in result.stderr.splitlines() if line.startswith("error:"))


@pytest.mark.parametrize(
    ("settings", "argument", "command"),
    [
        (SweepSettings(methods=("none",), multiples=(0.001,)), "multiples", ["perplexity", "--multiples", "0.001"]),
        (SweepSettings(methods=("none",), multiples=(4000.0,)), "multiples", ["perplexity", "--multiples", "4000"]),
        (
            SweepSettings(methods=("none",), passkey_multiples=(0.001,)),
            "passkey_multiples",
            ["passkey", "--multiples", "0.001"],
        ),
    ],
)
def test_a_refusal_names_the_field_and_the_cli_its_option(tiny, no_forward, settings, argument, command) -> None:
    perplexity = command[0] == "perplexity"
    with pytest.raises(InvalidArgument) as caught:
        check_sweep(tiny, settings, perplexity=perplexity, passkey=not perplexity)
    assert caught.value.argument == argument
    line = cli_error("eval", *command, "--model", "tiny", "--methods", "none")
    assert line == "error: " + error_message(caught.value, {argument: "--multiples"})
    assert line.startswith("error: --multiples")


def test_evaluate_refuses_before_any_forward_pass(tiny, no_forward) -> None:
    with pytest.raises(InvalidArgument) as caught:
        evaluate(tiny, SweepSettings(methods=("none",), multiples=(4000.0,)))
    assert caught.value.argument == "multiples" and "the evaluation text has" in str(caught.value)
    tasks = TaskSettings(methods=("none",), tasks=("niah_single_1",), lengths=(1 << 31,), samples=1)
    with pytest.raises(InvalidArgument) as caught:
        evaluate(tiny, SweepSettings(methods=("none",), multiples=(1.0,)), tasks=tasks)
    assert caught.value.argument == "tasks.lengths"
    assert str(caught.value).startswith("tasks.lengths gives length 2,147,483,648")


def test_prepared_samples_are_make_samples_and_unfit_tasks_are_left_out(tiny) -> None:
    settings = TaskSettings(methods=("none",), tasks=("niah_single_1", "vt"), lengths=(256,), samples=2)
    prepared = prepare_tasks(tiny, settings)
    assert isinstance(prepared, PreparedTasks) and prepared.dropped == {}
    expected = make_samples(tiny, settings)
    assert prepared.samples.keys() == expected.keys()
    assert all(
        [s.prompt(0).tolist() for s in prepared.samples[key]] == [s.prompt(0).tolist() for s in expected[key]]
        for key in expected
    )
    short = TaskSettings(methods=("none",), tasks=("niah_single_1", "vt"), lengths=(48,), samples=1)
    unfit = fitting_tasks(tiny, short)
    assert unfit, "the oracle needs a task that does not fit 48 tokens"
    if len(unfit) == len(short.tasks):
        with pytest.raises(NoTaskFits) as none_fits:
            prepare_tasks(tiny, short, leave_out=True)
    else:
        left = prepare_tasks(tiny, short, leave_out=True)
        assert left.dropped == unfit and left.settings.tasks == tuple(t for t in short.tasks if t not in unfit)
    with pytest.raises(InvalidArgument) as caught:
        prepare_tasks(tiny, short)
    assert caught.value.argument == "lengths"
    if len(unfit) == len(short.tasks):  # the same refusal, made once
        assert str(none_fits.value) == str(caught.value) and none_fits.value.argument == "lengths"


def test_when_no_task_fits_the_refusal_is_made_once_and_is_the_first_tasks(tiny, monkeypatch) -> None:
    """``leave_out`` with no task fitting raises the first task's refusal itself (no second call needed), having
    made the samples once: counted on ``make_samples``."""
    import ropekit.eval.tasks.run as run

    short = TaskSettings(methods=("none",), tasks=("niah_single_1", "vt"), lengths=(8,), samples=1)
    calls = []
    made = run.make_samples
    monkeypatch.setattr(run, "make_samples", lambda *a, **k: calls.append(1) or made(*a, **k))
    with pytest.raises(NoTaskFits) as caught:
        prepare_tasks(tiny, short, leave_out=True)
    assert len(calls) == 1 and caught.value.argument == "lengths" and "niah_single_1" in str(caught.value)


def test_no_method_that_can_run_is_about_methods(tiny, no_forward) -> None:
    with pytest.raises(InvalidArgument) as caught:  # longrope's per-pair factors cannot be derived in a sweep
        check_sweep(tiny, SweepSettings(methods=("longrope",), multiples=(1.0,)), passkey=False)
    assert caught.value.argument == "methods" and ": none of the methods can run" in str(caught.value)
