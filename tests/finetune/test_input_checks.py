"""What `extend` and `finetune` read is checked before any work, and errors name only options the command has and
the user typed (issue 23 items 6, 8, 9, 13, 14, 16, 17, 18, 21).

Oracles: the arithmetic of the lengths (original × factor), the command's own option list (read from the Typer
app), the files on disk, and transformers' own ``save_pretrained`` config.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from helpers.hf_models import ORIGINAL  # the byte-level Llama's length
from ropekit.cli.app import app

pytest.importorskip("transformers")
runner = CliRunner()

LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "original_max_position_embeddings": ORIGINAL,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "rope_theta": 10000.0,
}


def options_of(command: str) -> set[str]:
    """Every option spelling of a command, read from the app itself."""
    click = get_command(app).commands[command]
    return {name for param in click.params for name in getattr(param, "opts", []) if name.startswith("--")}


def error_line(args: list[str]) -> str:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.output
    return lines[0]


def named_options(line: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", line))


def config_of(out: Path) -> dict:
    return json.loads((out / "config.json").read_text())


def test_extend_original_length_sets_the_written_length(llama_dir, tmp_path):
    """Item 8: --original-length X --factor s writes max_position_embeddings X·s, not the config's own length·s."""
    out = tmp_path / "out"
    args = ["extend", "--model", llama_dir, "--scaling", "yarn", "--factor", "1.5", "--original-length", "32"]
    result = runner.invoke(app, [str(a) for a in [*args, "-o", out]])
    assert result.exit_code == 0, result.output
    assert config_of(out)["max_position_embeddings"] == 48
    assert config_of(out)["rope_parameters"]["original_max_position_embeddings"] == 32


def test_extend_of_an_extended_model_refuses_to_shrink_it(make_llama, tmp_path):
    """Item 9: a native llama3 model (factor 8 over 64, max 512) with --factor 2 would be written with max 128."""
    model = make_llama(tmp_path / "extended", rope_parameters=LLAMA3, max_position_embeddings=8 * ORIGINAL)
    common = ["extend", "--model", model, "--scaling", "yarn"]
    line = error_line([*common, "--factor", "2", "-o", tmp_path / "a"])
    assert "512" in line and "relative to the original length 64" in line
    assert named_options(line) <= options_of("extend")
    assert not (tmp_path / "a").exists()
    result = runner.invoke(app, [str(a) for a in [*common, "--factor", "16", "-o", tmp_path / "b"]])
    assert result.exit_code == 0, result.output
    assert config_of(tmp_path / "b")["max_position_embeddings"] == 16 * ORIGINAL


def test_finetune_of_a_folder_without_tokenizer_says_what_is_missing(llama_dir, text_file, tmp_path):
    """Item 13: AutoTokenizer returns an empty tokenizer, which used to give "--text gives 1 tokens"."""
    model = Path(shutil.copytree(llama_dir, tmp_path / "model"))
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (model / name).unlink(missing_ok=True)
    args = ["finetune", "--model", model, "--text", text_file, "--scaling", "yarn", "--target-length", "128"]
    line = error_line([*args, "-o", tmp_path / "out"])
    assert "--model" in line and "tokenizer" in line
    assert not (tmp_path / "out").exists()


def test_extend_of_a_folder_without_weights_is_refused(llama_dir, tmp_path):
    """Item 14: the copy would not load."""
    model = Path(shutil.copytree(llama_dir, tmp_path / "model"))
    (model / "model.safetensors").unlink()
    line = error_line(["extend", "--model", model, "--scaling", "linear", "--factor", "2", "-o", tmp_path / "out"])
    assert "--model" in line and "weights" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["--scaling", "longrope", "--factor", "2"],
        ["--scaling", "longrope", "--factor", "2", "--factors", "FACTORS"],
        ["--scaling", "yarn", "--factor", "2", "--beta-fast", "0"],
        ["--scaling", "yarn", "--factor", "2", "--fixed-seq-len", "256"],
        ["--scaling", "yarn", "--target-length", "32"],
        ["--scaling", "base"],
        ["--scaling", "yarn", "--factor", "2", "--param", "beta_fast=-1"],
    ],
    ids=["longrope-no-factors", "bad-factors", "beta-fast-0", "fixed-seq-len", "target-below", "base", "param"],
)
@pytest.mark.parametrize("command", ["extend", "finetune"])
def test_errors_name_only_options_the_command_has_and_the_user_typed(llama_dir, text_file, tmp_path, command, args):
    """Item 16: errors cited --param (which neither command had), --factor when none was typed, and so on."""
    factors = tmp_path / "factors.json"
    factors.write_text(json.dumps([0.0] + [1.0] * 7))  # a factor of 0 for the 8 pairs
    args = [str(factors) if a == "FACTORS" else a for a in args]
    extra = ["--text", text_file] if command == "finetune" else []
    if command == "finetune" and "--target-length" not in args:
        args = [*args, "--target-length", "128"]
    line = error_line([command, "--model", llama_dir, *extra, *args, "-o", tmp_path / "out"])
    named = named_options(line)
    assert named and named <= options_of(command), line
    typed = {a for a in args if a.startswith("--")}
    assert named - {"--factors", "--param", "--base"} <= typed, line  # remedies may name options not yet typed
    if "--target-length" in args and "--factor" not in args:
        assert "--factor" not in named, line


