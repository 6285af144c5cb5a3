"""``eval tasks --engine openai`` end to end against scripted servers in this process (no engine, no weights):
``--model`` a transformers folder (its tokenizer), ``--served-model`` required where the server lists several, a
rerun against another server refused by ``--out`` naming what changed (``--force`` starts again and asks the new
server everything), and ``tasks.json`` saying how the prompts were sent. The oracle is what each server was asked
and its answers, which name it."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

pytest.importorskip("transformers")

from helpers.fake_openai import FakeServer, fixed_prompt, tokenizer_folder
from ropekit.cli.app import app

runner = CliRunner()


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tokenizer_folder(tmp_path_factory.mktemp("served") / "model")


def tasks(folder, url, *options):
    common = ["eval", "tasks", "--model", str(folder), "--engine", "openai", "--url", url, "--methods", "none"]
    common += ["--tasks", "niah_single_1,vt", "--lengths", "256", "--samples", "2", "--concurrency", "1"]
    return runner.invoke(app, [*common, *map(str, options)], env={"COLUMNS": "200"})


def error_line(result) -> str:
    assert result.exit_code != 0, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_several_served_models_need_served_model_and_a_folder_is_a_tokenizer(folder, tmp_path) -> None:
    with FakeServer(models=("small", "large")) as server:
        line = error_line(tasks(folder, server.url))
        assert "--served-model" in line and "'small', 'large'" in line and not server.asked
        result = tasks(folder, server.url, "--served-model", "large", "--out", tmp_path)
    assert result.exit_code == 0, result.output
    described = json.loads((tmp_path / "tasks.json").read_text())["context"]["model"]
    assert described["server_model"] == "large" and described["prompts"] == "token ids"
    assert described["tokenizer"]["folder"] == str(folder)
    assert server.asked and {body["model"] for body in server.asked} == {"large"}
    assert all(isinstance(body["prompt"], list) for body in server.asked)


def test_a_rerun_against_another_server_is_refused_then_restarted_with_force(folder, tmp_path) -> None:
    calls = {"n": 0}

    def dies(path, body):
        if path.endswith("/completions") and not fixed_prompt(body["prompt"]):
            calls["n"] += 1
            if calls["n"] > 1:
                return 400, {"error": {"message": "the server is shutting down"}}  # not retried: no backoff here
        return None

    with FakeServer(tag="A", script=dies) as first:
        assert tasks(folder, first.url, "--out", tmp_path).exit_code != 0  # dies after one answer
    with FakeServer(tag="B") as second:  # the same model id
        line = error_line(tasks(folder, second.url, "--out", tmp_path))
        assert line.startswith("error: --out:") and f"url: {first.url} → {second.url}" in line
        assert line.endswith("(--force starts it again)")
        assert not second.asked
        result = tasks(folder, second.url, "--out", tmp_path, "--force")
    assert result.exit_code == 0, result.output
    answers = [json.loads(line) for line in (tmp_path / "answers.jsonl").read_text().splitlines()[1:]]
    assert len(answers) == len(second.asked) and all(a["text"].startswith("B") for a in answers)
    assert json.loads((tmp_path / "tasks.json").read_text())["context"]["model"]["url"] == second.url


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        (["--timeout", "0"], "--timeout must be a number of seconds in (0, 86400], got 0"),
        (["--served-model", ""], "--served-model must name a model"),
    ],
)
def test_bad_server_options_are_one_line(folder, options, fragment) -> None:
    assert fragment in error_line(tasks(folder, "http://127.0.0.1:1/v1", *options))


@pytest.mark.parametrize("options", [["--served-model", "m"], ["--timeout", "5"]])
def test_server_options_apply_to_the_openai_engine_only(options) -> None:
    result = runner.invoke(app, ["eval", "tasks", "--model", "tiny", *options])
    assert f"{options[0]} applies to --engine openai, not --engine torch" in error_line(result)
