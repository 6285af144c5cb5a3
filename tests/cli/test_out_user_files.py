"""Every command with ``--out``, pointed at a folder of the user's files: nothing the user owns changes without
``--force``, and ``--force`` replaces only what the command writes.

The commands are enumerated from the Typer app, so a new command with ``--out`` fails
:func:`test_every_out_command_is_covered` until it has a row in :data:`CASES`. Each case runs on the cheapest valid
arguments (the bundled tiny model or a small random transformers model, one method, one length, a step or two of
training) with ``--out`` on a folder holding files named like the command's output (colliding) and others (not
colliding); the oracle is the sha256 of every user file before and after:

* without ``--force``, with each colliding name alone and with all of them: exit 2 with one ``error:`` line naming a
  colliding file (or its folder) and ``--force``; every user file unchanged and no staging folder left behind;
* with ``--force``: exit 0; every colliding file replaced (so the table names files the command really writes) and
  every other user file unchanged.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from helpers.gguf_files import write_source
from ropekit.cli.app import app

runner = CliRunner()

#: user files that no command writes (kept by every run, with or without --force)
OWN = ("mine.txt", "notes/keep.md", "results.json.bak", ".hidden", "models.txt")
TINY_TRAIN = "--d-model 16 --n-layers 1 --n-heads 2 --n-kv-heads 1 --ffn-dim 32"


@dataclass(frozen=True)
class Case:
    """How to run one command cheaply, and what it writes.

    ``args``: space-separated, with ``{llama}``, ``{text}`` and ``{gguf}`` filled from the fixtures. ``writes``:
    space-separated paths relative to ``--out`` (a folder) that the command writes, placed there as the user's
    files; the names that mark a run the command resumes (``train_state.json``, ``finetune/checkpoint``) are left
    out, since finding one means resuming. ``file``: for a command whose ``--out`` is a file, its name (the colliding
    file). ``spares``: names other commands write, which this one must neither refuse nor touch.
    """

    command: tuple[str, ...]
    args: str  # space-separated
    writes: str = ""  # space-separated
    file: str | None = None
    spares: str = ""  # space-separated names like another command's output, which this one must leave alone
    needs: str | None = None  # an optional package the case needs


CASES = {
    "train": Case(
        ("train",),
        "--steps 2 --train-length 64 --batch-size 2 --warmup-steps 1 " + TINY_TRAIN,
        "config.json model.safetensors train_state.safetensors",
    ),
    "report": Case(
        ("report",),
        "--methods none --perplexity-multiples 1 --passkey-multiples 1 --depths 0.5 --trials 1 --max-tokens 256 "
        "--task-samples 1 --tasks niah_single_1 --task-multiples 1",
        "index.html summary.json tasks.json results.json perplexity.csv passkey.csv wavelengths.png perplexity.png "
        "passkey.png tasks.png",
    ),
    "extend": Case(("extend",), "--model {llama} --scaling linear --factor 2", "config.json model.safetensors"),
    "extend-gguf": Case(("extend",), "--model {gguf} --scaling linear --factor 2", file="out.gguf", needs="gguf"),
    "finetune": Case(
        ("finetune",),
        "--model {llama} --text {text} --scaling yarn --target-length 128 --steps 1 --batch-size 1 --no-evaluate "
        "--checkpoint-every 0",
        "config.json model.safetensors finetune/settings.json finetune/loss.csv",
        needs="accelerate",
    ),
    "plot": Case(("plot",), "wavelengths --rotary-dim 8", file="figure.png", spares="wavelengths.png"),
    "eval perplexity": Case(
        ("eval", "perplexity"),
        "--methods none --multiples 1 --max-tokens 256",
        "results.json perplexity.csv",
        spares="passkey.csv tasks.json",
    ),
    "eval passkey": Case(
        ("eval", "passkey"),
        "--methods none --multiples 1 --depths 0.5 --trials 1",
        "results.json passkey.csv",
        spares="perplexity.csv",
    ),
    "eval tasks": Case(
        ("eval", "tasks"),
        "--methods none --tasks niah_single_1 --multiples 1 --samples 1",
        "tasks.json",
        spares="results.json tasks.png",
    ),
    "eval effective-length": Case(
        ("eval", "effective-length"), "{samples}", "tasks.json tasks.png", spares="results.json passkey.csv"
    ),
    "search": Case(
        ("search",),
        "--target-length 2x --evaluations 2 --samples 1 --heldout-samples 1",
        "search.json",
        spares="results.json tasks.json",
    ),
    "experiment base-bound": Case(
        ("experiment", "base-bound"),
        "--init none --models nope --steps 1 --trials 8 --batch-size 1 --context 256",
        "results.json index.html retrieval_vs_distance.png models/NoPE/config.json",
    ),
}


def commands_with_out() -> set[tuple[str, ...]]:
    """Every command of the app (groups walked) with an ``--out`` option."""
    found = set()

    def walk(command, path: tuple[str, ...]) -> None:
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, (*path, name))
        if any("--out" in getattr(param, "opts", ()) for param in getattr(command, "params", ())):
            found.add(path)

    walk(typer.main.get_command(app), ())
    return found


def test_every_out_command_is_covered():
    covered = {case.command for case in CASES.values()}
    assert commands_with_out() == covered, "a command with --out needs a row in CASES (and one there must exist)"


def _hashes(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _user_folder(folder: Path, names: tuple[str, ...], spares: tuple[str, ...] = ()) -> None:
    """The user's files: ``names`` (colliding), ``spares`` and :data:`OWN`, each with its own content."""
    for name in (*names, *spares, *OWN):
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(f"the user's own {name}\n".encode() * 3)


