"""``--engine``, ``--url``, ``--concurrency`` on ``eval tasks``, ``eval perplexity`` and ``eval passkey``: a bad
choice is a one-line error naming the option before anything loads; on SmolLM2 (``real``, ``llamacpp``) the
llama.cpp engine's ``tasks.json`` scores equal the torch path's on the same samples."""

from __future__ import annotations

import json
import socket

import pytest
from typer.testing import CliRunner

from ropekit.cli.app import app

runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


def error_line(result) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize("command", ["tasks", "perplexity", "passkey"])
@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        (["--engine", "vllm"], "--engine must be one of torch, llamacpp, openai"),
        (["--engine", "openai"], "--engine openai needs --url"),
        (["--url", "http://127.0.0.1:1/v1"], "--url applies to --engine openai"),
        (["--engine", "llamacpp", "--device-map", "auto"], "--device-map applies to --engine torch"),
        (["--engine", "llamacpp", "--dtype", "bfloat16"], "--dtype applies to --engine torch"),
        (["--engine", "openai", "--url", "http://127.0.0.1:1/v1", "--concurrency", "0"], "--concurrency must be"),
    ],
)
def test_a_bad_engine_choice_is_one_line(command: str, options: list[str], fragment: str) -> None:
    assert fragment in error_line(run("eval", command, "--model", "x.gguf", *options))


@pytest.mark.llamacpp
def test_llamacpp_needs_a_gguf_file() -> None:
    pytest.importorskip("llama_cpp")
    line = error_line(run("eval", "tasks", "--model", "tiny", "--engine", "llamacpp"))
    assert "--engine llamacpp needs --model to be a .gguf file" in line


@pytest.mark.slow
@pytest.mark.real
@pytest.mark.llamacpp
def test_an_unreachable_server_is_one_line(smollm2_path) -> None:
    pytest.importorskip("llama_cpp")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    line = error_line(run("eval", "tasks", "--model", smollm2_path, "--engine", "openai", "--url", url))
    assert f"--url {url}" in line and "unreachable" in line


@pytest.mark.slow
@pytest.mark.llamacpp
@pytest.mark.real
@pytest.mark.hf
def test_llamacpp_scores_equal_the_torch_path(smollm2_path, tmp_path) -> None:
    pytest.importorskip("llama_cpp")
    common = ["eval", "tasks", "--model", smollm2_path, "--methods", "none", "--tasks", "niah_single_1,vt"]
    common += ["--lengths", "1024", "--samples", "2", "--json"]
    ours = run(*common, "--engine", "llamacpp")
    theirs = run(*common)
    assert ours.exit_code == 0 and theirs.exit_code == 0, ours.output + theirs.output
    rows = [[(r["task"], r["score"]) for r in json.loads(out.stdout)["rows"]] for out in (ours, theirs)]
    assert rows[0] == rows[1]
    assert json.loads(ours.stdout)["context"]["model"]["kind"] == "llamacpp"


@pytest.mark.parametrize("model", ["tiny", "missing-folder", "notes.txt"])
def test_engines_needs_a_transformers_folder_or_a_gguf_file(model: str) -> None:
    result = run("engines", "--model", model)
    assert result.exit_code == 2
    assert f"--model {model!r}: give a transformers model folder (with config.json) or a .gguf file" in error_line(
        result
    )


@pytest.mark.parametrize("logits", ["-1", "1025", "100000000"])
def test_engines_bounds_logits_before_reading_the_model(logits: str) -> None:
    line = error_line(run("engines", "--model", "missing-folder", "--logits", logits))
    assert (
        line == f"error: --logits must be between 0 and 1024 (random token ids whose logits are compared), got {logits}"
    )


@pytest.mark.parametrize("installed", ["checked", "5.99.0"])
def test_engines_says_when_an_engine_is_not_the_checked_version(llama_dir, monkeypatch, installed: str) -> None:
    """One line after the rows, and ``unchecked_versions`` in the JSON, name an engine that is another version than
    ``ropekit._versions.CHECKED`` (here transformers, the reference, made to report another version)."""
    import ropekit.engines.compare as compare
    from ropekit._versions import CHECKED

    version = CHECKED["transformers"] if installed == "checked" else installed
    monkeypatch.setattr(compare, "transformers_version", lambda: version)
    args = ["engines", "--model", str(llama_dir), "--scaling", "linear", "--factor", "2", "--engines", "Ollama"]
    text, data = run(*args, "--logits", "0"), run(*args, "--logits", "0", "--json")
    assert text.exit_code == 0 and data.exit_code == 0, text.output + data.output
    notes = [line for line in text.stdout.splitlines() if line.startswith("note: ropekit's engine checks")]
    if installed == "checked":
        assert notes == [] and json.loads(data.stdout)["unchecked_versions"] is None
    else:
        expected = f"transformers 5.99.0 (checked: {CHECKED['transformers']})"
        assert notes == [f"note: ropekit's engine checks were made against other versions than these: {expected}"]
        assert json.loads(data.stdout)["unchecked_versions"] == expected
