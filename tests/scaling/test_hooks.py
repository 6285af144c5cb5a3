"""The registry is the only place that knows a method: every caller (CLI, transformers dicts, evaluation, plan, the
module) reaches a method through its config class's hooks.

Oracles: a toy method registered by one class and one function (``toy_method`` in ``tests/conftest.py``, its
frequencies in closed form) must appear everywhere — every command, the transformers round trip, ``extend``, the
evaluation and the plan — with no other file changed; the built-in methods built from user-facing options equal the same configs written out by
hand; the length rules equal transformers' rules written out as tables.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
from typer.testing import CliRunner

from ropekit import RopeConfig, frequencies, from_hf_config
from ropekit.cli.app import app
from ropekit.eval.methods import scaling_for
from ropekit.hf_format import to_hf_dict
from ropekit.scaling import (
    BaseChange,
    DynamicScaling,
    LinearScaling,
    Llama3Scaling,
    LongRopeScaling,
    NTKScaling,
    ProportionalScaling,
    ScalingConfig,
    YarnScaling,
    inv_freq,
    registry,
)
from ropekit.scaling.registry import MissingParameters
from ropekit.theory import plan

runner = CliRunner()


@pytest.fixture
def toy(toy_method: type) -> type:
    """The toy method of ``tests/conftest.py`` (``toy_method``): registered by one class and one function only."""
    return toy_method


def test_toy_method_is_in_the_cli_choices_and_runs_from_the_cli(toy: type, toy_oracle) -> None:
    result = runner.invoke(app, ["frequencies", "--scaling", "no-such-method"])
    assert result.exit_code == 2 and "toy-slow-half" in result.output
    args = ["frequencies", "--head-dim", "16", "--base", "500", "--scaling", "toy-slow-half", "--factor", "4"]
    result = runner.invoke(app, [*args, "--original-length", "1k", "--json"])
    assert result.exit_code == 0, result.output
    np.testing.assert_allclose(json.loads(result.output)["inv_freq"], toy_oracle(16, 500.0, 4.0), rtol=1e-15)
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "--scaling toy-slow-half needs --original-length" in result.output


def test_toy_method_round_trips_through_transformers_dicts(toy: type) -> None:
    rope = RopeConfig(64, base=1e4, scaling=toy(factor=4.0, original_max_position_embeddings=1024))
    exported = to_hf_dict(rope)
    assert exported == {
        "rope_type": "toy-slow-half",
        "rope_theta": 1e4,
        "factor": 4.0,
        "original_max_position_embeddings": 1024,
    }
    assert from_hf_config({"head_dim": 64, "rope_parameters": exported}) == rope
    with pytest.raises(ValueError, match=r"missing required key.*'factor'"):
        from_hf_config({"head_dim": 64, "rope_parameters": {"rope_type": "toy-slow-half", "factor": None}})


def test_toy_method_is_in_the_plan_and_the_evaluation(toy: type, toy_oracle) -> None:
    result = plan(64, 1e4, 1024, 4096, robust=False)
    assert [m.name for m in result.methods] == ["linear", "ntk", "yarn", "llama3", "toy-slow-half"]
    toy_plan = result.method("toy-slow-half")
    np.testing.assert_allclose(toy_plan.ratio, toy_oracle(64, 1e4, 4.0) / inv_freq(64, 1e4), rtol=1e-14)
    assert toy_plan.kept == list(range(16)) and toy_plan.interpolated == list(range(16, 32))
    assert toy_plan.blended == [] and "0–15 kept, 16–31 divided by s" in toy_plan.summary
    assert toy.plan_why in result.why
    assert scaling_for("toy-slow-half", factor=4.0, train_length=256) == toy(
        factor=4.0, original_max_position_embeddings=256
    )


def test_toy_method_is_in_inspect(toy: type, toy_oracle) -> None:
    """``inspect --scaling toy-slow-half`` and ``inspect --factor`` alone (the plan's methods, the toy's included)."""
    args = ["inspect", "--head-dim", "16", "--base", "500", "--train-length", "1k", "--factor", "4", "--json"]
    for extra in (["--scaling", "toy-slow-half"], []):
        result = runner.invoke(app, [*args, *extra])
        assert result.exit_code == 0, result.output
        ratio = json.loads(result.output)["methods"]["toy-slow-half"]["ratio"]
        np.testing.assert_allclose(ratio, toy_oracle(16, 500.0, 4.0) / inv_freq(16, 500.0), rtol=1e-14)


@pytest.mark.hf
@pytest.mark.usefixtures("quiet_transformers")
def test_toy_method_runs_in_eval_methods(toy: type, llama_dir, tmp_path) -> None:
    """``eval perplexity --methods none,toy-slow-half``: at the training length s = 1, so the toy is plain RoPE and
    its perplexity is plain RoPE's exactly; beyond it the toy's frequencies differ, and so does the perplexity."""
    args = ["eval", "perplexity", "--model", str(llama_dir), "--methods", "none,toy-slow-half", "--multiples", "1,2"]
    result = runner.invoke(app, [*args, "--max-tokens", "256", "--out", str(tmp_path / "out"), "--json"])
    assert result.exit_code == 0, result.output
    rows = {(r["method"], r["length"]): r["perplexity"] for r in json.loads(result.stdout)["perplexity"]}
    assert sorted(rows) == [("none", 64), ("none", 128), ("toy-slow-half", 64), ("toy-slow-half", 128)]
    assert rows["toy-slow-half", 64] == rows["none", 64] and rows["toy-slow-half", 128] != rows["none", 128]


@pytest.mark.hf
@pytest.mark.usefixtures("quiet_transformers")
def test_toy_method_extends_a_model_that_transformers_runs(toy: type, toy_oracle, llama_dir, tmp_path) -> None:
    """``extend --scaling toy-slow-half``: transformers does not know the toy, so the static-method rule writes it as
    ``longrope`` with equal per-pair factors; the reloaded model's frequencies are the toy's closed form."""
    import transformers

    out = tmp_path / "out"
    args = ["extend", "--model", str(llama_dir), "--scaling", "toy-slow-half", "--factor", "2", "-o", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    written = json.loads((out / "config.json").read_text())["rope_parameters"]
    assert written["rope_type"] == "longrope" and written["short_factor"] == written["long_factor"]
    np.testing.assert_allclose(written["long_factor"], [1.0] * 4 + [2.0] * 4, rtol=1e-12)
    model = transformers.AutoModelForCausalLM.from_pretrained(out)
    theirs = model.model.rotary_emb.inv_freq.double().numpy()
    np.testing.assert_allclose(theirs, toy_oracle(16, 1e4, 2.0), rtol=1e-6)


@pytest.mark.hf
def test_hf_native_is_transformers_own_table() -> None:
    """``hf_native`` is set exactly for the rope types transformers computes itself (its ``ROPE_INIT_FUNCTIONS``,
    ``default`` aside); a base change is written as ``default`` at its exact base."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    native = {name for name, method in registry.SCALINGS.items() if method.config_class.hf_native}
    assert native == set(ROPE_INIT_FUNCTIONS) - {"default"}
    rope = RopeConfig(64, base=1e4)
    for name, method in registry.SCALINGS.items():
        if method.config_class.base_change:
            spec = method.config_class.from_options(factor=4.0, original_length=1024, base=5e5)
            written = to_hf_dict(rope.replace(scaling=spec))
            assert written["rope_type"] == "default", name
            np.testing.assert_allclose(
                inv_freq(64, written["rope_theta"]), frequencies(rope.replace(scaling=spec)).inv_freq
            )
    assert not YarnScaling(factor=2.0, original_max_position_embeddings=8, ramp="paper").is_hf_native()
    assert not DynamicScaling(factor=2.0, original_max_position_embeddings=8, fixed_seq_len=64).is_hf_native()
    assert YarnScaling(factor=2.0, original_max_position_embeddings=8).is_hf_native()


