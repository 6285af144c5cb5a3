"""One CLI vocabulary (docs/cli.md), checked on every option of every command, and the defaults that come from the
library's dataclasses.

Oracles: click's own view of the commands (``typer.main.get_command``), the written vocabulary in docs/cli.md, and
the dataclasses' field defaults (``FinetuneSettings``, ``SweepSettings``) and ``default_methods()``.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main

from ropekit.cli.app import app

DOC = Path(__file__).parents[2] / "docs" / "cli.md"
#: the fixed exceptions to "the flag is the parameter name with - for _" (docs/cli.md, rule 1)
SPELLED_OTHERWISE = {"json_output": "--json", "output_format": "--format", "with_islands": "--islands"}
#: the concepts of docs/cli.md's tables, each with its one flag
VOCABULARY = {
    "original_length": "--original-length",
    "target_length": "--target-length",
    "train_length": "--train-length",
    "seq_len": "--seq-len",
    "head_dim": "--head-dim",
    "rotary_dim": "--rotary-dim",
    "base": "--base",
    "scaling": "--scaling",
    "factor": "--factor",
    "param": "--param",
    "methods": "--methods",
    "out": "--out",
    "json_output": "--json",
    "model": "--model",
    "text": "--text",
    "seed": "--seed",
}
#: spellings of those concepts that must not come back
FORBIDDEN = (
    "--l0",
    "--original",
    "--orig-length",
    "--original-max-position-embeddings",
    "--target",
    "--context-length",
    "--max-length",
    "--rope-base",
    "--rope-theta",
    "--dim",
    "--output",
    "--output-dir",
    "--params",
    "--method",
)


def commands() -> Iterator[tuple[str, Any]]:
    """``(command path, click command)`` for every leaf command of ``ropekit``."""

    def walk(command: Any, path: str) -> Iterator[tuple[str, Any]]:
        subcommands = getattr(command, "commands", None)
        if subcommands is None:
            yield path, command
            return
        for name, sub in subcommands.items():
            yield from walk(sub, f"{path} {name}".strip())

    yield from walk(typer.main.get_command(app), "")


def options(command: Any) -> list[Any]:
    return [p for p in command.params if getattr(p, "param_type_name", "") == "option"]


ALL = list(commands())


def test_every_command_is_walked() -> None:
    names = {path for path, _ in ALL}
    assert {"frequencies", "inspect", "plan", "bound", "extend", "finetune", "train", "report"} <= names
    assert {"eval perplexity", "eval passkey", "eval tasks", "experiment base-bound"} <= names


@pytest.mark.parametrize(("path", "command"), ALL, ids=[path for path, _ in ALL])
def test_one_flag_per_option_and_no_hidden_aliases(path: str, command: Any) -> None:
    for option in options(command):
        assert not option.hidden, (path, option.opts)
        longs = [flag for flag in option.opts if flag.startswith("--")]
        shorts = [flag for flag in option.opts if not flag.startswith("--")]
        assert len(longs) == 1, (path, option.opts)
        assert shorts in ([], ["-o"]) and (not shorts or longs == ["--out"]), (path, option.opts)
        switch_off = [flag for flag in option.secondary_opts if flag != "--no-" + longs[0][2:]]
        assert not switch_off, (path, option.secondary_opts)
        expected = SPELLED_OTHERWISE.get(option.name, "--" + option.name.replace("_", "-"))
        assert longs == [expected], (path, option.name, option.opts)
        assert longs[0] not in FORBIDDEN, (path, longs)


def test_a_parameter_name_is_one_flag_in_every_command() -> None:
    flags: dict[str, set[str]] = defaultdict(set)
    names: dict[str, set[str]] = defaultdict(set)
    for _, command in ALL:
        for option in options(command):
            flags[option.name].add(option.opts[0])
            names[option.opts[0]].add(option.name)
    assert {name: sorted(f) for name, f in flags.items() if len(f) > 1} == {}
    assert {flag: sorted(n) for flag, n in names.items() if len(n) > 1} == {}
    for name, flag in VOCABULARY.items():
        assert flags[name] == {flag}, (name, flags[name])


def test_head_dim_and_rotary_dim_are_never_aliases() -> None:
    for path, command in ALL:
        for option in options(command):
            if "--head-dim" in option.opts or "--rotary-dim" in option.opts:
                assert option.opts in (["--head-dim"], ["--rotary-dim"]), (path, option.opts)
                assert option.name == option.opts[0][2:].replace("-", "_"), (path, option.name)


def test_every_scaling_command_takes_param_and_original_length() -> None:
    for path, command in ALL:
        flags = {option.opts[0] for option in options(command)}
        if "--scaling" in flags:
            assert {"--param", "--factor", "--original-length"} <= flags, path


def test_the_vocabulary_is_written_down() -> None:
    text = DOC.read_text()
    for flag in VOCABULARY.values():
        assert f"`{flag}`" in text, flag
    for name, flag in SPELLED_OTHERWISE.items():
        assert f"`{flag}` (`{name}`)" in text, flag


def test_plan_and_plot_take_l0_as_original_length() -> None:
    commands_by_path = dict(ALL)
    for path in ("plan", "plot"):
        flags = {option.opts[0] for option in options(commands_by_path[path])}
        assert "--original-length" in flags and "--train-length" not in flags, path


def _raised_strings(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """The string pieces inside every ``raise`` statement of a module (the messages it raises)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            for part in ast.walk(node.exc):
                if isinstance(part, ast.Constant) and isinstance(part.value, str):
                    yield part.lineno, part.value


