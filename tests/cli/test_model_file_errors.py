"""A broken model file is a one-line error naming --model, for extend, finetune and eval (exit 2, no traceback,
nothing written).

Oracles: the path and the fault each case writes (both must appear in the error), and the file system.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.cli import assert_error, run

EXTEND_ARGS = ("extend", "--scaling", "yarn", "--factor", "2")


FINETUNE_ARGS = ("finetune", "--scaling", "yarn", "--target-length", "128", "--no-evaluate")


def _model_commands(model: Path, tmp_path: Path) -> list[tuple[str, ...]]:
    (tmp_path / "t.txt").write_text("hello " * 100)
    return [
        (*EXTEND_ARGS, "--model", model, "-o", tmp_path / "out"),
        (*FINETUNE_ARGS, "--model", model, "--text", tmp_path / "t.txt", "-o", tmp_path / "out"),
    ]


@pytest.mark.hf
@pytest.mark.parametrize(
    ("content", "fragment"),
    [(b"{not json", "not valid JSON"), (b"", "not valid JSON"), (b"[1, 2]", "JSON object"), (b"\xff\xfe", "JSON")],
    ids=["invalid", "empty", "list", "not-utf8"],
)
def test_a_broken_config_json_is_a_one_line_error(tmp_path, content, fragment):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_bytes(content)
    for args in _model_commands(model, tmp_path):
        assert_error(run(*args), "--model", str(model), "config.json", fragment)
        assert not (tmp_path / "out").exists()


@pytest.mark.hf
@pytest.mark.parametrize(
    ("content", "fragment"),
    [(b"", "empty"), (b"this is not a gguf file\n", "not a GGUF file"), (b"GGUF\x09\x00\x00\x00", "version 9")],
    ids=["empty", "not-gguf", "unknown-version"],
)
def test_a_file_named_gguf_that_is_not_one_is_a_one_line_error(tmp_path, content, fragment):
    model = tmp_path / "m.gguf"
    model.write_bytes(content)
    for args in _model_commands(model, tmp_path):
        line = assert_error(run(*args), "--model", str(model), fragment)
        assert "huggingface.co" not in line


@pytest.mark.real
@pytest.mark.parametrize("size", [1_000_000, 50_000_000], ids=["1MB", "50MB"])
def test_a_truncated_gguf_is_a_one_line_error(tmp_path, smollm2_path, size):
    """The real SmolLM2 GGUF cut short (an interrupted download), for extend, finetune and eval."""
    model = tmp_path / "m.gguf"
    with smollm2_path.open("rb") as source:
        model.write_bytes(source.read(size))
    commands = _model_commands(model, tmp_path)
    commands.append(
        ("eval", "perplexity", "--model", model, "--methods", "none", "--multiples", "1", "--max-tokens", "64")
    )
    for args in commands:
        line = assert_error(run(*args), "--model", str(model), "truncated")
        assert "huggingface.co" not in line and line.count("--model") == 1
        assert not (tmp_path / "out").exists()
