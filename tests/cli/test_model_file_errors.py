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
@pytest.mark.parametrize("size", [1_000_000, pytest.param(50_000_000, marks=pytest.mark.slow)], ids=["1MB", "50MB"])
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


# --- the option comes from the argument the error carries, not from its text ---------------------------------------


def test_loading_errors_carry_the_model_argument(tmp_path):
    from ropekit.errors import InvalidArgument, MissingFile
    from ropekit.eval.loader import load_eval_model
    from ropekit.integrations.gguf.file import check_gguf
    from ropekit.integrations.hf.load import load_config
    from ropekit.integrations.hf.model_config import rope_of

    with pytest.raises(MissingFile) as missing:
        load_config(tmp_path)
    assert missing.value.argument == "model" and missing.value.value == str(tmp_path)
    (tmp_path / "config.json").write_text("[1]")
    with pytest.raises(InvalidArgument) as not_object:
        load_config(tmp_path)
    assert not_object.value.argument == "model"
    with pytest.raises(InvalidArgument) as empty:
        (tmp_path / "m.gguf").write_bytes(b"")
        check_gguf(tmp_path / "m.gguf")
    assert empty.value.argument == "model"
    with pytest.raises(InvalidArgument) as no_rope:
        rope_of({"model_type": "gpt2", "n_positions": 64})
    assert no_rope.value.argument == "model_or_config"
    with pytest.raises(MissingFile) as nowhere:
        load_eval_model(tmp_path / "nowhere")
    assert nowhere.value.argument == "spec" and isinstance(nowhere.value, FileNotFoundError)


def test_model_errors_name_the_option_from_the_argument_not_the_text():
    """A library message that rewords or mentions "model" does not change which option the user is told about."""
    from ropekit.cli.common import model_error
    from ropekit.errors import InvalidArgument, MissingFile

    missing = MissingFile("spec", "/x", message="nothing at '/x'", leads=False)
    assert model_error(missing, "/x") == "--model: nothing at '/x'"
    assert model_error(InvalidArgument("model", "/x", message="model '/x' is empty"), "/x") == "--model '/x' is empty"
    other = InvalidArgument("factor", 0.5, "must be >= 1")  # about another argument: the model is the context
    assert model_error(other, "/x") == "--model '/x': factor must be >= 1, got 0.5"
    text = ValueError("model: a config value")  # no argument: the message is not read for one
    assert model_error(text, "/x") == "--model '/x': model: a config value"
