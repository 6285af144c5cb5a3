"""The short API (``ropekit.patch``, ``ropekit.extend``, ``ropekit.evaluate``): its docstring examples run, and each
name gives what the function under it gives.

Oracles: transformers' own model with the same ``rope_parameters`` (for ``patch`` with a scaling); the functions the
names stand for, called directly (``apply_attention`` with the config written out, ``ropekit extend`` and
``ropekit eval tasks --json`` on the command line).
"""

from __future__ import annotations

import doctest
import json

import pytest
import torch
from typer.testing import CliRunner

import ropekit
import ropekit.api
from helpers.hf_logits import ATOL, MATTERS, YARN_32_TO_128, ids_of, llama, logits, max_diff
from ropekit.cli.app import app

pytest.importorskip("transformers")
pytestmark = [pytest.mark.hf, pytest.mark.usefixtures("quiet_transformers")]


def test_docstring_examples_run():
    """The examples print only what they show. DeepSpeed, where installed, prints a line to stdout the first time a
    process asks for its accelerator (transformers' ``save_pretrained`` does): asked here first, outside them."""
    import contextlib
    import importlib.util
    import io

    if importlib.util.find_spec("deepspeed") is not None:
        with contextlib.redirect_stdout(io.StringIO()):
            from deepspeed.accelerator import get_accelerator

            get_accelerator()
    result = doctest.testmod(ropekit.api, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 3 and result.failed == 0


def test_the_names_are_ropekits_and_integrations_hf_exports_the_patching_functions():
    from ropekit.integrations.hf import apply_attention, apply_scaling
    from ropekit.integrations.hf.patch_attention import apply_attention as attention_in_module
    from ropekit.integrations.hf.patch_rope import apply_scaling as scaling_in_module

    assert (ropekit.patch, ropekit.extend, ropekit.evaluate) == (
        ropekit.api.patch,
        ropekit.api.extend,
        ropekit.api.evaluate,
    )
    assert (apply_scaling, apply_attention) == (scaling_in_module, attention_in_module)


def test_patch_with_yarn_gives_transformers_own_yarn():
    plain = llama({"rope_type": "default", "rope_theta": 10000.0}, 32)
    native = llama(YARN_32_TO_128, 128)
    native.load_state_dict(plain.state_dict())
    ids = ids_of(150)
    before = logits(plain, ids)
    patched = ropekit.patch(plain, "yarn", factor=4)
    assert patched is plain and patched.config.max_position_embeddings == 128
    assert max_diff(logits(patched, ids), logits(native, ids)) < ATOL
    assert max_diff(before, logits(native, ids)) > MATTERS  # the comparison has teeth


def test_patch_with_self_extend_is_apply_attention_with_the_parameters_written_out():
    from ropekit.attention.self_extend import SelfExtend, suggest
    from ropekit.integrations.hf.patch_attention import apply_attention

    ids = ids_of(150)
    model = llama({"rope_type": "default", "rope_theta": 10000.0}, 32)
    by_hand = llama({"rope_type": "default", "rope_theta": 10000.0}, 32)
    by_hand.load_state_dict(model.state_dict())
    plain = logits(model, ids)
    ropekit.patch(model, "self_extend", factor=4)  # parameters derived for 4 × 32 tokens, as the authors' rule says
    rule = suggest(32, 128)
    apply_attention(by_hand, SelfExtend(group=rule["group"], window=rule["window"]))
    assert model.ropekit_attention_method == by_hand.ropekit_attention_method
    assert torch.equal(logits(model, ids), logits(by_hand, ids))
    assert max_diff(plain, logits(model, ids)) > MATTERS


def test_extend_writes_what_the_command_writes(tmp_path):
    llama({"rope_type": "default", "rope_theta": 10000.0}, 32).save_pretrained(tmp_path / "model")
    result = ropekit.extend(tmp_path / "model", "yarn", factor=4, beta_fast=16, out=tmp_path / "api")
    command = ["extend", "--model", str(tmp_path / "model"), "--scaling", "yarn", "--factor", "4"]
    ran = CliRunner().invoke(app, [*command, "--beta-fast", "16", "--out", str(tmp_path / "cli")])
    assert ran.exit_code == 0, ran.output
    written = json.loads((tmp_path / "api" / "config.json").read_text())
    assert written == json.loads((tmp_path / "cli" / "config.json").read_text()) == result.config
    assert written["rope_parameters"]["beta_fast"] == 16 and written["max_position_embeddings"] == 128


def test_evaluate_returns_what_eval_tasks_prints():
    result = ropekit.evaluate(
        "tiny", tasks=["niah_single_1", "vt"], lengths=[256, 512], methods=["none", "yarn"], samples=2
    )
    args = ["eval", "tasks", "--model", "tiny", "--tasks", "niah_single_1,vt", "--lengths", "256,512"]
    ran = CliRunner().invoke(app, [*args, "--methods", "none,yarn", "--samples", "2", "--json"])
    assert ran.exit_code == 0, ran.output
    printed = json.loads(ran.stdout)
    assert result.to_dict()["rows"] == printed["rows"] and result.to_dict()["summary"] == printed["summary"]
    assert len(result.rows) == 2 * 2 * 2


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda m: ropekit.patch(m, "yarnn", factor=4), "yarnn"),
        (lambda m: ropekit.patch(m, "none", factor=4), "takes no parameters"),
        (lambda m: ropekit.patch(m, "yarn", factor=4, beta_fastest=3), "beta_fastest"),
        (lambda m: ropekit.patch(m, "self_extend", factor=4, groups=2), "groups"),
        (lambda m: ropekit.patch(m, "linear", factor=-2), "factor"),
        (lambda m: ropekit.patch(m, "self_extend", factor=0.5), "factor"),
    ],
)
def test_bad_arguments_are_one_line_errors_naming_them(call, message):
    with pytest.raises(ValueError, match=message) as caught:
        call(llama({"rope_type": "default", "rope_theta": 10000.0}, 32))
    assert "\n" not in str(caught.value)


