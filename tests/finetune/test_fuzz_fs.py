"""Filesystem fuzz of the commands that write a folder (issue 23): random layouts of the source model, the output,
symlinks and nesting, with and without ``--force``.

Invariants, whatever the layout:

* no input file (the model folder's files, what its symlinks point at, a GGUF file, the training text) is ever
  modified or deleted — checked by hashing every input before and after;
* the command either succeeds (and ``--out`` then holds the new model) or fails with the one-line error (exit 2),
  never a traceback;
* a command that fails leaves an existing ``--out`` exactly as it was, and no temporary folder behind.

``extend`` runs in the default suite (25 layouts); more layouts, and ``finetune`` (it trains one step), under
``-m slow``. The number of cases run is printed (``-s``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ropekit.cli.app import app

pytest.importorskip("transformers")
runner = CliRunner()

#: where --out may point, relative to the layout (see :func:`_out_path`)
OUTS = (
    "root",  # the folder holding everything
    "source",  # the model folder itself
    "source_parent",  # the folder holding the model
    "source_sub",  # a new folder inside the model
    "source_sub_deep",  # a new folder two levels inside the model (missing parent)
    "source_file",  # a file of the model
    "blobs",  # the folder the model's symlinked weights live in
    "link_to_source",  # a symlink to the model folder
    "link_to_parent",  # a symlink to the folder holding the model
    "through_link",  # a new folder inside the model, reached through a symlink
    "sibling_new",  # a fresh folder beside the model (the normal case)
    "sibling_full",  # an existing folder with the user's files
    "sibling_file",  # an existing file
    "link_to_full",  # a symlink to an existing folder with the user's files
    "dangling",  # a symlink to nothing
    "missing_parent",  # a folder whose parent does not exist
    "text",  # the training text (finetune)
    "text_parent",  # the folder holding the training text (finetune)
    "gguf",  # a GGUF file beside the model
)


@dataclass(frozen=True)
class Layout:
    depth: int  # how deep the model folder sits below the root
    symlinked_weights: bool  # the model's weights are a symlink into a blobs folder (as in the HF cache)
    model_via_link: bool  # --model is given through a symlink to the model folder
    gguf_source: bool  # --model is a GGUF file beside the model folder (not a valid one: refused after the --out check)
    text_beside: bool  # the training text sits beside the model (else in its own folder)
    out: str
    force: bool


layouts = st.builds(
    Layout,
    depth=st.integers(0, 2),
    symlinked_weights=st.booleans(),
    model_via_link=st.booleans(),
    gguf_source=st.booleans(),
    text_beside=st.booleans(),
    out=st.sampled_from(OUTS),
    force=st.booleans(),
)


def _hashes(paths: list[Path]) -> dict[str, str]:
    found = {}
    for root in paths:
        files = [root] if not root.is_dir() else sorted(p for p in root.rglob("*") if p.is_file())
        for file in files:
            found[str(file)] = hashlib.sha256(file.read_bytes()).hexdigest()
    return found


def _snapshot(folder: Path) -> dict[str, str] | None:
    """What an existing --out holds (names and hashes), ``None`` when it does not exist."""
    if not (folder.exists() or folder.is_symlink()):
        return None
    if folder.is_symlink() and not folder.exists():
        return {"<dangling>": os.readlink(folder)}
    return _hashes([folder.resolve()])


def _build(root: Path, llama_dir: Path, text_file: Path, layout: Layout) -> dict[str, Path]:
    parent = root
    for level in range(layout.depth):
        parent = parent / f"level{level}"
    parent.mkdir(parents=True, exist_ok=True)
    source = Path(shutil.copytree(llama_dir, parent / "model"))
    blobs = root / "blobs"
    blobs.mkdir()
    if layout.symlinked_weights:
        weights = source / "model.safetensors"
        shutil.move(weights, blobs / "weights.safetensors")
        weights.symlink_to(blobs / "weights.safetensors")
    text_dir = parent if layout.text_beside else root / "texts"
    text_dir.mkdir(exist_ok=True)
    text = Path(shutil.copy(text_file, text_dir / "corpus.jsonl"))
    gguf = parent / "m.gguf"
    gguf.write_bytes(b"GGUF" + bytes(64))
    full = root / "full"
    full.mkdir()
    (full / "mine.txt").write_text("the user's own file")
    (root / "file.txt").write_text("the user's own file")
    model_arg = gguf if layout.gguf_source else source
    if layout.model_via_link:
        model_arg = root / ("model_link.gguf" if layout.gguf_source else "model_link")
        model_arg.symlink_to(gguf if layout.gguf_source else source)
    return {
        "root": root,
        "source": source,
        "model_arg": model_arg,
        "parent": parent,
        "blobs": blobs,
        "text": text,
        "text_dir": text_dir,
        "gguf": gguf,
        "full": full,
    }


def _out_path(kind: str, paths: dict[str, Path]) -> Path:
    root, source = paths["root"], paths["source"]
    simple = {
        "root": root,
        "source": source,
        "source_parent": paths["parent"],
        "source_sub": source / "sub",
        "source_sub_deep": source / "sub" / "deeper",
        "source_file": source / "config.json",
        "blobs": paths["blobs"],
        "sibling_new": paths["parent"] / "new",
        "sibling_full": paths["full"],
        "sibling_file": root / "file.txt",
        "missing_parent": root / "no" / "such" / "out",
        "text": paths["text"],
        "text_parent": paths["text_dir"],
        "gguf": paths["gguf"],
    }
    if kind in simple:
        return simple[kind]
    link = root / "out_link"
    target = {
        "link_to_source": source,
        "link_to_parent": paths["parent"],
        "through_link": source,
        "link_to_full": paths["full"],
        "dangling": root / "nowhere",
    }[kind]
    link.symlink_to(target)
    return link / "sub" if kind == "through_link" else link


def _check(command: list[str], layout: Layout, llama_dir: Path, text_file: Path, counter: dict[str, int]) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch).resolve()
        paths = _build(root, llama_dir, text_file, layout)
        out = _out_path(layout.out, paths)
        inputs = [paths["gguf"]] if layout.gguf_source else [paths["source"]]  # what the command reads
        if layout.symlinked_weights and not layout.gguf_source:
            inputs.append(paths["blobs"])
        if command[0] == "finetune":
            inputs.append(paths["text"])
        before = _hashes(inputs)
        old_out = _snapshot(out)
        args = [*command, "--model", str(paths["model_arg"]), "--out", str(out)]
        if command[0] == "finetune":
            args += ["--text", str(paths["text"])]
        if layout.force:
            args.append("--force")
        result = runner.invoke(app, args)
        counter["cases"] += 1
        counter[f"exit {result.exit_code}"] = counter.get(f"exit {result.exit_code}", 0) + 1
        assert result.exit_code in (0, 2), (layout, result.output, result.exception)
        assert _hashes(inputs) == before, (layout, result.output)
        assert paths["model_arg"].exists()
        if result.exit_code == 0:
            assert (out / "config.json").is_file(), (layout, result.output)
        else:
            assert len([line for line in result.output.splitlines() if line.startswith("error:")]) == 1, result.output
            assert _snapshot(out) == old_out, (layout, result.output)
        leftovers = [p for p in out.absolute().parent.glob(".*") if "partial" in p.name or ".old-" in p.name]
        assert not leftovers or command[0] == "finetune", (layout, leftovers)


EXTEND = ["extend", "--scaling", "linear", "--factor", "2"]
FINETUNE = ["finetune", "--scaling", "yarn", "--target-length", "128", "--steps", "1", "--batch-size", "1"]
FINETUNE += ["--no-evaluate", "--checkpoint-every", "0"]


def _fuzz(command: list[str], examples: int, llama_dir: Path, text_file: Path) -> dict[str, int]:
    counter = {"cases": 0}

    @settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,  # the same layouts on every run
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(layout=layouts)
    def run(layout: Layout) -> None:
        _check(command, layout, llama_dir, text_file, counter)

    run()
    print(f"\n{command[0]} filesystem fuzz: {counter}")
    return counter


def test_extend_never_touches_an_input(llama_dir, text_file):
    counter = _fuzz(EXTEND, 25, llama_dir, text_file)
    assert counter["cases"] >= 25


@pytest.mark.slow
def test_extend_never_touches_an_input_many(llama_dir, text_file):
    counter = _fuzz(EXTEND, 300, llama_dir, text_file)
    assert counter["cases"] >= 300


@pytest.mark.slow
def test_finetune_never_touches_an_input(llama_dir, text_file):
    counter = _fuzz(FINETUNE, 40, llama_dir, text_file)
    assert counter["cases"] >= 40
