"""The one ``--param`` grammar and the structured argument errors the CLI names options from."""

from __future__ import annotations

import pytest
import typer

from ropekit._validate import parse_number, parse_value, require_float, require_int
from ropekit.attention.registry import AttentionConfig
from ropekit.cli.common import error_message
from ropekit.cli.flags import FLAGS, flag_of
from ropekit.cli.params import parse_params, split_params
from ropekit.errors import ArgumentType, InvalidArgument, UnknownParameters
from ropekit.scaling import get_scaling


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        ("group=4,window=64", {"group": "4", "window": "64"}),
        (["short_factor=1,1.5"], {"short_factor": "1,1.5"}),
        (["a=1,2,b=3", "c=x"], {"a": "1,2", "b": "3", "c": "x"}),
        (["beta_fast=16", "beta_slow=2"], {"beta_fast": "16", "beta_slow": "2"}),
        (None, {}),
    ],
)
def test_one_grammar_for_both_spellings(items, expected):
    assert split_params(items) == expected


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ("group", "--param items must look like name=value, got 'group'"),
        ("group=", "--param items must look like name=value, got 'group='"),
        (["a=1", "a=2"], "--param gives 'a' twice"),
        ("1=2", "--param items must look like name=value"),
    ],
)
def test_malformed_items_are_one_line_errors(items, message, capsys):
    with pytest.raises(typer.Exit) as caught:
        split_params(items)
    assert caught.value.exit_code == 2
    assert message in " ".join(capsys.readouterr().err.split())


def test_each_method_reads_its_own_values():
    yarn = get_scaling("yarn").config_class
    assert parse_params(["short_factor=1,1.5", "ramp=paper", "beta_fast=16"], yarn.parse_param) == {
        "short_factor": (1.0, 1.5),
        "ramp": "paper",
        "beta_fast": 16,
    }
    assert parse_params("group=4,k=2.5", AttentionConfig.parse_param) == {"group": 4, "k": 2.5}


def test_a_value_a_method_refuses_names_the_parameter(capsys):
    with pytest.raises(typer.Exit):
        parse_params("group=x", AttentionConfig.parse_param)
    assert "--param group='x': the value must be a number" in capsys.readouterr().err


def test_value_readers_against_python():
    assert parse_value("x", "1,2.5") == (1.0, 2.5)
    assert parse_value("x", "TRUE") is True and parse_value("x", "-3") == -3 and parse_value("x", "1e3") == 1000.0
    assert parse_number("x", "7") == 7 and isinstance(parse_number("x", "7.0"), float)
    with pytest.raises(InvalidArgument, match="x has an empty item"):
        parse_value("x", "1,,2")
    with pytest.raises(InvalidArgument, match="x must hold finite numbers"):
        parse_value("x", "1,inf")


def test_checks_carry_the_argument_and_keep_their_messages():
    with pytest.raises(InvalidArgument) as caught:
        require_int("window", 0, minimum=1)
    assert (caught.value.argument, caught.value.value, str(caught.value)) == (
        "window",
        0,
        "window must be an integer >= 1, got 0",
    )
    with pytest.raises(TypeError) as caught:  # still a TypeError for callers that catch one
        require_float("base", "x")
    assert isinstance(caught.value, ArgumentType) and caught.value.argument == "base"


def test_the_option_comes_from_the_argument_not_the_wording():
    reworded = InvalidArgument("rotary_dim", 7, message="an odd rotary_dim cannot rotate in pairs: 7")
    assert flag_of(reworded) == "--rotary-dim"
    assert error_message(reworded, FLAGS) == "--rotary-dim: an odd rotary_dim cannot rotate in pairs: 7"
    assert error_message(InvalidArgument("rotary_dim", 7, "must be even"), FLAGS) == "--rotary-dim must be even, got 7"
    unknown = UnknownParameters(["beta_fst"], ["beta_fast"], "no beta_fst here")
    assert (unknown.argument, unknown.value, unknown.allowed, flag_of(unknown)) == (
        "params",
        ["beta_fst"],
        ["beta_fast"],
        "--param",
    )
    assert flag_of(ValueError("rotary_dim must be even")) is None  # no argument carried: no option guessed


def test_unknown_scaling_parameter_is_structured():
    with pytest.raises(UnknownParameters) as caught:
        get_scaling("yarn").config_class.from_params({"beta_fst": 1.0})
    assert caught.value.value == ["beta_fst"] and "beta_fast" in caught.value.allowed


def test_existing_output_is_described_with_the_options_not_rewritten():
    from ropekit._output import OutputExists

    error = OutputExists("/x", ["a.json", "b.csv"])
    assert "pass force=True to replace them" in str(error)  # the library's own names
    assert error_message(error, {"out": "--out", "force": "--force"}) == (
        "--out '/x' already holds a.json, b.csv; pass --force to replace them (the other files there are left alone)"
    )


def test_a_method_reads_its_own_fields_its_own_way():
    """Dynamic NTK and LongRoPE read fixed_seq_len as a length (k = 1024); YaRN has no such field to read."""
    for name in ("dynamic", "longrope"):
        method = get_scaling(name).config_class
        assert parse_params(["fixed_seq_len=32k", "factor=2"], method.parse_param) == {
            "fixed_seq_len": 32768,
            "factor": 2,
        }
    assert parse_params(["fixed_seq_len=1M"], get_scaling("dynamic").config_class.parse_param) == {
        "fixed_seq_len": 1 << 20
    }
