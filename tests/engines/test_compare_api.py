"""``ropekit.engines.compare.compare``: the library comparison (the scratch extension included) gives the rows
``ropekit engines --json`` prints for the same model and method (the oracle: the command's own output), and its
checks refuse bad input naming the argument."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ropekit.cli.app import app
from ropekit.engines.compare import Extension, check_compare, compare
from ropekit.errors import InvalidArgument
from ropekit.scaling.linear import LinearScaling


@pytest.mark.hf
def test_compare_gives_the_rows_of_the_command(llama_dir) -> None:
    args = ["engines", "--model", str(llama_dir), "--scaling", "linear", "--factor", "2", "--engines", "Ollama"]
    result = CliRunner().invoke(app, [*args, "--logits", "0", "--json"])
    assert result.exit_code == 0, result.output
    flags = "--scaling linear --factor 2"
    ours = compare(llama_dir, Extension(LinearScaling(factor=2.0), flags=flags), engines=("Ollama",))
    theirs = json.loads(result.stdout)
    assert ours.as_dict()["engines"] == theirs["engines"]
    assert ours.as_dict()["reference"] == theirs["reference"]
    assert ours.as_dict()["launch"] == theirs["launch"]


@pytest.mark.parametrize(
    ("model", "options", "argument"),
    [
        ("missing-folder", {}, "model"),
        ("missing-folder", {"logits": 1025}, "logits"),
    ],
)
def test_check_compare_names_the_argument(model, options, argument) -> None:
    with pytest.raises(InvalidArgument) as caught:
        check_compare(model, **options)
    assert caught.value.argument == argument


def test_unknown_engines_are_named(llama_dir) -> None:
    with pytest.raises(InvalidArgument) as caught:
        check_compare(llama_dir, engines=("Ollama", "TGI"))
    assert caught.value.argument == "engines" and caught.value.value == ["TGI"]


def test_engine_names_match_without_case(llama_dir) -> None:
    """``--engines vllm,ollama`` names the engines the table spells ``vLLM`` and ``Ollama`` (the command and the
    library accept both spellings); a name no engine has is still refused as given."""
    from ropekit.engines.compare import engine_names

    assert engine_names(["vllm", " OLLAMA", "llama.CPP", "TGI"]) == ("vLLM", "Ollama", "llama.cpp", "TGI")
    check_compare(llama_dir, engines=("vllm", "sglang"))
    result = CliRunner().invoke(app, ["engines", "--model", str(llama_dir), "--engines", "ollama", "--json"])
    assert result.exit_code == 0, result.output
    assert [row["engine"] for row in json.loads(result.stdout)["engines"]] == ["Ollama"]
