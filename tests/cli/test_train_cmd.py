"""``ropekit train`` and ``ropekit experiment base-bound``: every setting is checked before any work, and what is given
reaches the run.

Oracles: the option each case types (it must appear in the one-line error), the file system (nothing created for a
refused command), a recorder standing in for training (never reached when refused), and the dataclasses' own
defaults.
"""

from __future__ import annotations

import pytest

from helpers.cli import assert_error, run, strict_json

# --- train is validated before any work ----------------------------------------------------------------------------


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
        ("--warmup-steps", "-1"),
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
        "--warmup-steps",
        "30",
        "--task-fraction",
        "0.6",
        "--task-weights",
        "vt=3,fwe=0.5",
        "--json",
    )
    settings, kwargs = seen[0]
    assert settings.task_weights == {"vt": 3.0, "fwe": 0.5}
    assert (settings.task_mix, settings.answer_weight, settings.warmup_steps, settings.task_fraction) == (
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


def test_train_and_experiment_out_that_is_a_file(tmp_path, no_training):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert_error(run("train", "--out", a_file), "--out", "not a folder")
    assert_error(run("experiment", "base-bound", "--out", a_file), "--out", "not a folder")
    assert no_training == []


def test_train_and_experiment_accept_lengths_with_suffixes(tmp_path, no_training):
    assert run("train", "--out", tmp_path / "a", "--train-length", "1k").exit_code == 0
    assert no_training[-1][0].train_length == 1024


# --- experiment base-bound -----------------------------------------------------------------------------------------


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
