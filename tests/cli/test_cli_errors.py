"""CLI input errors common to every command: bad input is a one-line error naming the option the user typed (exit 2,
no traceback), found before any work; nothing is silently ignored, dropped or written where it should not be.

Oracles: the option each case types (it must appear in the error), the file system (what exists after a refused
command), strict JSON parsing and the registry's names. The train, experiment and evaluation commands' own errors
are in test_train_cmd.py and test_eval_errors.py; a broken model file in test_model_file_errors.py.
"""

from __future__ import annotations

import re

import pytest

from helpers.cli import assert_error, run, strict_json

# --- proportional RoPE in frequencies --json and inspect -----------------------------------------------------------


def test_frequencies_json_is_strict_for_pairs_that_do_not_rotate():
    result = run("frequencies", "--scaling", "proportional", "--rotary-dim", "64", "--json")
    assert result.exit_code == 0, result.output
    data = strict_json(result.stdout)
    assert len(data["inv_freq"]) == 64 and data["inv_freq"][32:] == [0.0] * 32
    assert data["wavelength"][32:] == [None] * 32 and all(w > 0 for w in data["wavelength"][:32])


def test_inspect_proportional_with_partial_rotary_is_a_clear_error():
    assert_error(
        run("inspect", "--scaling", "proportional", "--rotary-dim", "64", "--train-length", "4k"), "--rotary-dim"
    )


# --- output paths checked before any work --------------------------------------------------------------------------


def test_plot_output_paths(tmp_path):
    assert_error(run("plot", "decay", "-o", tmp_path / "missing" / "f.png"), "--out", "does not exist")
    folder = tmp_path / "f.png"
    folder.mkdir()
    assert_error(run("plot", "decay", "-o", folder), "--out", "is a folder")
    existing = tmp_path / "old.png"
    existing.write_bytes(b"mine")
    assert_error(run("plot", "decay", "-o", existing), "--out", "--force")
    assert existing.read_bytes() == b"mine"


@pytest.mark.parametrize(
    "args",
    [
        ["train", "--out", "/dev/null"],
        ["eval", "perplexity", "--out", "/dev/null"],
        ["experiment", "base-bound", "--out", "/dev/null"],
        ["extend", "--model", "/nonexistent", "--scaling", "linear", "--factor", "2", "--out", "/dev/null", "--force"],
    ],
)
def test_out_naming_a_device_is_refused(no_training, no_sweep, args):
    """Found by the slow fuzz: extend --out /dev/null --force ended in NotADirectoryError."""
    assert_error(run(*args), "--out", "/dev/null")


# --- plot bound range ----------------------------------------------------------------------------------------------


def test_plot_bound_below_its_first_length(tmp_path):
    assert_error(run("plot", "bound", "-o", tmp_path / "b.png", "--max-context", "512"), "--max-context", "1,024")


# --- --json everywhere ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        *[["frequencies"], ["train"], ["report"], ["bound"], ["inspect"], ["plan"], ["plot"]],
        *[["experiment", "base-bound"], ["eval", "perplexity"], ["eval", "passkey"]],
    ],
)
def test_every_command_has_a_json_flag_without_a_value(command):
    result = run(*command, "--help")
    assert result.exit_code == 0
    line = next(line for line in result.stdout.splitlines() if "--json" in line)
    assert "<bool>" not in line and "BOOLEAN" not in line, line
    flags = [line for line in result.stdout.splitlines() if "<bool>" in line and "--help" not in line]
    assert flags == [], flags  # no flag (--force, --quick, --robust, --resume) reads as if it took a value


# --- overflow and runaway inputs -----------------------------------------------------------------------------------


def test_huge_numbers_are_range_errors():
    digits = "1" * 310
    assert_error(
        run("frequencies", "--scaling", "yarn", "--factor", "2", "--original-length", digits), "--original-length"
    )
    assert_error(run("bound", "--target-length", "999999999999M"), "--target-length", "1,048,576")
    assert_error(run("bound", "--target-length", "4k", "--rotary-dim", "100000"), "--rotary-dim")


def test_factors_are_bounded():
    assert_error(run("frequencies", "--scaling", "linear", "--factor", "1e308", "--json"), "--factor")
    assert_error(run("inspect", "--train-length", "4k", "--factor", "inf"), "--factor")


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["bound", "--target-length", "1M", "--rotary-dim", "1024"], "--rotary-dim"),
        (["plan", "--head-dim", "4096", "--original-length", "4k", "--target-length", "1M"], "--head-dim"),
        (["plot", "bound", "-o", "b.png", "--max-context", "1M", "--rotary-dim", "256"], "--max-context"),
    ],
)
def test_bound_work_beyond_minutes_is_refused(args, option):
    """L × d decides the exact bound's cost; beyond 1M × 128 (seconds for (A)) it is a range error."""
    assert_error(run(*args), option, "134,217,728")


