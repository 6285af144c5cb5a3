"""The evaluation defaults are written once (ropekit._defaults), and the CLI tells "not given" from "given"."""

from __future__ import annotations

import dataclasses
import inspect

from typer.testing import CliRunner

from ropekit import _defaults
from ropekit.cli.app import app
from ropekit.cli.eval_cmd import passkey_command, perplexity_command
from ropekit.cli.report_cmd import report_command
from ropekit.cli.tasks_cmd import tasks_command
from ropekit.eval.sweep import SweepSettings
from ropekit.eval.tasks.run import TaskSettings


def _fields(cls):
    return {f.name: f.default for f in dataclasses.fields(cls)}


def _option(command, name):
    return inspect.signature(command).parameters[name].default.default


def test_settings_and_options_share_the_defaults():
    sweep, tasks = _fields(SweepSettings), _fields(TaskSettings)
    assert sweep["multiples"] == (1, 2, 4, 8, 16) == _defaults.PERPLEXITY_MULTIPLES
    assert sweep["passkey_multiples"] == (1, 2, 4, 8) and sweep["depths"] == (0.0, 0.25, 0.5, 0.75, 1.0)
    assert tasks["multiples"] == (1, 2, 4) and tasks["threshold"] == 85.6  # RULER's threshold
    assert (sweep["mode"], sweep["stride"], sweep["max_tokens"], sweep["trials"]) == ("nonoverlap", 256, 16384, 10)
    assert _option(perplexity_command, "mode") == _option(report_command, "mode") == sweep["mode"]
    assert _option(perplexity_command, "max_tokens") == _option(report_command, "max_tokens") == sweep["max_tokens"]
    assert _option(passkey_command, "trials") == _option(report_command, "trials") == sweep["trials"]
    assert _option(perplexity_command, "multiples") == "1,2,4,8,16"
    assert _option(passkey_command, "multiples") == "1,2,4,8"
    assert _option(passkey_command, "depths") == "0,0.25,0.5,0.75,1"
    assert _option(report_command, "task_multiples") == "1,2,4"
    assert _option(report_command, "threshold") == _option(tasks_command, "threshold") == 85.6
    assert _option(tasks_command, "multiples") is None  # not given: TaskSettings' default


def test_tasks_lengths_with_multiples_equal_to_the_default_is_refused():
    result = CliRunner().invoke(app, ["eval", "tasks", "--lengths", "4k", "--multiples", "1,2,4"])
    assert result.exit_code == 2 and "--lengths and --multiples are alternatives" in result.output, result.output
