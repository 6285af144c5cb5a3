"""`extend` and `finetune` never destroy an input (model folder, GGUF file, text) and never lose the old --out:
every layout that would write into an input is refused before any work, and a failure or Ctrl-C while writing
leaves the old output as it was (issue 23 items 1, 2, 3, 12, 15, 22)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ropekit.cli.app import app

pytest.importorskip("transformers")
runner = CliRunner()

EXTEND = ["extend", "--scaling", "yarn", "--factor", "2"]
FINETUNE = ["finetune", "--scaling", "yarn", "--factor", "2", "--target-length", "128", "--steps", "1"]
FINETUNE += ["--no-evaluate", "--checkpoint-every", "0", "--batch-size", "1"]


def hashes(*roots: Path) -> dict[str, str]:
    """sha256 of every file below ``roots`` (or of the file itself), by path."""
    found = {}
    for root in roots:
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for file in files:
            found[str(file)] = hashlib.sha256(file.read_bytes()).hexdigest()
    return found


def leftovers(folder: Path) -> list[str]:
    """Hidden siblings the writer leaves behind (there must be none after a refusal or a failure)."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


@pytest.fixture
def model(llama_dir, tmp_path) -> Path:
    """A private copy of the small model (tests may try to destroy it)."""
    return Path(shutil.copytree(llama_dir, tmp_path / "model"))


def _refused(args: list[str], inputs: list[Path], *words: str) -> None:
    """The command exits 2 with one line holding ``words``, and leaves every file of ``inputs`` as it was."""
    before = hashes(*inputs)
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    for word in words:
        assert word in result.output, result.output
    assert hashes(*inputs) == before


def test_extend_force_refuses_out_around_or_inside_the_source(model, tmp_path):
    """Item 1: `--model outer/model --out outer --force` used to delete outer/model."""
    outer = tmp_path / "outer"
    outer.mkdir()
    inner = Path(shutil.move(model, outer / "model"))
    _refused([*EXTEND, "--model", str(inner), "--out", str(outer), "--force"], [inner], "--out", "contains", "--model")
    _refused(
        [*EXTEND, "--model", str(inner), "--out", str(inner), "--force"], [inner], "--out", "is the input", "--model"
    )
    # item 15: --out SRC/sub used to nest a partial copy of the source inside itself
    _refused([*EXTEND, "--model", str(inner), "--out", str(inner / "sub")], [inner], "--out", "is inside", "--model")
    assert not (inner / "sub").exists()
    # the same folder reached through a symlink
    link = tmp_path / "link"
    link.symlink_to(outer)
    _refused([*EXTEND, "--model", str(inner), "--out", str(link), "--force"], [inner], "--out", "contains")


@pytest.mark.parametrize("where", ["folder", "self"])
def test_extend_force_refuses_to_write_over_a_gguf_it_reads(tmp_path, where):
    """Item 2: `--model dir/m.gguf --out dir --force` emptied dir; `--out self.gguf` made it an empty folder."""
    folder = tmp_path / "dir"
    folder.mkdir()
    gguf = folder / "m.gguf"
    gguf.write_bytes(b"GGUF" + bytes(range(256)) * 4)
    out = folder if where == "folder" else gguf
    _refused([*EXTEND, "--model", str(gguf), "--out", str(out), "--force"], [gguf], "--out", "--model", str(gguf))
    assert gguf.is_file()


def test_finetune_force_refuses_out_around_the_model_or_the_text(model, text_file, tmp_path):
    """Item 3: the same data loss in `finetune`, for the model and for the training text."""
    outer = tmp_path / "outer"
    outer.mkdir()
    inner = Path(shutil.move(model, outer / "model"))
    text = Path(shutil.copy(text_file, outer / "corpus.jsonl"))
    args = [*FINETUNE, "--text", str(text)]
    _refused([*args, "--model", str(inner), "--out", str(outer), "--force"], [inner, text], "--out", "contains")
    _refused(
        [*args, "--model", str(inner), "--out", str(inner / "sub")], [inner, text], "--out", "is inside", "--model"
    )
    _refused(
        [*args, "--model", str(inner), "--out", str(text), "--force"], [inner, text], "--out", "is the input", "--text"
    )
    gguf = outer / "m.gguf"
    gguf.write_bytes(b"GGUF" + bytes(1024))
    _refused([*args, "--model", str(gguf), "--out", str(gguf), "--force"], [gguf, text], "--out", "is the input")


def test_finetune_layer_types_on_a_single_rope_model_is_refused_before_out_is_touched(model, text_file, tmp_path):
    """Items 12 and 20: --layer-types on a model with one RoPE is refused, by both commands, before any work."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    args = ["--model", str(model), "--layer-types", "full_attention", "--out", str(out), "--force"]
    _refused([*FINETUNE, "--text", str(text_file), *args], [out], "--layer-types")
    _refused([*EXTEND, *args], [out], "--layer-types")


def test_out_with_a_missing_parent_or_a_bad_symlink_names_out(model, text_file, tmp_path):
    """Item 22: a missing tree is refused as by the other commands; symlink errors name --out."""
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    full = tmp_path / "full"
    full.mkdir()
    (full / "mine.txt").write_text("keep")
    (full / "config.json").write_text("{}")  # a name both commands write
    to_full = tmp_path / "to_full"
    to_full.symlink_to(full)
    for command in (EXTEND, [*FINETUNE, "--text", str(text_file)]):
        _refused(
            [*command, "--model", str(model), "--out", str(tmp_path / "a" / "b" / "c")],
            [model],
            "--out",
            "does not exist",
        )
        assert not (tmp_path / "a").exists()
        _refused([*command, "--model", str(model), "--out", str(dangling)], [model], "--out", "symlink")
        _refused([*command, "--model", str(model), "--out", str(to_full)], [model, full], "--out", "--force")


def test_extend_failure_while_writing_keeps_the_old_out(model, tmp_path, monkeypatch):
    """Item 3: Ctrl-C (or any error) while writing leaves the old --out as it was, and no temporary folder."""
    import ropekit.integrations.hf.extend as export
    from ropekit.scaling import LinearScaling

    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(export, "write_config", interrupted)
    with pytest.raises(KeyboardInterrupt):
        export.extend(model, LinearScaling(factor=2.0), out, force=True)
    assert [p.name for p in out.iterdir()] == ["mine.txt"]
    assert leftovers(tmp_path) == []
    monkeypatch.undo()
    export.extend(model, LinearScaling(factor=2.0), out, force=True)
    assert (out / "mine.txt").read_text() == "keep"  # --force replaces only what the command writes
    assert json.loads((out / "config.json").read_text())["rope_parameters"]["rope_type"] == "linear"
    assert leftovers(tmp_path) == []


def test_extend_through_a_symlinked_out_writes_into_its_target(model, tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    (target / "old.txt").write_text("old")
    link = tmp_path / "link"
    link.symlink_to(target)
    result = runner.invoke(app, [*EXTEND, "--model", str(model), "--out", str(link), "--force"])
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and (link / "config.json").is_file() and (target / "old.txt").read_text() == "old"
    assert os.path.realpath(link) == str(target.resolve())