def test_library_messages_name_python_arguments_not_flags() -> None:
    """docs/cli.md rule 6: outside ``ropekit.cli`` no raised message names a ropekit flag (the CLI maps the
    arguments to flags); a message may still quote a whole command (`ropekit extend --out x.gguf`)."""
    flags = {flag for _, command in ALL for option in options(command) for flag in option.opts if flag[:2] == "--"}
    source = Path(__file__).parents[2] / "src" / "ropekit"
    found = []
    for path in sorted(source.rglob("*.py")):
        if "cli" in path.relative_to(source).parts:
            continue
        for line, text in _raised_strings(ast.parse(path.read_text(), str(path))):
            named = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", text)) & flags
            if named and "ropekit " not in text:
                found.append(f"{path.relative_to(source)}:{line} {sorted(named)}")
    assert found == []


def test_the_cli_writes_library_arguments_as_its_flags() -> None:
    """The library's structured errors are written with the options of the arguments they carry and mention."""
    from ropekit._output import OutputExists
    from ropekit.cli.common import error_message
    from ropekit.errors import InvalidArgument, Placeholder

    names = {"out": "--out", "force": "--force", "rotary_dim": "--rotary-dim", "device_map": "--device-map"}
    names |= {"model": "--model", "window": "--window", "init": "--init"}
    assert error_message(OutputExists("/x"), names) == "--out '/x' exists; pass --force to replace it"
    assert error_message(InvalidArgument("rotary_dim", 7, "must be even"), names) == "--rotary-dim must be even, got 7"
    inside = InvalidArgument("out", "/a", message=lambda n: f"{n('out')} '/a' is inside the input {n('model', '/a/b')}")
    assert str(inside) == "out '/a' is inside the input model='/a/b'"
    assert error_message(inside, names) == "--out '/a' is inside the input --model '/a/b'"
    memory = InvalidArgument("length", 8, message=lambda n: f"out of memory; use {n('device_map', 'auto')}")
    assert error_message(memory, names) == "out of memory; use --device-map auto"  # no option sets length
    chunks = InvalidArgument("chunks", 3, message=lambda n: f"give {n('window', Placeholder('W'))}", leads=False)
    assert str(chunks) == "give window=W" and error_message(chunks, {"chunks": "--chunks", **names}) == (
        "--chunks: give --window W"
    )
    assert error_message(ValueError("rotary_dim must be even"), names) == "rotary_dim must be even"  # no argument


# ---------------------------------------------------------------------------------------------------------------
# Defaults from the dataclasses (train's pin is tests/cli/test_train_cmd.py::test_train_defaults_are_...)


def command_defaults(path: str) -> dict[str, Any]:
    command = dict(ALL)[path]
    return {option.name: option.default for option in options(command)}


def field_defaults(cls: type) -> dict[str, Any]:
    return {f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}


def test_finetune_defaults_are_the_dataclass_defaults() -> None:
    from ropekit.cli.common import parse_length
    from ropekit.finetune.request import FinetuneRequest
    from ropekit.finetune.settings import FinetuneSettings

    cli = command_defaults("finetune")
    shared = field_defaults(FinetuneSettings).keys() & cli.keys()
    assert {"steps", "lr", "batch_size", "grad_accum", "lora_rank", "seed", "chunks", "window"} <= shared
    for name in shared:
        assert cli[name] == field_defaults(FinetuneSettings)[name], name
    run = field_defaults(FinetuneRequest)
    assert cli["evaluate"] == run["evaluate"] and cli["passkey_trials"] == run["passkey_trials"]
    assert parse_length(cli["eval_tokens"], "--eval-tokens") == run["eval_tokens"]


@pytest.mark.parametrize("path", ["eval perplexity", "eval passkey", "report"])
def test_eval_defaults_are_the_dataclass_defaults(path: str) -> None:
    from ropekit.cli.common import parse_list
    from ropekit.eval.methods import default_methods
    from ropekit.eval.sweep import SweepSettings

    cli = command_defaults(path)
    fields = field_defaults(SweepSettings)
    assert tuple(cli["methods"].split(",")) == default_methods()
    assert cli["factor"] == fields["factor"]
    # each command's lengths option: (option parameter, SweepSettings field)
    lengths = {
        "eval perplexity": [("multiples", "multiples")],
        "eval passkey": [("multiples", "passkey_multiples")],
        "report": [("perplexity_multiples", "multiples"), ("passkey_multiples", "passkey_multiples")],
    }[path]
    for option, field in lengths:
        assert parse_list(cli[option], option) == fields[field], (option, field)
    for name in ("mode", "max_tokens", "trials", "seed"):
        if name in cli:
            assert cli[name] == fields[name], name
    if "depths" in cli:
        assert parse_list(cli["depths"], "--depths") == fields["depths"]