def test_robust_bound_is_off_by_default_above_d_128():
    """The robust bound's islands take minutes at d = 256 even for short contexts: only on request there."""
    data = strict_json(run("bound", "--target-length", "1k", "--rotary-dim", "256", "--json").stdout)
    assert data["robust_base"] is None and data["smallest_base"] > 1


# --- errors name the option typed ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["plot", "decay", "-o", "x.png", "--rotary-dim", "0"], "--rotary-dim"),
        (["plan", "--original-length", "1", "--target-length", "2"], "--target-length"),
        (["plan", "--original-length", "4k", "--target-length", "32x"], "--target-length"),
        (["plan", "--original-length", "8k", "--target-length", "4k"], "--target-length"),
        (["bound", "--target-length", "1k", "--rotary-dim", "7"], "--rotary-dim"),
        (["inspect", "--head-dim", "15", "--train-length", "1k"], "--head-dim"),
    ],
)
def test_errors_name_the_option_typed(args, option):
    assert_error(run(*args), option)


def test_plan_shows_the_base_as_given():
    result = run("plan", "--original-length", "4k", "--target-length", "8k", "--base", "1.0000001", "--no-robust")
    assert result.exit_code == 0, result.output
    assert "Base 1.0000001 is below" in " ".join(result.stdout.split())


# --- options that would be ignored are refused ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["frequencies", "--factor", "4"], "--factor"),
        (["inspect", "--train-length", "4k", "--original-length", "2k"], "--original-length"),
        (["eval", "perplexity", "--stride", "64"], "--stride"),
        (["eval", "perplexity", "--device-map", "auto"], "--device-map"),
    ],
)
def test_ignored_options_are_refused(no_sweep, args, option):
    assert_error(run(*args), option)


# --- empty lists and empty items -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["eval", "perplexity", "--multiples", ""], "--multiples"),
        (["eval", "passkey", "--depths", ""], "--depths"),
        (["eval", "perplexity", "--multiples", "1,,2"], "--multiples"),
        (["eval", "perplexity", "--methods", "none,"], "--methods"),
        (["eval", "perplexity", "--methods", ""], "--methods"),
        (["report", "--passkey-multiples", "2,"], "--passkey-multiples"),
        (["experiment", "base-bound", "--models", "10,,nope"], "--models"),
    ],
)
def test_empty_lists_and_items_are_errors(no_sweep, no_training, args, option):
    assert_error(run(*args), option)


def test_methods_error_lists_every_valid_name_including_none(no_sweep):
    from ropekit.scaling import list_scalings

    line = assert_error(run("eval", "perplexity", "--methods", "rotary-magic"), "--methods", "'rotary-magic'")
    for name in ("none", "native", *list_scalings()):
        assert name in line, name


@pytest.mark.parametrize("text", ["-4k", "4x", "", "1e400", "32x", "1.1k"])
def test_bad_lengths_are_one_line_errors_naming_the_option(text):
    assert_error(run("bound", "--target-length", text), "--target-length")


# --- consistent names ----------------------------------------------------------------------------------------------


def test_version():
    from ropekit import __version__

    result = run("--version")
    assert result.exit_code == 0 and result.stdout.strip() == f"ropekit {__version__}"


def test_methods_help_lists_the_registry():
    from ropekit.cli.method_options import DEFAULT_METHODS, METHOD_NAMES, SPECIAL_METHODS
    from ropekit.eval.methods import default_methods
    from ropekit.scaling import list_scalings

    assert set(METHOD_NAMES) <= {*SPECIAL_METHODS, *list_scalings()}
    assert ",".join(default_methods()) == DEFAULT_METHODS
    help_text = " ".join(run("eval", "perplexity", "--help").stdout.split())
    for name in METHOD_NAMES:
        assert name in help_text, name


@pytest.mark.parametrize(
    "command",
    [
        ["train"],
        ["report"],
        ["plot", "decay"],
        ["experiment", "base-bound"],
        ["eval", "perplexity"],
        ["eval", "passkey"],
    ],
)
def test_out_with_o_everywhere(command):
    lines = run(*command, "--help").stdout.splitlines()
    assert any(re.search(r"(?<![\w-])--out(?![\w-]).*(?<![\w-])-o(?![\w-])", line) for line in lines), lines


def test_old_spellings_are_gone(tmp_path, no_training):
    """no hidden aliases (an unreleased 0.1.0 keeps no old spellings)."""
    assert run("train", "--out", tmp_path / "a", "--rope-base", "500").exit_code == 2
    assert run("report", "--multiples", "1,2").exit_code == 2
    assert no_training == []