def test_one_name_or_length_is_that_one_not_its_characters():
    """``tasks="niah_single_1"``, ``methods="none"``, ``lengths=256``: the same rows as the one-item lists."""
    one = ropekit.evaluate("tiny", tasks="niah_single_1", lengths=256, methods="none", samples=1)
    listed = ropekit.evaluate("tiny", tasks=["niah_single_1"], lengths=[256], methods=["none"], samples=1)
    assert one.to_dict()["rows"] == listed.to_dict()["rows"] and len(one.rows) == 1


@pytest.mark.parametrize(("argument", "value"), [("lengths", []), ("multiples", ()), ("tasks", []), ("methods", [])])
def test_an_empty_list_is_refused_by_name(argument, value):
    from ropekit.errors import InvalidArgument

    with pytest.raises(ValueError) as caught:
        ropekit.evaluate("tiny", **{argument: value})
    assert "\n" not in str(caught.value) and str(caught.value).startswith(argument)
    if argument in ("lengths", "multiples"):
        assert isinstance(caught.value, InvalidArgument) and caught.value.argument == argument


def test_evaluate_passes_the_searched_methods_factors_as_eval_tasks_does(tmp_path):
    """``methods=["searched"], params={"factors": ...}``: the rows ``eval tasks --param factors=`` prints."""
    search = {"original_length": 256, "factor": 2.0, "long_factor": [1.0 + i / 16 for i in range(16)]}
    (tmp_path / "search.json").write_text(json.dumps({**search, "short_factor": [1.0] * 16}))
    result = ropekit.evaluate(
        "tiny", tasks="niah_single_1", lengths=[512], methods=["searched"], samples=1, params={"factors": tmp_path}
    )
    args = ["eval", "tasks", "--model", "tiny", "--tasks", "niah_single_1", "--lengths", "512", "--samples", "1"]
    ran = CliRunner().invoke(app, [*args, "--methods", "searched", "--param", f"factors={tmp_path}", "--json"])
    assert ran.exit_code == 0, ran.output
    assert result.to_dict()["rows"] == json.loads(ran.stdout)["rows"] and result.rows[0]["method"] == "searched"


def test_extend_with_a_target_length_writes_what_the_command_writes(tmp_path):
    """``ropekit.extend(m, "yarn", target_length=128)`` derives s = 128 / 32 = 4 as ``extend --target-length``
    does: the same config.json, byte for byte as JSON, and the same as ``factor=4``."""
    llama({"rope_type": "default", "rope_theta": 10000.0}, 32).save_pretrained(tmp_path / "model")
    result = ropekit.extend(tmp_path / "model", "yarn", target_length=128, out=tmp_path / "api")
    command = ["extend", "--model", str(tmp_path / "model"), "--scaling", "yarn", "--target-length", "128"]
    ran = CliRunner().invoke(app, [*command, "--out", str(tmp_path / "cli")])
    assert ran.exit_code == 0, ran.output
    written = json.loads((tmp_path / "api" / "config.json").read_text())
    assert written == json.loads((tmp_path / "cli" / "config.json").read_text()) == result.config
    by_factor = ropekit.extend(tmp_path / "model", "yarn", factor=4, out=tmp_path / "factor").config
    assert written == by_factor and written["rope_parameters"]["factor"] == 4.0


def test_a_factor_and_a_target_length_that_disagree_are_refused_in_both_naming_the_factor(tmp_path):
    from ropekit.errors import InvalidArgument
    from ropekit.integrations.resolve import resolve_scaling

    llama({"rope_type": "default", "rope_theta": 10000.0}, 32).save_pretrained(tmp_path / "model")
    with pytest.raises(InvalidArgument) as caught:
        ropekit.extend(tmp_path / "model", "yarn", factor=2, target_length=128, out=tmp_path / "api")
    assert caught.value.argument == "factor" and not (tmp_path / "api").exists()
    assert str(caught.value).startswith("factor=2 and target_length=128 disagree: factor is relative to the original")
    command = ["extend", "--model", str(tmp_path / "model"), "--scaling", "yarn", "--factor", "2"]
    ran = CliRunner().invoke(app, [*command, "--target-length", "128", "--out", str(tmp_path / "cli")])
    assert ran.exit_code == 2 and not (tmp_path / "cli").exists()
    assert ran.stderr.strip() == "error: " + caught.value.describe(
        lambda name, *v: f"--{name.replace('_', '-')}" + (f" {v[0]}" if v else "")
    )
    with pytest.raises(InvalidArgument) as again:  # the function under both, called directly
        resolve_scaling("yarn", rope=ropekit.RopeConfig(head_dim=16), original_length=32, factor=2, target_length=128)
    assert again.value.argument == "factor"
