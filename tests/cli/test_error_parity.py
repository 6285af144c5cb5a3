"""The CLI and the library give the same error for the same bad input.

For each row, the library call raises a structured :class:`ropekit.errors.InvalidArgument` about its argument; the
command's one ``error:`` line is that error written with the command's options (the option the argument maps to,
and the value), never a rewording of the message text.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.cli import assert_error, run
from ropekit.cli.common import error_message
from ropekit.errors import InvalidArgument


def _plan():
    from ropekit.theory.planning import plan

    plan(128, 10000.0, 8192, 4096)


def _train_fraction():
    from ropekit.model.train import TrainConfig

    TrainConfig(task_fraction=2.0)


def _task_weights():
    from ropekit.synthetic.suite import check_task_weights

    check_task_weights({"vt": -1})


def _infini_fields():
    from ropekit.model.tiny import TinyConfig

    TinyConfig(position="rope", segment_length=4)


def _experiment_device():
    from ropekit.experiments.base_bound.settings import ExperimentSettings

    ExperimentSettings(device="gpu")


def _finetune_window():
    from ropekit.finetune.settings import FinetuneSettings

    FinetuneSettings(target_length=128, window=256)


def _finetune_chunks():
    from ropekit.finetune.settings import FinetuneSettings

    FinetuneSettings(target_length=128, chunks=4)


def _attention_param():
    from ropekit.eval.methods import check_params

    check_params(("rerope",), {"window": 0})


def _searched_factors():
    from ropekit.eval.methods import check_params

    check_params(("searched",), {"factors": "/no/such/search.json"})


def _longrope_factors():
    from ropekit.scaling.longrope import LongRopeScaling

    LongRopeScaling(short_factor=(0.0, 1.0), long_factor=(1.0, 1.0), factor=2.0, original_max_position_embeddings=8)


TRAIN = ("train", "--out", "{tmp}/out")
#: (library call, its argument, the command, the option the argument maps to there, the value on the line)
CASES = [
    (_plan, "target_length", ("plan", "--original-length", "8k", "--target-length", "4k"), "--target-length", "4096"),
    (_train_fraction, "task_fraction", (*TRAIN, "--task-fraction", "2"), "--task-fraction", "2.0"),
    (_task_weights, "task_weights", (*TRAIN, "--task-mix", "suite", "--task-weights", "vt=-1"), "--task-weights", "-1"),
    (_infini_fields, "segment_length", (*TRAIN, "--segment-length", "4"), "--segment-length", "4"),
    (_experiment_device, "device", ("experiment", "base-bound", "--quick", "--device", "gpu"), "--device", "gpu"),
    (_attention_param, "params", ("eval", "tasks", "--methods", "rerope", "--attention-param", "window=0"), None, "0"),
    (
        _searched_factors,
        "params",
        ("eval", "perplexity", "--methods", "searched", "--param", "factors=/no/such/search.json"),
        "--param",
        "/no/such/search.json",
    ),
]
#: rows that need a transformers model folder (``{model}``)
MODEL_CASES = [
    (_finetune_window, "window", ("--window", "256"), "--window", "256"),
    (_finetune_chunks, "chunks", ("--chunks", "4"), "--chunks", "4"),
]

NAMES = {
    "target_length": "--target-length",
    "train_length": "--original-length",
    "task_fraction": "--task-fraction",
    "task_weights": "--task-weights",
    "task_mix": "--task-mix",
    "segment_length": "--segment-length",
    "memory_update": "--memory-update",
    "position": "--position",
    "device": "--device",
    "window": "--window",
    "chunks": "--chunks",
    "params": "--param",
}


def _library_error(call, argument: str) -> InvalidArgument:
    with pytest.raises(InvalidArgument) as caught:
        call()
    assert caught.value.argument == argument
    return caught.value


def _line(args, tmp_path: Path, model: Path | None = None) -> str:
    filled = [str(a).replace("{tmp}", str(tmp_path)).replace("{model}", str(model)) for a in args]
    return assert_error(run(*filled))


@pytest.mark.parametrize(("call", "argument", "args", "option", "value"), CASES, ids=[c[0].__name__ for c in CASES])
def test_the_cli_line_is_the_library_error_with_the_options(tmp_path, call, argument, args, option, value):
    error = _library_error(call, argument)
    line = _line(args, tmp_path)
    option = option or "--attention-param"
    assert option in line and value in line, line
    names = {**NAMES, "params": option}
    assert line == f"error: {error_message(error, names)}"


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    pytest.importorskip("transformers")
    from helpers.hf_models import byte_llama, random_hf_folder

    small = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2}
    return random_hf_folder(tmp_path_factory.mktemp("hf") / "llama", "llama", **byte_llama(**small))


@pytest.mark.parametrize(
    ("call", "argument", "args", "option", "value"), MODEL_CASES, ids=[c[0].__name__ for c in MODEL_CASES]
)
def test_finetune_settings_errors_match_the_library(tmp_path, model, call, argument, args, option, value):
    error = _library_error(call, argument)
    text = tmp_path / "text.txt"
    text.write_text("hello world " * 200)
    command = ("finetune", "--model", model, "--text", text, "--scaling", "yarn", "--target-length", "128")
    line = _line((*command, *args, "-o", tmp_path / "out"), tmp_path, model)
    assert option in line and value in line, line
    assert line == f"error: {error_message(error, NAMES)}"


def test_the_library_writes_its_own_argument_names():
    """The same errors, from the library alone, name the Python arguments."""
    assert str(_library_error(_plan, "target_length")).startswith("target_length must be >= train_length (8192)")
    assert str(_library_error(_finetune_chunks, "chunks")).startswith("chunks=4 cuts PoSE windows")
    assert "window=W" in str(_library_error(_finetune_chunks, "chunks"))
    longrope = _library_error(_longrope_factors, "short_factor")
    assert str(longrope) == "short_factor[0] must be > 0.0, got 0.0"
    assert error_message(longrope, {"short_factor": "--factors"}) == "--factors[0] must be > 0.0, got 0.0"


def test_extend_out_inside_the_model_matches_the_library(tmp_path, model):
    from ropekit._output import check_output

    out = model / "inside"
    error = _library_error(lambda: check_output(out, [("model", model)]), "out")
    assert f"the input model={str(model)!r}" in str(error)
    line = _line(("extend", "--model", model, "--scaling", "linear", "--factor", "2", "--out", out), tmp_path)
    assert line == f"error: {error_message(error, {'out': '--out', 'model': '--model'})}"
    assert f"--out {str(out)!r}" in line and f"the input --model {str(model)!r}" in line
