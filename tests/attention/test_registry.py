"""The registry, parameter validation, the method-name grammar of the evaluations, and ``--attention-param`` on the
CLI."""

from __future__ import annotations

import pytest

from ropekit.attention import ATTENTIONS, SelfExtend, get_attention, list_attentions
from ropekit.attention.self_extend import extended_length, suggest
from ropekit.eval.methods import attention_for, check_params, scaling_for, split_method


def test_cli_lists_the_registry():
    from ropekit.cli.method_options import ATTENTION_NAMES

    assert sorted(ATTENTION_NAMES) == sorted(list_attentions()) == sorted(ATTENTIONS)


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("self_extend", {"group": 0, "window": 4}, "group must be an integer >= 1, got 0"),
        ("rerope", {"window": -3}, "window must be an integer >= 1, got -3"),
        ("leaky_rerope", {"window": 4, "k": 0.5}, "k must be >= 1.0, got 0.5"),
        ("dual_chunk", {"chunk_size": 8, "local_window": 0}, "local_window must be an integer >= 1"),
        ("sinks", {"n_sink": -1, "window": 8}, "n_sink must be an integer >= 0"),
        ("string", {"shift": 0, "local": 8}, "shift must be an integer >= 1, got 0"),
        ("string", {"shift": 8, "local": -1}, "local must be an integer >= 0, got -1"),
    ],
)
def test_bad_parameters_name_the_field(name, params, message):
    with pytest.raises(ValueError, match=message):
        get_attention(name)(**params)


def test_unknown_names_and_parameters():
    with pytest.raises(ValueError, match="unknown attention method 'chunky'; available: dual_chunk"):
        get_attention("chunky")
    with pytest.raises(ValueError, match=r"self_extend has no parameter\(s\) \['k'\]"):
        SelfExtend.from_options(train_length=64, length=256, k=2)
    with pytest.raises(TypeError, match="group must be an integer"):
        SelfExtend(group=2.5, window=4)


def test_self_extend_rule_of_thumb():
    """(L − w) · G + w >= target with the smallest G (the LongLM README's rule), w = L / 4 by default."""
    assert extended_length(4096, 4, 1024) == 3072 * 4 + 1024
    found = suggest(4096, 16384)
    assert found == {"group": 5, "window": 1024, "extended_length": 16384}
    assert suggest(4096, 4096)["group"] == 1
    for target in range(2, 3000, 37):
        g = suggest(256, target)["group"]
        assert extended_length(256, g, 64) >= target and (g == 1 or extended_length(256, g - 1, 64) < target)
    with pytest.raises(ValueError, match="window must be < train_length=256, got 256"):
        suggest(256, 1024, window=256)


@pytest.mark.parametrize("name", sorted(ATTENTIONS))
def test_defaults_keep_relative_positions_trained(name):
    """The derived parameters keep every relative position within the training length (Self-Extend: the authors'
    rule allows one more, ``L``, at the exact capacity; STRING cannot past ``2L − W``, see the next test)."""
    room = 256 if name == "self_extend" else 255
    lengths = (256, 300, 400) if name == "string" else (256, 1024, 1000, 4096)
    for train, length in ((256, n) for n in lengths):
        method = get_attention(name).from_options(train_length=train, length=length)
        assert method.max_relative(length) <= room, (train, length, method)


@pytest.mark.parametrize("length", [600, 1024, 4096])
def test_string_beyond_its_reach_balances_the_two_parts(length):
    """Past ``2L − W`` no shift keeps both parts trained (near: up to S − 1, far: up to n − 1 − S + W); the default
    makes the larger of the two as small as any shift can (checked against every shift)."""
    method = get_attention("string").from_options(train_length=256, length=length)
    best = min(type(method)(shift=s, local=method.local).max_relative(length) for s in range(1, length + 1))
    assert method.max_relative(length) == best > 255


def test_method_grammar():
    assert split_method("yarn+self_extend") == ("yarn", "self_extend")
    assert split_method("sinks") == ("none", "sinks")
    assert split_method("ntk") == ("ntk", None)
    for bad in ("self_extend+yarn", "yarn+ntk", "a+b+c", "chunky"):
        with pytest.raises(ValueError, match="unknown rope_type or attention method"):
            split_method(bad)
    assert scaling_for("self_extend", factor=4.0, train_length=64) is None
    assert scaling_for("linear+rerope", factor=4.0, train_length=64).factor == 4.0
    assert attention_for("yarn", train_length=64, length=256) is None
    assert attention_for("self_extend", train_length=64, length=256, params={"window": 8, "k": 3}) == SelfExtend(
        group=5, window=8
    )


def test_check_params():
    check_params(("self_extend", "rerope"), {"window": 16})
    with pytest.raises(ValueError, match=r"unknown params \['k'\]; allowed for self_extend"):
        check_params(("none", "self_extend"), {"k": 2})
    with pytest.raises(ValueError, match="no attention method listed"):
        check_params(("yarn",), {"window": 2})
    with pytest.raises(ValueError, match="window must be an integer >= 1, got 0"):
        check_params(("rerope",), {"window": 0})


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--methods", "self_extend", "--attention-param", "group"],
            "--attention-param items must look like name=value",
        ),
        (
            ["--methods", "self_extend", "--attention-param", "group=x"],
            "--attention-param group='x': the value must be a number",
        ),
        (["--methods", "self_extend", "--attention-param", "k=2"], "--attention-param: unknown params ['k']"),
        (["--methods", "rerope", "--attention-param", "window=0"], "window must be an integer >= 1, got 0"),
        (["--methods", "yarn+ntk"], "unknown rope_type 'yarn+ntk'"),
    ],
)
def test_cli_errors(args, message):
    from typer.testing import CliRunner

    from ropekit.cli.app import app

    result = CliRunner().invoke(app, ["eval", "perplexity", *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())


def test_plan_suggests_self_extend_by_the_rule():
    import json

    from typer.testing import CliRunner

    from ropekit.cli.app import app

    args = ["plan", "--head-dim", "64", "--original-length", "4k", "--target-length", "16k", "--no-robust", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = {row["method"]: row for row in json.loads(result.stdout)["attention_methods"]}
    assert set(rows) == set(list_attentions())
    assert rows["self_extend"]["params"] == {"group": 5, "window": 1024}  # (4096 − 1024) · 5 + 1024 = 16384
    assert rows["self_extend"]["eval"] == "--methods self_extend --attention-param group=5,window=1024"
    assert rows["rerope"]["max_relative_position"] == 2048
