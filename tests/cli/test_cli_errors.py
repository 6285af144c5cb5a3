"""CLI input errors, one test each: bad input is a one-line error naming the option the user typed (exit 2,
no traceback), found before any work; nothing is silently ignored, dropped or written where it should not be.

Oracles: the option each case types (it must appear in the error), the file system (what exists after a refused
command), strict JSON parsing, the registry's names, the dataclasses' own defaults, and monkeypatched stand-ins
for the expensive work that record whether it was reached.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ropekit.cli.app import app

runner = CliRunner()


def run(*args: str, **kwargs):
    return runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "200"}, **kwargs)


def assert_error(result, *fragments: str) -> str:
    """Exit 2, no traceback, one ``error:`` line on stderr holding every fragment; returns that line."""
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.stderr  # one line: a progress bar or a cost estimate may come before it
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def strict_json(text: str):
    def refuse(constant: str):
        raise AssertionError(f"non-standard JSON constant {constant}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture
def no_training(monkeypatch):
    """Replace training with a recorder: these tests check what happens before any work."""
    import ropekit.model.train as train_module

    calls = []

    def fake_train(config, settings, out, **kwargs):
        calls.append((config, settings, Path(out)))
        return {"steps": settings.steps, "tokens": 0, "wall_time_s": 0.0, "parameters": 1, "heldout_bpb": 8.0}

    monkeypatch.setattr(train_module, "train", fake_train)
    return calls


@pytest.fixture
def no_sweep(monkeypatch):
    """Make any sweep an error: a command refused up front never reaches it."""
    import ropekit.eval.sweep as sweep

    def refuse(*args, **kwargs):
        raise AssertionError("the sweep ran before the options were checked")

    monkeypatch.setattr(sweep, "run_sweep", refuse)


# --- train is validated before any work --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--steps", "0"),
        ("--steps", "-1"),
        ("--minutes", "-1"),
        ("--minutes", "nan"),
        ("--minutes", "0"),
        ("--lr", "0"),
        ("--lr", "inf"),
        ("--task-fraction", "2"),
        ("--task-fraction", "nan"),
        ("--batch-size", "0"),
        ("--seed", "-1"),
        ("--train-length", "0"),
        ("--base", "1"),
        ("--warmup", "-1"),
        ("--task-mix", "ruler"),
        ("--answer-weight", "0"),
        ("--task-weights", "vt=2"),  # the default --task-mix passkey has no tasks to weigh
    ],
)
def test_train_rejects_bad_settings_before_training(tmp_path, no_training, option, value):
    out = tmp_path / "run"
    assert_error(run("train", "--out", out, option, value), option)
    assert no_training == [] and not out.exists()


@pytest.mark.parametrize(
    ("value", "message"),
    [("nope=2", "unknown task 'nope'"), ("vt=-1", ">= 0"), ("vt", "name=value"), ("vt=many", "number")],
)
def test_train_rejects_bad_task_weights(tmp_path, no_training, value, message):
    out = tmp_path / "run"
    result = run("train", "--out", out, "--task-mix", "suite", "--task-weights", value)
    assert_error(result, "--task-weights", message)
    assert no_training == [] and not out.exists()


@pytest.mark.parametrize(("init", "message"), [("missing-checkpoint", "no checkpoint"), ("tiny", "different shape")])
def test_train_init_is_checked_before_anything_is_written(tmp_path, init, message):
    """A missing or mis-shaped --init is an error naming --init, and --out is not created."""
    out = tmp_path / "run"
    result = run("train", "--out", out, "--init", str(tmp_path / init) if init != "tiny" else init, "--d-model", "64")
    assert_error(result, "--init", message)
    assert not out.exists()


def test_train_passes_init_and_the_task_settings(monkeypatch, tmp_path):
    import ropekit.model.train as train_module

    seen = []
    monkeypatch.setattr(train_module, "train", lambda config, settings, out, **kw: seen.append((settings, kw)) or {})
    run(
        "train",
        "--out",
        tmp_path / "run",
        "--init",
        "tiny",
        "--task-mix",
        "suite",
        "--answer-weight",
        "10",
        "--warmup",
        "30",
        "--task-fraction",
        "0.6",
        "--task-weights",
        "vt=3,fwe=0.5",
        "--json",
    )
    settings, kwargs = seen[0]
    assert settings.task_weights == {"vt": 3.0, "fwe": 0.5}
    assert (settings.task_mix, settings.answer_weight, settings.warmup, settings.task_fraction) == (
        "suite",
        10.0,
        30,
        0.6,
    )
    assert kwargs["init"] == "tiny"


def test_train_defaults_are_the_dataclasses_defaults(no_training, tmp_path):
    from ropekit.model.tiny import TinyConfig
    from ropekit.model.train import TrainConfig

    result = run("train", "--out", tmp_path / "run", "--json")
    assert result.exit_code == 0, result.output
    config, settings, _ = no_training[0]
    assert settings == TrainConfig()
    expected = TinyConfig()
    for name in ("d_model", "n_layers", "n_heads", "n_kv_heads", "ffn_dim", "train_length", "position", "rope_base"):
        assert getattr(config, name) == getattr(expected, name), name
    assert strict_json(result.stdout)["steps"] == TrainConfig().steps


# --- proportional RoPE in frequencies --json and inspect ---------------------------------------------------


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


# --- output paths checked before any work ------------------------------------------------------------------


def test_plot_output_paths(tmp_path):
    assert_error(run("plot", "decay", "-o", tmp_path / "missing" / "f.png"), "--out", "does not exist")
    folder = tmp_path / "f.png"
    folder.mkdir()
    assert_error(run("plot", "decay", "-o", folder), "--out", "is a folder")
    existing = tmp_path / "old.png"
    existing.write_bytes(b"mine")
    assert_error(run("plot", "decay", "-o", existing), "--out", "--force")
    assert existing.read_bytes() == b"mine"


@pytest.mark.parametrize("command", [["eval", "perplexity"], ["eval", "passkey"], ["report"]])
def test_eval_and_report_out_checked_before_loading(tmp_path, no_sweep, command):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert_error(run(*command, "--out", a_file), "--out", "not a folder")
    deep = tmp_path / "missing" / "a" / "b"
    assert_error(run(*command, "--out", deep), "--out", "does not exist")
    assert not (tmp_path / "missing").exists()


def test_eval_refuses_to_overwrite_results(tmp_path, no_sweep):
    (tmp_path / "results.json").write_text("{}")
    assert_error(run("eval", "perplexity", "--out", tmp_path), "--out", "--force")
    assert (tmp_path / "results.json").read_text() == "{}"


def test_train_and_experiment_out_that_is_a_file(tmp_path, no_training):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert_error(run("train", "--out", a_file), "--out", "not a folder")
    assert_error(run("experiment", "base-bound", "--out", a_file), "--out", "not a folder")
    assert no_training == []


# --- plot bound range --------------------------------------------------------------------------------------------------------


def test_plot_bound_below_its_first_length(tmp_path):
    assert_error(run("plot", "bound", "-o", tmp_path / "b.png", "--max-context", "512"), "--max-context", "1,024")


# --- experiment base-bound ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "value"), [("--context", "0"), ("--context", "-5"), ("--seed", "-1"), ("--device", "gpu")]
)
def test_experiment_checks_before_creating_out(tmp_path, no_training, option, value):
    out = tmp_path / "exp"
    assert_error(run("experiment", "base-bound", "--out", out, option, value), option)
    assert not out.exists() and no_training == []


def test_experiment_accepts_a_length_with_suffix(tmp_path, monkeypatch):
    import ropekit.experiments.base_bound as experiment

    seen = []

    def fake_run(settings, out, **kwargs):
        seen.append(settings)
        return {"models": [], "conclusion": ["stub"]}

    monkeypatch.setattr(experiment, "run_experiment", fake_run)
    result = run("experiment", "base-bound", "-o", tmp_path / "exp", "--context", "1k", "--json")
    assert result.exit_code == 0, result.output
    assert seen[0].context == 1024 and strict_json(result.stdout) == {"models": [], "conclusion": ["stub"]}


# --- skipped methods are reported -------------------------------------------------------------------------


def test_eval_with_only_methods_the_model_cannot_run(no_sweep):
    line = assert_error(run("eval", "passkey", "--methods", "longrope,base", "--multiples", "2"), "--methods")
    assert "longrope" in line and "base" in line


def test_tables_report_skipped_methods(capsys):
    from ropekit.cli.eval_show import print_tables
    from ropekit.eval.sweep import SweepResult

    print_tables(SweepResult({}, skipped=[{"method": "longrope", "reason": "needs searched factors"}]))
    assert "skipped longrope: needs searched factors" in capsys.readouterr().out


# --- --json everywhere ------------------------------------------------------------------------------------


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


# --- overflow and runaway inputs --------------------------------------------------------------------------


def test_huge_numbers_are_range_errors():
    digits = "1" * 310
    assert_error(
        run("frequencies", "--scaling", "yarn", "--factor", "2", "--original-length", digits), "--original-length"
    )
    assert_error(run("bound", "--context", "999999999999M"), "--context", "1,048,576")
    assert_error(run("bound", "--context", "4k", "--rotary-dim", "100000"), "--rotary-dim")


# --- errors name the option typed -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["plot", "decay", "-o", "x.png", "--rotary-dim", "0"], "--rotary-dim"),
        (["plan", "--original-length", "1", "--target-length", "2"], "--target-length"),
        (["plan", "--original-length", "4k", "--target-length", "32x"], "--target-length"),
        (["plan", "--original-length", "8k", "--target-length", "4k"], "--target-length"),
        (["bound", "--context", "1k", "--rotary-dim", "7"], "--rotary-dim"),
        (["inspect", "--head-dim", "15", "--train-length", "1k"], "--head-dim"),
    ],
)
def test_errors_name_the_option_typed(args, option):
    assert_error(run(*args), option)


def test_a_multiple_that_rounds_to_nothing_names_multiples(no_sweep):
    assert_error(run("eval", "perplexity", "--multiples", "0.001"), "--multiples")


# --- options that would be ignored are refused ------------------------------------------------------------


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


# --- items 19 and 28: empty lists and empty items ------------------------------------------------------------------


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
    assert_error(run("bound", "--context", text), "--context")


# --- lengths checked up front; partial results kept -------------------------------------------------------


def test_an_over_long_multiple_is_found_before_the_sweep(no_sweep):
    line = assert_error(run("eval", "perplexity", "--methods", "none", "--multiples", "1,1000"), "--multiples")
    assert "1000" in line and "evaluation text" in line


def test_a_late_failure_keeps_the_methods_measured(tmp_path, monkeypatch):
    import ropekit.eval.sweep as sweep

    def fake_sweep(model, settings, **kwargs):
        (method,) = settings.methods
        if method == "yarn":
            raise MemoryError("out of memory at sequence length 512")
        row = {"method": method, "length": 256, "perplexity": 5.0, "beyond": None}
        return sweep.SweepResult({"model": {}}, perplexity=[row])

    monkeypatch.setattr(sweep, "run_sweep", fake_sweep)
    out = tmp_path / "out"
    result = run("eval", "perplexity", "--methods", "none,linear,yarn", "--multiples", "1", "--out", out)
    assert_error(result, "--methods yarn", "out of memory", "results.json")
    kept = json.loads((out / "results.json").read_text())
    assert [r["method"] for r in kept["perplexity"]] == ["none", "linear"] and kept["context"]["partial"] is True


# --- consistent names -------------------------------------------------------------------------------------


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


def test_train_and_experiment_accept_lengths_with_suffixes(tmp_path, no_training):
    assert run("train", "--out", tmp_path / "a", "--train-length", "1k").exit_code == 0
    assert no_training[-1][0].train_length == 1024


# --- eval perplexity shows the split it promises ----------------------------------------------------------


def test_perplexity_tables_show_the_tokens_beyond_the_training_length(capsys):
    from ropekit.cli.eval_show import print_tables
    from ropekit.eval.sweep import SweepResult

    rows = [
        {"method": "none", "length": 256, "perplexity": 5.0, "inside": 5.0, "beyond": None},
        {"method": "none", "length": 512, "perplexity": 9.0, "inside": 5.5, "beyond": 17.25},
    ]
    print_tables(SweepResult({}, perplexity=rows))
    out = capsys.readouterr().out
    assert "beyond the training length" in " ".join(out.split()) and "17.2" in out


# --- items 26 and 27 -----------------------------------------------------------------------------------------------


def test_factors_are_bounded():
    assert_error(run("frequencies", "--scaling", "linear", "--factor", "1e308", "--json"), "--factor")
    assert_error(run("inspect", "--train-length", "4k", "--factor", "inf"), "--factor")


def test_plan_shows_the_base_as_given():
    result = run("plan", "--original-length", "4k", "--target-length", "8k", "--base", "1.0000001", "--no-robust")
    assert result.exit_code == 0, result.output
    assert "Base 1.0000001 is below" in " ".join(result.stdout.split())


def test_settings_are_dataclasses_built_by_keyword():
    from ropekit.cli.eval_options import build_settings

    settings = build_settings(methods="none,yarn", multiples="1,2", factor="auto")
    assert dataclasses.asdict(settings)["methods"] == ("none", "yarn") and settings.multiples == (1.0, 2.0)


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


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["bound", "--context", "1M", "--rotary-dim", "1024"], "--rotary-dim"),
        (["plan", "--head-dim", "4096", "--original-length", "4k", "--target-length", "1M"], "--head-dim"),
        (["plot", "bound", "-o", "b.png", "--max-context", "1M", "--rotary-dim", "256"], "--max-context"),
    ],
)
def test_bound_work_beyond_minutes_is_refused(args, option):
    """L × d decides the exact bound's cost; beyond 1M × 128 (seconds for (A)) it is a range error."""
    assert_error(run(*args), option, "134,217,728")


def test_robust_bound_is_off_by_default_above_d_128():
    """The robust bound's islands take minutes at d = 256 even for short contexts: only on request there."""
    data = strict_json(run("bound", "--context", "1k", "--rotary-dim", "256", "--json").stdout)
    assert data["robust_base"] is None and data["smallest_base"] > 1


# --- a broken model file is a one-line error naming --model, for extend, finetune and eval ---

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
