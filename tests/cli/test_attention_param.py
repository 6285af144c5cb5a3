"""``--param`` sets scaling fields on every command; ``--attention-param`` the attention methods' parameters."""

from __future__ import annotations

import pytest

from helpers.cli import assert_error, run

COMMANDS = [("eval", "perplexity"), ("eval", "passkey"), ("eval", "tasks"), ("report",)]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_an_attention_parameter_as_param_is_refused_pointing_to_attention_param(command):
    result = run(*command, "--methods", "self_extend", "--param", "window=2048")
    line = assert_error(result)
    assert line == (
        "error: --param window=2048: window is a parameter of the attention method self_extend; "
        "pass --attention-param window=2048"
    )


def test_the_refusal_names_a_listed_method_that_has_the_parameter():
    line = assert_error(run("eval", "passkey", "--methods", "none,rerope", "--param", "window=64"))
    assert "attention method rerope; pass --attention-param window=64" in line


def test_factors_is_a_scaling_field_on_param_not_attention_param():
    line = assert_error(run("eval", "tasks", "--methods", "searched", "--attention-param", "factors=x.json"))
    assert line == (
        "error: --attention-param factors=x.json: factors is a field of the scaling method searched; "
        "pass --param factors=x.json"
    )
    line = assert_error(run("eval", "tasks", "--methods", "yarn", "--param", "factors=x.json"))
    assert "--param factors=x.json" in line and "add it to --methods" in line
    missing = assert_error(run("eval", "tasks", "--methods", "searched"))
    assert missing.startswith("error: --param: ") and "factors=DIR/search.json" in missing


def test_param_names_no_other_field_in_an_evaluation():
    line = assert_error(run("eval", "perplexity", "--methods", "yarn", "--param", "beta_fast=3"))
    assert line.startswith("error: --param beta_fast=3: ") and "factors=DIR/search.json" in line


def test_attention_param_reaches_the_settings():
    from ropekit.cli.eval_options import build_settings

    settings = build_settings(methods="none,yarn+self_extend", attention="group=4,window=64")
    assert settings.params == {"group": 4, "window": 64}
    line = assert_error(run("eval", "passkey", "--methods", "self_extend", "--attention-param", "k=2"))
    assert line.startswith("error: --attention-param: unknown params ['k']")


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_shows_both_options(command):
    text = " ".join(run(*command, "--help").output.split())
    assert "--param" in text and "--attention-param" in text
    assert "factors=DIR/search.json" in text and "group=4,window=64" in text