def test_ranked_scalings_follow_the_hooks(toy: type) -> None:
    """The rank hooks order the queries; the toy (plan_order 99, no other rank) is last in the plan's list only."""
    from ropekit.eval.methods import default_methods
    from ropekit.scaling import ranked_scalings

    assert ranked_scalings("plan_order") == ["linear", "ntk", "yarn", "llama3", "toy-slow-half"]
    assert ranked_scalings("extend_preference") == ["yarn", "llama3", "ntk", "linear"]
    assert ranked_scalings("eval_order") == ["linear", "ntk", "dynamic", "yarn", "llama3", "longrope"]
    assert "toy-slow-half" not in default_methods()


# ---------------------------------------------------------------------------------------------------------------
# One constructor from user-facing options


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("linear", LinearScaling(factor=4.0)),
        ("ntk", NTKScaling(factor=4.0)),
        ("dynamic", DynamicScaling(factor=4.0, original_max_position_embeddings=2048)),
        ("yarn", YarnScaling(factor=4.0, original_max_position_embeddings=2048)),
        ("llama3", Llama3Scaling(factor=4.0, original_max_position_embeddings=2048)),
        ("proportional", ProportionalScaling(factor=4.0)),
        ("base", BaseChange(base=5e5)),
    ],
)
def test_from_options_fills_the_fields_the_method_has(name: str, expected: ScalingConfig) -> None:
    config_class = registry.get_scaling(name).config_class
    assert config_class.from_options(factor=4.0, original_length=2048, base=5e5) == expected


def test_from_options_names_missing_fields_as_value_and_lookup_error() -> None:
    with pytest.raises(MissingParameters) as info:
        YarnScaling.from_options(original_length=2048)
    assert info.value.missing == ["factor"] and isinstance(info.value, ValueError | LookupError)
    with pytest.raises(LookupError, match="short_factor"):
        LongRopeScaling.from_options(factor=4.0, original_length=2048)


def test_longrope_from_options_takes_the_searched_factors_from_the_model() -> None:
    native = LongRopeScaling(short_factor=(1.0, 2.0), long_factor=(3.0, 4.0), original_max_position_embeddings=64)
    assert LongRopeScaling.from_options(factor=8.0, original_length=128, native=native) == replace(native, factor=8.0)
    given = LongRopeScaling.from_options(factor=8.0, original_length=128, short_factor=(1.0,), long_factor=(2.0,))
    assert given == LongRopeScaling(
        short_factor=(1.0,), long_factor=(2.0,), original_max_position_embeddings=128, factor=8.0
    )


