"""`ropekit extend` and `ropekit finetune` on the command line: what they write, and one-line errors before work."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from ropekit.cli.app import app

pytest.importorskip("transformers")
runner = CliRunner()


def _config(out) -> dict:
    return json.loads((out / "config.json").read_text())


def test_extend_yarn(llama_dir, tmp_path):
    out = tmp_path / "out"
    result = runner.invoke(
        app, ["extend", "--model", str(llama_dir), "--scaling", "yarn", "--factor", "4", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    config = _config(out)
    assert config["rope_parameters"]["rope_type"] == "yarn"
    assert config["rope_parameters"]["factor"] == 4.0
    assert config["rope_parameters"]["original_max_position_embeddings"] == 64
    assert config["max_position_embeddings"] == 256


def test_extend_base_and_paper_ramp(llama_dir, tmp_path):
    result = runner.invoke(app, ["extend", "--model", str(llama_dir), "--base", "500000", "-o", str(tmp_path / "b")])
    assert result.exit_code == 0, result.output
    assert _config(tmp_path / "b")["rope_parameters"] == {"rope_type": "default", "rope_theta": 500000.0}
    args = ["extend", "--model", str(llama_dir), "--scaling", "yarn", "--factor", "2", "--ramp", "paper"]
    result = runner.invoke(app, [*args, "-o", str(tmp_path / "p"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["rope_parameters"]["rope_type"] == "longrope"


def test_extend_plan_says_what_it_chose(llama_dir, tmp_path):
    from ropekit.scaling import ranked_scalings

    out = tmp_path / "out"
    result = runner.invoke(
        app, ["extend", "--model", str(llama_dir), "--plan", "--target-length", "256", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    chosen = _config(out)["rope_parameters"]
    assert "plan:" in result.output
    written = {"ntk": "default"}  # NTK is a base change
    assert any(
        chosen["rope_type"] == written.get(name, name) and f"plan: {name}" in result.output
        for name in ranked_scalings("extend_preference")
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--scaling", "nosuch", "--factor", "2"], "unknown rope_type 'nosuch'"),
        (["--scaling", "yarn", "--base", "5e5"], "exactly one of"),
        (["--scaling", "linear", "--factor", "2", "--ramp", "paper"], "ramp"),
        (["--plan"], "--plan needs --target-length"),
        (["--scaling", "linear", "--factor", "2", "--target-length", "32"], "above the original length 64"),
    ],
)
def test_extend_bad_options(llama_dir, tmp_path, args, message):
    result = runner.invoke(app, ["extend", "--model", str(llama_dir), *args, "-o", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not (tmp_path / "out").exists()


def test_extend_refuses_existing_out(llama_dir, tmp_path):
    """Files the copy would write are refused without --force; --force replaces only those."""
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    (tmp_path / "out" / "config.json").write_text("{}")
    args = ["extend", "--model", str(llama_dir), "--scaling", "linear", "--factor", "2", "-o", str(tmp_path / "out")]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "--force" in result.output and "config.json" in result.output
    assert (tmp_path / "out" / "config.json").read_text() == "{}"
    assert runner.invoke(app, [*args, "--force"]).exit_code == 0
    assert (tmp_path / "out" / "notes.txt").read_text() == "mine"
    assert json.loads((tmp_path / "out" / "config.json").read_text())["rope_parameters"]["rope_type"] == "linear"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--scaling", "nosuch", "--factor", "2", "--target-length", "128"], "unknown rope_type 'nosuch'"),
        (["--scaling", "yarn", "--factor", "2", "--target-length", "64"], "above the original length 64"),
        (["--scaling", "yarn", "--target-length", "64k"], "needs at least"),
    ],
)
def test_finetune_bad_input_fails_before_training(llama_dir, text_file, tmp_path, args, message):
    out = tmp_path / "out"
    result = runner.invoke(
        app, ["finetune", "--model", str(llama_dir), "--text", str(text_file), *args, "-o", str(out)]
    )
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not out.exists()


def test_finetune_missing_text_and_non_rope_model(llama_dir, tmp_path):
    common = ["--scaling", "yarn", "--factor", "2", "--target-length", "128", "-o", str(tmp_path / "out")]
    result = runner.invoke(app, ["finetune", "--model", str(llama_dir), "--text", str(tmp_path / "none.txt"), *common])
    assert result.exit_code == 2 and "does not exist" in result.output
    gpt2 = tmp_path / "gpt2"
    gpt2.mkdir()
    (gpt2 / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    (tmp_path / "t.txt").write_text("hello " * 1000)
    result = runner.invoke(app, ["finetune", "--model", str(gpt2), "--text", str(tmp_path / "t.txt"), *common])
    assert result.exit_code == 2 and "not a RoPE model" in result.output


def test_ctrl_c_stops_with_a_resumable_checkpoint_and_keeps_the_old_out(llama_dir, text_file, tmp_path):
    """Ctrl-C leaves a resumable checkpoint beside --out and the old --out as it was (issue 23 item 3)."""
    from ropekit._output import partial_dir

    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    command = [sys.executable, "-m", "ropekit.cli", "finetune", "--model", str(llama_dir), "--text", str(text_file)]
    command += ["--scaling", "yarn", "--factor", "2", "--target-length", "128", "--steps", "100000", "--no-evaluate"]
    command += ["--checkpoint-every", "0", "-o", str(out), "--force"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    work = partial_dir(out) / "finetune"
    log = work / "loss.csv"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not (log.exists() and len(log.read_text().splitlines()) >= 4):
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr[-2000:]
    assert "--resume" in stderr and str(work / "checkpoint") in stderr.replace("\n", "")
    step = json.loads((work / "checkpoint" / "progress.json").read_text())["step"]
    rows = log.read_text().splitlines()
    assert step >= 2 and rows[-1].startswith(f"{step},")
    assert [p.name for p in out.iterdir()] == ["mine.txt"]
