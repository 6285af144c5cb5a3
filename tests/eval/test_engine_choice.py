"""``load_eval_model(path, engine=..., server=..., tokenizer_only=...)``: the engine's arguments refused before
anything loads (``InvalidArgument`` naming each, and the CLI's one-line error naming its option); ``engine="torch"``
gives the losses of the tiny model built directly; ``tokenizer_only`` loads a transformers model's tokenizer and
lengths without its weights (oracle: the fully loaded model's)."""

from __future__ import annotations

import pytest
import torch
from typer.testing import CliRunner

from ropekit.cli.app import app
from ropekit.errors import InvalidArgument
from ropekit.eval.engine_choice import Server
from ropekit.eval.loader import load_eval_model
from ropekit.eval.models import TinyEvalModel


@pytest.mark.parametrize(
    ("engine", "server", "options", "argument", "flags"),
    [
        ("vllm", Server(), {}, "engine", ["--engine", "vllm"]),
        ("openai", Server(), {}, "url", ["--engine", "openai"]),
        ("torch", Server(url="http://127.0.0.1:1/v1"), {}, "url", ["--url", "http://127.0.0.1:1/v1"]),
        ("llamacpp", Server(), {"device_map": "auto"}, "device_map", ["--engine", "llamacpp", "--device-map", "auto"]),
        ("llamacpp", Server(), {"dtype": "bfloat16"}, "dtype", ["--engine", "llamacpp", "--dtype", "bfloat16"]),
        ("torch", Server(timeout=5.0), {}, "timeout", ["--timeout", "5"]),
        ("torch", Server(served_model="m"), {}, "served_model", ["--served-model", "m"]),
    ],
)
def test_a_bad_engine_choice_is_refused_naming_the_argument(engine, server, options, argument, flags) -> None:
    with pytest.raises(InvalidArgument) as caught:
        load_eval_model("missing.gguf", engine=engine, server=server, **options)
    assert caught.value.argument == argument
    result = CliRunner().invoke(app, ["eval", "tasks", "--model", "missing.gguf", *flags])
    assert result.exit_code == 2
    option = "--" + argument.replace("_", "-")
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and option in lines[0]


def test_torch_gives_the_losses_of_the_tiny_model_built_directly() -> None:
    ids = torch.arange(1, 200) % 250
    chosen = load_eval_model("tiny", engine="torch").token_losses(ids)
    direct = TinyEvalModel("tiny").token_losses(ids)
    assert torch.equal(chosen, direct)


@pytest.mark.hf
def test_tokenizer_only_has_the_full_models_tokenizer_and_lengths_without_weights(llama_dir) -> None:
    light = load_eval_model(llama_dir, tokenizer_only=True)
    full = load_eval_model(llama_dir)
    assert not hasattr(light, "model") and hasattr(full, "model")
    text = b"The grass is green. " * 20
    assert torch.equal(light.encode(text), full.encode(text))
    assert (light.train_length, light.separator, light.vocab_size) == (
        full.train_length,
        full.separator,
        full.vocab_size,
    )