def _staging_left(folder: Path) -> list[str]:
    """Staging folders or files the writer left in ``folder`` or beside it."""
    return [p.name for where in (folder, folder.parent) for p in where.glob(".*partial*")]


@pytest.fixture(scope="module")
def gguf_source(tmp_path_factory) -> Path:
    pytest.importorskip("gguf")
    return write_source(tmp_path_factory.mktemp("gguf") / "in.gguf")


@pytest.fixture(scope="module")
def lm_eval_samples(tmp_path_factory) -> Path:
    """An lm-eval ``--log_samples`` file of the ruler task niah_single_1 (two lengths, two samples each)."""
    import json

    path = tmp_path_factory.mktemp("lm-eval") / "samples_niah_single_1_2026-01-01T00-00-00.000001.jsonl"
    records = [
        {"doc_id": i, "doc": {"max_length": n}, "filtered_resps": ["1234567"], str(n): float(i % 2)}
        for i, n in enumerate((256, 256, 512, 512))
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.mark.parametrize("name", sorted(CASES))
def test_out_keeps_the_users_files(name, tmp_path, request):
    case = CASES[name]
    if case.needs:
        pytest.importorskip(case.needs)
    fills = {}
    if "{llama}" in case.args or "{text}" in case.args:
        pytest.importorskip("transformers")
        fills = {"llama": request.getfixturevalue("llama_dir"), "text": request.getfixturevalue("text_file")}
    if "{gguf}" in case.args:
        fills["gguf"] = request.getfixturevalue("gguf_source")
    if "{samples}" in case.args:
        fills["samples"] = request.getfixturevalue("lm_eval_samples")
    args = [*case.command, *(a.format(**fills) for a in case.args.split())]
    colliding = (case.file,) if case.file else tuple(case.writes.split())
    for name in colliding:  # each alone: refused before any work, naming it
        _refused(args, tmp_path / f"alone-{len(name)}-{Path(name).name}", (name,), case)
    folder = tmp_path / "user"
    _refused(args, folder, colliding, case)
    if case.spares:  # only names other commands write: no collision, so the run goes ahead around them
        spares = tmp_path / "spares"
        _user_folder(spares, (), tuple(case.spares.split()))
        before = _hashes(spares)
        result = runner.invoke(app, [*args, "--out", str(spares / case.file if case.file else spares)])
        assert result.exit_code == 0, result.output
        after = _hashes(spares)
        assert {n: after.get(n) for n in before} == before
    before = _hashes(folder)
    out = folder / case.file if case.file else folder
    forced = runner.invoke(app, [*args, "--out", str(out), "--force"])
    assert forced.exit_code == 0, forced.output
    after = _hashes(folder)
    kept = {n: h for n, h in before.items() if n not in colliding}
    assert {n: after.get(n) for n in kept} == kept  # the user's other files, untouched
    assert all(after.get(n) not in (None, before[n]) for n in colliding)  # the command wrote these
    assert _staging_left(folder) == []


def _refused(args: list[str], folder: Path, colliding: tuple[str, ...], case: Case) -> None:
    """Without --force: exit 2, one error line naming a colliding file (or its folder) and --force; nothing
    changed, nothing left behind."""
    _user_folder(folder, colliding)
    before = _hashes(folder)
    out = folder / case.file if case.file else folder
    result = runner.invoke(app, [*args, "--out", str(out)])
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code == 2, (colliding, result.output)
    assert len(errors) == 1 and "--force" in errors[0], result.output
    assert any(part in errors[0] for name in colliding for part in Path(name).parts), errors[0]
    assert _hashes(folder) == before
    assert _staging_left(folder) == []