def test_scaling_base_with_base_is_the_base_change(llama_dir, tmp_path):
    """Item 16: `--scaling base` said "needs --base", and then with --base "give exactly one of"."""
    args = ["extend", "--model", str(llama_dir), "--scaling", "base", "--base", "50000", "-o", str(tmp_path / "out")]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert config_of(tmp_path / "out")["rope_parameters"] == {"rope_type": "default", "rope_theta": 50000.0}


def test_an_unknown_rope_type_in_the_config_is_blamed_on_the_model(llama_dir, tmp_path):
    """Item 16: it was blamed on --base."""
    model = Path(shutil.copytree(llama_dir, tmp_path / "model"))
    config = config_of(model)
    config["rope_parameters"] = {"rope_type": "nosuch", "rope_theta": 10000.0, "factor": 2.0}
    (model / "config.json").write_text(json.dumps(config))
    line = error_line(["extend", "--model", model, "--scaling", "yarn", "--factor", "2", "-o", tmp_path / "out"])
    assert "--model" in line and "nosuch" in line and "--base" not in line


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("extend", ["--scaling", "yarn", "--factor", "2", "--target-length", "4k"]),
        ("finetune", ["--scaling", "yarn", "--factor", "4", "--target-length", "300", "--steps", "1", "--no-evaluate"]),
    ],
)
def test_contradictory_factor_and_target_length_are_refused(llama_dir, text_file, tmp_path, command, args):
    """Item 21: both were accepted; the factor is relative to the original length, so they must agree."""
    extra = ["--text", text_file] if command == "finetune" else []
    line = error_line([command, "--model", llama_dir, *extra, *args, "-o", tmp_path / "out"])
    assert "--factor" in line and "--target-length" in line and "disagree" in line
    assert not (tmp_path / "out").exists()


def test_resume_refuses_a_changed_text(llama_dir, text_file, tmp_path):
    """Item 6: the same --text path with other contents would train the remaining steps on other data."""
    from ropekit.finetune.request import FinetuneRequest
    from ropekit.finetune.run import finetune
    from ropekit.finetune.settings import FinetuneSettings
    from ropekit.finetune.train import StopTraining
    from ropekit.scaling import YarnScaling

    text = Path(shutil.copy(text_file, tmp_path / "corpus.jsonl"))
    settings = FinetuneSettings(target_length=128, steps=4, lr=1e-3, batch_size=1, checkpoint_every=0)
    scaling = YarnScaling(factor=2.0, original_max_position_embeddings=ORIGINAL)

    def stop(record):
        raise StopTraining

    out = tmp_path / "out"
    first = finetune(
        FinetuneRequest(llama_dir, scaling, text, out, settings, evaluate=False), progress=False, on_step=stop
    )
    assert first.train.interrupted
    text.write_text(text.read_text().replace("count", "tally"))
    with pytest.raises(ValueError, match="not the text the interrupted run trained on"):
        finetune(FinetuneRequest(llama_dir, scaling, text, out, settings, resume=True, evaluate=False), progress=False)


def test_checkpoint_config_keeps_what_save_pretrained_wrote(llama_dir, tmp_path):
    """Item 17: a GGUF's config (read by transformers) has architectures/dtype None; ropekit's writer overwrote the
    values save_pretrained had written with those None."""
    import torch
    from transformers import AutoModelForCausalLM

    from ropekit.integrations.hf.extend import save_extended

    model = AutoModelForCausalLM.from_pretrained(llama_dir, dtype=torch.float32)
    config = {**config_of(llama_dir), "architectures": None, "dtype": None}
    save_extended(model, None, tmp_path, config)
    written = config_of(tmp_path)
    assert written["architectures"] == ["LlamaForCausalLM"] and written["dtype"] == "float32"


def test_upper_case_jsonl_is_read_as_jsonl(tmp_path):
    """Item 18: `.JSONL` was read as plain text (the JSON lines themselves became the training text)."""
    from ropekit.eval.text import read_text

    lower, upper = tmp_path / "a.jsonl", tmp_path / "b.JSONL"
    for path in (lower, upper):
        path.write_text('{"text": "one"}\n{"text": "two"}\n')
    assert read_text(upper).documents == read_text(lower).documents == (b"one", b"two")
