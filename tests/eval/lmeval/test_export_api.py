"""``export_lm_eval``: the library export of a tokenizer-only model writes the folder ``eval tasks --write-lm-eval``
writes, file for file (the oracle: the command's own folder), and refuses a byte-level model naming ``model``."""

from __future__ import annotations

import pytest

from helpers.lmeval_run import cli
from ropekit.errors import InvalidArgument
from ropekit.eval.lmeval.export import export_lm_eval
from ropekit.eval.loader import load_eval_model
from ropekit.eval.tasks.run import TaskSettings

pytestmark = pytest.mark.hf

TASKS = ("niah_single_1", "vt")


def files(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_library_writes_the_folder_the_command_writes(byte_model, tmp_path) -> None:
    theirs = tmp_path / "cli"
    args = ["--tasks", ",".join(TASKS), "--lengths", "256", "--samples", "2", "--methods", "none"]
    result = cli("eval", "tasks", "--model", byte_model, *args, "--write-lm-eval", theirs)
    assert result.exit_code == 0, result.output
    model = load_eval_model(byte_model, tokenizer_only=True)
    settings = TaskSettings(methods=("none",), tasks=TASKS, lengths=(256,), samples=2)
    ours = tmp_path / "library"
    manifest = export_lm_eval(model, settings, ours)
    mine, cli_files = files(ours), files(theirs)
    assert mine.keys() == cli_files.keys()
    differing = {name for name in mine if mine[name] != cli_files[name]}
    assert differing <= {"manifest.json"}  # only the run command's folder differs
    assert mine["manifest.json"].decode().replace(str(ours), str(theirs)) == cli_files["manifest.json"].decode()
    assert manifest["questions"] > 0


def test_a_byte_level_model_is_refused_naming_model(tmp_path) -> None:
    settings = TaskSettings(methods=("none",), tasks=TASKS, lengths=(256,), samples=1)
    with pytest.raises(InvalidArgument) as caught:
        export_lm_eval(load_eval_model("tiny", tokenizer_only=True), settings, tmp_path / "out")
    assert caught.value.argument == "model" and not (tmp_path / "out").exists()
