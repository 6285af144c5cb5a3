"""Property-based fuzzing of every CLI command and option.

For each command the options are read from the click command itself (so a new option is fuzzed without editing
this file); each example types a random subset of them with values drawn from a mix of valid values and hostile
ones: random text, numbers (negative, zero, huge, NaN, inf), malformed lengths ('4k', '32x', '-4k', '1e400', ''),
bad paths, a missing value, an unknown option, a required option left out.

Invariants, for every example:
  * the exit code is 0 or 2;
  * nothing escapes as an exception (no traceback on stdout or stderr);
  * the example spends under ``CASE_CPU_SECONDS`` of this process's CPU time (see there: not wall time);
  * an error (exit 2) names an option or argument the user typed, or a required one they left out.

Expensive work never runs: training, the experiment, the evaluation sweep, the HTML report and the figures are
replaced by stand-ins (:mod:`helpers.cli_stand_ins`) that keep the library's argument checks (they call the same
validating constructors on tiny sizes), and the exact-bound computations are capped at a small length. What is
fuzzed is everything the CLI does before that work: parsing, validation, output-path checks, model loading errors.

The default run tries a few hundred examples (derandomized, so CI sees the same ones); ``-m slow`` runs many more
with fresh randomness. ``CASES`` counts what was tried per command (printed with ``-s``).
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections import Counter
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.core import TyperArgument, TyperOption
from typer.main import get_command
from typer.testing import CliRunner

import ropekit.kernels._cpu as cpu_kernel
from helpers.cli_stand_ins import install_stand_ins
from ropekit.cli.app import app

#: CPU seconds of this process per example. CPU time, not wall time: on a shared machine the wall time of the same
#: work grows with the load (several times over on 2 busy cores), its CPU time does not; torch runs on one thread
#: here (``sandbox``), so no thread spins on a busy core, and the C++ kernel is not built in the background (the
#: eager path gives the same numbers), so no compile competes with the examples. The bound catches a runaway (work
#: that grows with a fuzzed length takes minutes of CPU); an example that ends takes well under a second of it.
CASE_CPU_SECONDS = 30.0
#: commands whose real work needs a model that the fuzz never provides (their options are still parsed and checked
#: up to the model check): extend/finetune need a transformers model or GGUF file
NEEDS_A_REAL_MODEL = ("extend", "finetune")
CASES: Counter[str] = Counter()
#: the argv of the example running now (the stand-ins read it)
ARGV: list[str] = []
#: (command, exit code) -> count: how many examples ran to the end (0) and how many were refused (2)
OUTCOMES: Counter[tuple[str, int]] = Counter()

ROOT = get_command(app)


def leaf_commands(group=ROOT, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], object]]:
    found = []
    for name, command in sorted(group.commands.items()):
        if hasattr(command, "commands"):  # a group (typer vendors its own click classes)
            found += leaf_commands(command, (*prefix, name))
        else:
            found.append(((*prefix, name), command))
    return found


COMMANDS = dict(leaf_commands())

# --- values -------------------------------------------------------------------------------------------------------

TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12
)  # argv can hold neither NUL nor lone surrogates
HOSTILE = st.sampled_from(
    ["", " ", "-1", "0", "-0", "nan", "NaN", "inf", "-inf", "1e400", "-1e400", "1e-400", "9" * 40, "abc", "-", "--",
     "4k", "32x", "-4k", "4k5", "1.1k", "0x10", "1_000", ",", "1,,2", "none,", "None", "true", "+5", "½", "１２"]
)  # fmt: skip
SMALL_LENGTHS = st.sampled_from(["1", "2", "3", "7", "64", "100", "256", "512", "1k", "1.5k", "2k", "4k", " 4k "])
HUGE_LENGTHS = st.sampled_from(["2048M", "999999999999M", "1" * 310, "1073741825", "16M", "2M"])
INTS = st.one_of(
    st.integers(-5, 300), st.integers(10**9, 10**40), st.integers(-(10**40), -(10**9)), st.sampled_from([512, 1024])
).map(str)
FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.floats(min_value=-10, max_value=1e6).map(lambda x: f"{x:g}"),
    st.sampled_from(["1e308", "1e-320", "2", "4", "10000", "500000", "1.0000001"]),
)
PATHS = st.sampled_from(
    ["out", "out/sub", "missing/a/b", "/proc/1/nope", "/dev/null", "/etc/passwd", ".", "", "f.png", "f.svg",
     "f.jpg", "existing_file", "existing_dir", "existing_dir/f.png", "/nonexistent/x.png", "tiny", "ro_dir/x"]
)  # fmt: skip
#: values that make sense for particular options (by option name); everything also gets hostile values
KNOWN = {
    "methods": st.sampled_from(
        ["none", "none,yarn", "linear,ntk", "longrope", "base", "native", "yarn,bogus", "none,"]
    ),
    "scaling": st.sampled_from(
        ["none", "linear", "ntk", "yarn", "dynamic", "llama3", "longrope", "base", "proportional"]
    ),
    "mode": st.sampled_from(["nonoverlap", "sliding", "strided"]),
    "position": st.sampled_from(["rope", "sinusoidal", "none", "infini", "alibi"]),
    "memory_update": st.sampled_from(["linear", "delta", "other"]),
    "factor": st.one_of(st.sampled_from(["auto", "2", "4", "1", "0.5"]), FLOATS),
    "multiples": st.sampled_from(["1", "1,2", "0.5", "2", "0.001", "1,1000", "1,x"]),
    "perplexity_multiples": st.sampled_from(["1", "1,2", "0.5", "2", "0.001"]),
    "passkey_multiples": st.sampled_from(["1", "2", "2,3", "0.5"]),
    "depths": st.sampled_from(["0", "0.5", "0,1", "1.5", "-0.1", "0,0.25,0.5"]),
    "models": st.sampled_from(["10", "100,nope", "robust", "foo", "10,,nope"]),
    "device": st.sampled_from(["cpu", "cuda", "gpu", "cuda:0", "meta"]),
    "device_map": st.sampled_from(["auto", "cpu", "balanced"]),
    "init": st.sampled_from(["tiny", "none", "/nonexistent", "existing_dir"]),
    "model": st.sampled_from(["tiny", "/nonexistent", "existing_dir", "existing_file", ""]),
    "kind": st.sampled_from(["decay", "bound", "wavelengths", "scaling", "nonsense"]),
    "dtype": st.sampled_from(["auto", "float32", "bfloat16", "float64", "int8"]),
    "param": st.sampled_from(["beta_fast=16", "x", "=1", "factor=nan", "attention_factor=2"]),
}
LENGTH_OPTIONS = {
    "context", "train_length", "target_length", "original_length", "seq_len", "max_distance", "max_context",
    "robust_up_to", "fixed_seq_len", "eval_tokens",
}  # fmt: skip
SMALL_INTS = st.sampled_from(["1", "2", "4", "8", "16", "32", "64", "128"]).filter(bool)


#: values a careful user would type, per option name (the "mild" examples draw only from these)
MILD = {
    "methods": st.sampled_from(["none", "none,yarn", "linear,ntk", "yarn"]),
    "scaling": st.sampled_from(["none", "linear", "ntk", "yarn", "llama3"]),
    "mode": st.just("nonoverlap"),
    "position": st.sampled_from(["rope", "sinusoidal", "none"]),
    "memory_update": st.just("linear"),
    "factor": st.sampled_from(["2", "4"]),
    "multiples": st.sampled_from(["1", "1,2"]),
    "perplexity_multiples": st.sampled_from(["1", "1,2"]),
    "passkey_multiples": st.sampled_from(["1", "2"]),
    "depths": st.sampled_from(["0.5", "0,1"]),
    "models": st.sampled_from(["10", "100,nope"]),
    "device": st.just("cpu"),
    "init": st.just("tiny"),
    "model": st.just("tiny"),
    "kind": st.sampled_from(["decay", "bound", "wavelengths", "scaling"]),
    "dtype": st.sampled_from(["auto", "float32"]),
    "out": st.sampled_from(["out_mild", "runs_mild"]),
    "output": st.sampled_from(["f.png", "f.svg"]),
    "base": st.sampled_from(["10000", "500000", "2"]),
    "lr": st.sampled_from(["0.001", "1e-4"]),
    "task_fraction": st.sampled_from(["0", "0.5"]),
    "minutes": st.sampled_from(["1", "0.5"]),
    "head_dim": st.sampled_from(["32", "64", "128"]),
    "rotary_dim": st.sampled_from(["32", "64"]),
    "n_heads": st.sampled_from(["4", "2"]),
    "n_kv_heads": st.sampled_from(["2", "1"]),
    "d_model": st.sampled_from(["128", "64"]),
}


def values_for(param, *, mild: bool = False) -> st.SearchStrategy[str] | None:
    name = param.name or ""
    kind = getattr(param.type_descriptor, "annotation", None)
    if mild and name in MILD:
        return MILD[name]
    if mild and name in LENGTH_OPTIONS:
        return SMALL_LENGTHS
    if mild and kind is int:
        return SMALL_INTS
    if mild and kind is float:
        return st.sampled_from(["1", "2", "4", "0.5"])
    if mild:
        return None  # an option a careful user would leave out
    if name in KNOWN:
        typical = KNOWN[name]
    elif name in LENGTH_OPTIONS:
        typical = st.one_of(SMALL_LENGTHS, SMALL_LENGTHS, HUGE_LENGTHS)
    elif kind is Path or name in ("out", "output", "text", "factors"):
        typical = PATHS
    elif kind is int:
        typical = st.one_of(SMALL_INTS, INTS)
    elif kind is float:
        typical = FLOATS
    else:
        typical = TEXT
    return st.one_of(typical, typical, HOSTILE, TEXT)


def option_strings(param: TyperOption) -> list[str]:
    return [*param.opts, *param.secondary_opts]


@st.composite
def invocations(draw, path: tuple[str, ...]) -> list[str]:
    """argv for one example: options in random order, some hostile, maybe a missing value or an unknown option."""
    command = COMMANDS[path]
    mild = draw(st.integers(0, 2)) == 0  # a third of the examples: plausible values, so success paths run too
    argv: list[str] = []
    for param in command.params:
        if isinstance(param, TyperArgument):
            strategy = values_for(param, mild=mild)
            argv.insert(0, draw(values_for(param) if strategy is None else strategy))
            continue
        if not isinstance(param, TyperOption) or param.name in ("help", "version"):
            continue
        if mild and getattr(param, "hidden", False):
            continue  # old spellings kept for compatibility
        keep = param.required and draw(st.integers(0, 19)) > 0  # a required option, usually typed
        keep = keep or (mild and param.name == "out")
        if not (keep or draw(st.integers(0, 3)) == 0):
            continue
        spelling = draw(st.sampled_from(option_strings(param)))
        values = values_for(param, mild=mild)
        if param.is_flag:
            argv.append(spelling)
        elif mild and path == ("plot",) and param.name == "out":
            argv += [spelling, draw(st.sampled_from(["f.png", "f.svg", "g.png"]))]
        elif values is not None:
            argv += [spelling, draw(values)]
    tweak = 9 if mild else draw(st.integers(0, 9))
    if tweak == 0:
        argv.append("--no-such-option")
    elif tweak == 1 and argv and argv[-1].startswith("--"):
        argv.pop()  # an option with its value left out (or a flag dropped)
    elif tweak == 1:
        argv.append(draw(st.sampled_from([o for p in command.params if isinstance(p, TyperOption) for o in p.opts])))
    if path[0] in NEEDS_A_REAL_MODEL:  # never a real model: the fuzz must not fine-tune or convert one
        argv = [a if a != "tiny" else "/nonexistent" for a in argv]
    return argv


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    """A working folder with the files the fuzzed paths name, and the stand-ins installed."""
    root = tmp_path_factory.mktemp("fuzz")
    (root / "existing_file").write_text("x")
    (root / "existing_dir").mkdir()
    (root / "ro_dir").mkdir(mode=0o500)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.chdir(root)
        monkeypatch.setenv("COLUMNS", "200")
        monkeypatch.setenv("ROPEKIT_CPU_KERNEL", "0")
        monkeypatch.setattr(cpu_kernel, "_loaded", None)  # as ROPEKIT_CPU_KERNEL=0 leaves it on the first load
        monkeypatch.setattr(cpu_kernel, "_loaded_qk", None)
        install_stand_ins(monkeypatch, ARGV)
        yield root
    torch.set_num_threads(threads)
    if os.environ.get("PYTEST_XDIST_WORKER") is None and CASES:
        print(f"\nCLI fuzz: {sum(CASES.values())} cases: {dict(sorted(CASES.items()))}")
        print(f"CLI fuzz outcomes (command, exit code): {dict(sorted(OUTCOMES.items()))}")


# --- the invariants -----------------------------------------------------------------------------------------------


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def typed_names(argv: list[str], command) -> set[str]:
    """Every way the error may name what the user typed: option spellings (and their aliases), argument names,
    a required option left out, and any unknown option typed."""
    names = set()
    for param in command.params:
        if isinstance(param, TyperArgument):
            names |= {param.name, param.name.upper()}
            continue
        spellings = option_strings(param)
        if param.required or any(s in argv for s in spellings):
            names |= set(spellings)
    names |= {a for a in argv if re.fullmatch(r"--?[A-Za-z][\w-]*", a) and not _number(a)}
    return names


def check(path: tuple[str, ...], argv: list[str]) -> None:
    key = " ".join(path)
    CASES[key] += 1
    ARGV[:] = argv
    command = COMMANDS[path]
    started = time.process_time()
    result = CliRunner().invoke(app, [*path, *argv], env={"COLUMNS": "200"})
    seconds = time.process_time() - started
    shown = f"ropekit {key} {' '.join(map(repr, argv))}"
    OUTCOMES[key, result.exit_code] += 1
    assert seconds < CASE_CPU_SECONDS, f"{shown} took {seconds:.0f} s of CPU"
    assert result.exit_code in (0, 2), f"{shown} exited {result.exit_code}: {result.exception!r}\n{result.output}"
    assert result.exception is None or isinstance(result.exception, SystemExit), f"{shown}: {result.exception!r}"
    assert "Traceback" not in result.output, f"{shown}\n{result.output}"
    if result.exit_code == 2:
        message = " ".join(result.stderr.split())
        names = typed_names(argv, command)
        if not any(re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", message) for n in names):
            # "give one of --scaling, --base or --plan": an error about options left out names those
            names |= {s for p in command.params if isinstance(p, TyperOption) for s in option_strings(p)}
        assert any(re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", message) for n in names), (
            f"{shown}: the error names none of {sorted(names)}: {message}"
        )
    elif "--json" in argv and result.stdout.strip():
        json.loads(result.stdout, parse_constant=lambda c: (_ for _ in ()).throw(AssertionError(f"{shown}: {c}")))


FAST = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)
THOROUGH = settings(FAST, max_examples=300, derandomize=False)
#: per command, in the default run: more for the commands with more options
EXAMPLES = {"eval perplexity": 40, "eval passkey": 30, "report": 40, "train": 30, "experiment base-bound": 25}


@pytest.mark.parametrize("command", sorted(" ".join(p) for p in COMMANDS))
def test_fuzz_command(sandbox, command):
    path = tuple(command.split())

    @settings(FAST, max_examples=EXAMPLES.get(command, 20))
    @given(invocations(path))
    def run(argv):
        check(path, argv)

    run()


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(" ".join(p) for p in COMMANDS))
def test_fuzz_command_thoroughly(sandbox, command):
    path = tuple(command.split())

    @THOROUGH
    @given(invocations(path))
    def run(argv):
        check(path, argv)

    run()


def test_every_command_is_fuzzed():
    """A new command or option is picked up from the click tree; this pins that the tree is walked at all."""
    assert {"frequencies", "train", "report", "bound", "inspect", "plan", "plot"} <= {p[-1] for p in COMMANDS}
    assert ("eval", "perplexity") in COMMANDS and ("experiment", "base-bound") in COMMANDS
    assert not math.isnan(CASE_CPU_SECONDS)
