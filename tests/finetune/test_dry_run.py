"""`finetune --dry-run` refuses exactly what the run refuses before training, and `--chunks` needs `--window`.

Oracle: the real run itself. Each case runs the same command twice, with and without ``--dry-run``; the run must be
refused before its first step (exit 2, one ``error:`` line, no model written), and the dry run must give the same
exit code and the same line, where it used to print a plan and exit 0.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ropekit.cli.app import app

pytest.importorskip("transformers")
pytest.importorskip("accelerate")
runner = CliRunner()


def _invoke(args: list) -> tuple[int, list[str], str]:
    result = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in result.output, result.output
    return result.exit_code, [line for line in result.output.splitlines() if line.startswith("error:")], result.output


def _files(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()
    }


def _interrupted_run(llama_dir, text_file, out: Path) -> None:
    """A run of ``out`` stopped after its first step (a resumable checkpoint in its hidden partial folder)."""
    from ropekit.finetune.request import FinetuneRequest
    from ropekit.finetune.run import finetune
    from ropekit.finetune.settings import FinetuneSettings
    from ropekit.finetune.train import StopTraining
    from ropekit.scaling import YarnScaling

    def stop(record):
        raise StopTraining

    settings = FinetuneSettings(target_length=128, steps=1, checkpoint_every=0)
    scaling = YarnScaling(factor=2.0, original_max_position_embeddings=64)
    request = FinetuneRequest(llama_dir, scaling, text_file, out, settings, evaluate=False)
    assert finetune(request, progress=False, on_step=stop).train.interrupted


CASES = {
    # the case: a text with too few tokens for one window plus the held-out tail
    "text-too-short": ({"text": "short"}, [], "needs at least"),
    "text-missing": ({"text": "missing"}, [], "does not exist"),
    "target-not-above-original": ({"target": "64"}, [], "above the original length 64"),
    "chunks-without-window": ({}, ["--chunks", "3"], "--chunks 3"),
    "window-above-target": ({}, ["--window", "256"], "--window"),
    "eval-tokens": ({}, ["--eval-tokens", "lots"], "--eval-tokens"),
    "passkey-trials": ({}, ["--passkey-trials", "0"], "--passkey-trials"),
    "out-holds-user-files": ({"out": "user"}, [], "--force"),
    "resume-nothing": ({}, ["--resume"], "no checkpoint"),
    "resume-other-settings": ({"out": "interrupted"}, ["--resume", "--lr", "1e-3"], "differ from the interrupted"),
    "does-not-fit": ({"memory": "tiny"}, [], "one step needs about"),
    "head-refused": ({"head": "refused"}, [], "its forward transforms the output logits"),
    "launch-refused": ({"launch": "refused"}, [], "FSDP"),
}


@pytest.mark.parametrize("case", CASES)
def test_dry_run_refuses_what_the_run_refuses(llama_dir, text_file, tmp_path, monkeypatch, case):
    setup, extra, expected = CASES[case]
    text, out = text_file, tmp_path / "out"
    if setup.get("text") == "short":
        text = tmp_path / "short.txt"
        text.write_text("a few words " * 20)  # 240 bytes: the byte tokenizer gives 240 tokens, 128 + 129 needed
    elif setup.get("text") == "missing":
        text = tmp_path / "missing.txt"
    if setup.get("out") == "user":
        out.mkdir()
        (out / "notes.txt").write_text("mine")
        (out / "config.json").write_text("{}")  # a file the run writes: refused without --force
    elif setup.get("out") == "interrupted":
        _interrupted_run(llama_dir, text_file, out)
    if setup.get("memory") == "tiny":
        import ropekit.finetune.fit as fit

        monkeypatch.setattr(fit, "available_memory", lambda device=None: 1000)
    if setup.get("head") == "refused":
        import ropekit.finetune.train as train

        def refused(model, what):
            raise ValueError(f"{type(model).__name__}: its forward transforms the output logits; cannot {what}")

        monkeypatch.setattr(train, "check_head", refused)
    if setup.get("launch") == "refused":
        import ropekit.finetune.request as request

        def no_accelerator(settings):
            raise ValueError("the accelerate config asks for FSDP, which accelerate runs only on GPUs")

        monkeypatch.setattr(request, "make_accelerator", no_accelerator)
    args = ["finetune", "--model", llama_dir, "--text", text, "--scaling", "yarn"]
    args += ["--target-length", setup.get("target", "128"), "--steps", "1", "--no-evaluate", "-o", out, *extra]
    before = _files(tmp_path)
    code, lines, output = _invoke(args)
    assert code == 2 and len(lines) == 1 and expected in lines[0], output  # the run refuses before training
    assert _files(tmp_path) == before and (setup.get("out") == "user" or not (out / "config.json").exists())
    dry_code, dry_lines, dry_output = _invoke([*args, "--dry-run"])
    assert (dry_code, dry_lines) == (code, lines), dry_output
    assert _files(tmp_path) == before


def test_dry_run_of_a_run_that_starts_exits_0_and_says_what_the_data_gives(llama_dir, text_file, tmp_path):
    """The one-line data summary (with what no window holds) comes before the plan, as in the run."""
    args = ["finetune", "--model", llama_dir, "--text", text_file, "--scaling", "yarn", "--target-length", "128"]
    code, lines, output = _invoke([*args, "--window", "48", "--steps", "1", "-o", tmp_path / "out", "--dry-run"])
    assert code == 0 and not lines, output
    assert "training windows of 48 (PoSE: positions over 128, 2 chunks)" in output
    assert "plan: window 48 (target 128)" in output
    assert not (tmp_path / "out").exists()


def test_chunks_without_window_is_refused_naming_both_options(llama_dir, text_file, tmp_path):
    args = ["finetune", "--model", llama_dir, "--text", text_file, "--scaling", "yarn", "--target-length", "128"]
    code, lines, output = _invoke([*args, "--chunks", "4", "-o", tmp_path / "out"])
    assert code == 2 and len(lines) == 1, output
    assert "--chunks 4" in lines[0] and "--window" in lines[0]
    assert not (tmp_path / "out").exists()


def test_settings_refuse_chunks_without_window_and_default_to_two_with_it():
    from ropekit.finetune.settings import FinetuneSettings

    with pytest.raises(ValueError, match=r"chunks=3 .* window=W"):
        FinetuneSettings(target_length=128, chunks=3)
    assert FinetuneSettings(target_length=128, window=32).chunks == 2
    assert json.loads(json.dumps(FinetuneSettings(target_length=128).to_dict()))["chunks"] is None