def test_cli_base_method_uses_base() -> None:
    """``--scaling base --base 50000`` said "needs --base"."""
    result = runner.invoke(app, ["frequencies", "--head-dim", "8", "--scaling", "base", "--base", "50000", "--json"])
    assert result.exit_code == 0, result.output
    np.testing.assert_allclose(json.loads(result.output)["inv_freq"], [50000.0 ** (-i / 4) for i in range(4)])


def test_cli_longrope_takes_its_factor_lists_from_param() -> None:
    """``--scaling longrope`` asked for options that did not exist."""
    short, long = [1.0, 1.5, 2.0, 3.0], [2.0, 4.0, 8.0, 16.0]
    args = ["frequencies", "--head-dim", "8", "--scaling", "longrope", "--original-length", "4k", "--factor", "8"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert "needs --param short_factor=..., --param long_factor=..." in " ".join(result.output.split())
    lists = [
        "--param",
        "short_factor=" + ",".join(map(str, short)),
        "--param",
        "long_factor=" + ",".join(map(str, long)),
    ]
    for seq_len, factors in (("4k", short), ("8k", long)):
        result = runner.invoke(app, [*args, *lists, "--seq-len", seq_len, "--json"])
        assert result.exit_code == 0, result.output
        data = json.loads(result.output)
        oracle = [1.0 / (f * 10000.0 ** (2 * i / 8)) for i, f in enumerate(factors)]
        np.testing.assert_allclose(data["inv_freq"], oracle, rtol=1e-15)
        assert data["attention_factor"] == pytest.approx(math.sqrt(1 + math.log(8) / math.log(4096)), rel=1e-15)


@pytest.mark.parametrize(
    ("param", "message"),
    [
        ("beta_fst=16", "--param beta_fst: unknown parameter(s) ['beta_fst']"),
        ("beta_fast", "--param items must look like name=value"),
        ("beta_slow=0", "beta_slow"),
    ],
)
def test_cli_bad_param_is_a_one_line_error(param: str, message: str) -> None:
    args = ["frequencies", "--scaling", "yarn", "--factor", "4", "--original-length", "1k", "--param", param]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and message in result.output, result.output


# ---------------------------------------------------------------------------------------------------------------
# How frequencies follow the length (transformers' rules as tables)


def test_dynamic_recompute_length_is_transformers_rule() -> None:
    spec = DynamicScaling(factor=2.0, original_max_position_embeddings=256)
    # (length the frequencies were computed for, next length) -> length to recompute for, None = keep
    table = {(None, 100): None, (None, 300): 300, (300, 200): 256, (300, 256): None, (300, 300): None, (256, 255): None}
    for (computed_for, seq_len), expected in table.items():
        assert spec.recompute_length(computed_for, seq_len) == expected, (computed_for, seq_len)


def test_longrope_recompute_length_switches_at_the_original_length() -> None:
    spec = LongRopeScaling(short_factor=(1.0,), long_factor=(2.0,), original_max_position_embeddings=256)
    table = {(None, 100): 100, (100, 256): None, (256, 257): 257, (257, 4000): None, (4000, 256): 256}
    for (computed_for, seq_len), expected in table.items():
        assert spec.recompute_length(computed_for, seq_len) == expected, (computed_for, seq_len)
    for config in (LinearScaling(factor=2.0), YarnScaling(factor=2.0, original_max_position_embeddings=8)):
        assert config.recompute_length(None, 10**6) is None


def test_describe_summarises_per_pair_lists() -> None:
    spec = LongRopeScaling(short_factor=(1.0,) * 4, long_factor=(2.0,) * 4, original_max_position_embeddings=64)
    described = spec.describe()
    assert described["rope_type"] == "longrope" and described["short_factor"] == "<4 values>"
    assert json.loads(json.dumps(described)) == described
    assert frequencies(RopeConfig(8, scaling=spec)).inv_freq.shape == (4,)


def test_cli_param_gives_a_field_beside_the_model_options() -> None:
    """``inspect --scaling base --param base=50000``: scaled/plain ratio (10000/50000)^(2i/d) per pair."""
    args = [
        "inspect",
        "--head-dim",
        "8",
        "--train-length",
        "1k",
        "--scaling",
        "base",
        "--param",
        "base=50000",
        "--json",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    ratio = json.loads(result.output)["methods"]["base"]["ratio"]
    np.testing.assert_allclose(ratio, [(1e4 / 5e4) ** (i / 4) for i in range(4)], rtol=1e-14)
    result = runner.invoke(
        app, ["frequencies", "--scaling", "linear", "--factor", "4", "--param", "factor=2", "--json"]
    )
    assert result.exit_code == 0, result.output
    np.testing.assert_allclose(json.loads(result.output)["inv_freq"], inv_freq(128, 1e4) / 2, rtol=1e-15)
