"""``ropekit eval perplexity|passkey`` and ``report``: options, lengths and output folders checked before the sweep,
methods the model cannot run reported, and the methods measured kept when a later one fails.

Oracles: the option each case types (it must appear in the one-line error), the file system, a stand-in sweep that
fails if reached, and the tables printed for known rows.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from helpers.cli import assert_error, run

# --- output folders checked before loading -------------------------------------------------------------------------


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


# --- skipped methods are reported ----------------------------------------------------------------------------------


def test_eval_with_only_methods_the_model_cannot_run(no_sweep):
    line = assert_error(run("eval", "passkey", "--methods", "longrope,base", "--multiples", "2"), "--methods")
    assert "longrope" in line and "base" in line


def test_tables_report_skipped_methods(capsys):
    from ropekit.cli.eval_show import print_tables
    from ropekit.eval.sweep import SweepResult

    print_tables(SweepResult({}, skipped=[{"method": "longrope", "reason": "needs searched factors"}]))
    assert "skipped longrope: needs searched factors" in capsys.readouterr().out


# --- lengths checked up front; partial results kept ----------------------------------------------------------------


def test_a_multiple_that_rounds_to_nothing_names_multiples(no_sweep):
    assert_error(run("eval", "perplexity", "--multiples", "0.001"), "--multiples")


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


# --- eval perplexity shows the split it promises -------------------------------------------------------------------


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


def test_settings_are_dataclasses_built_by_keyword():
    from ropekit.cli.eval_options import build_settings

    settings = build_settings(methods="none,yarn", multiples="1,2", factor="auto")
    assert dataclasses.asdict(settings)["methods"] == ("none", "yarn") and settings.multiples == (1.0, 2.0)
