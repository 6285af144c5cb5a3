"""Output folders that never destroy what the user owns: the input check and the atomic writer.

One rule for every command that writes a folder (``extend``, ``finetune``):

* **Never write into an input.** Before any work, :func:`check_output` refuses an output that *is*, *contains* or
  *is inside* an input (the model folder or GGUF file, the training text, the resume checkpoint), comparing real
  paths (symlinks resolved on both sides, and every symlink inside an input folder followed to what it points at).
* **Never lose the old output.** :func:`staged_output` gives a fresh hidden sibling folder to write into; only when
  everything is written does :func:`publish` swap it in (old output renamed aside, new one renamed into place, old
  one deleted). Ctrl-C or an error before that leaves the old output untouched and removes the sibling.

A symlink given as the output stands for the folder it points at (that folder is replaced, the link kept); a
dangling one is refused. The output's parent folder must exist, as for every other command.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path


def _real(path: str | Path) -> Path:
    return Path(os.path.realpath(path))


def _inside(path: Path, folder: Path) -> bool:
    return path != folder and folder in path.parents


def input_paths(path: str | Path) -> list[Path]:
    """The real paths an input occupies: its own, and that of every symlink below it (followed, once each)."""
    found: list[Path] = []
    pending = [Path(path)]
    seen: set[Path] = set()
    while pending:
        real = _real(pending.pop())
        if real in seen:
            continue
        seen.add(real)
        found.append(real)
        if not real.is_dir():
            continue
        for root, dirs, files in os.walk(real):
            for name in (*dirs, *files):
                entry = Path(root) / name
                if entry.is_symlink():
                    pending.append(entry)
    return found


def check_output(
    out: str | Path,
    inputs: Iterable[tuple[str, str | Path | None]] = (),
    *,
    force: bool = False,
    exists_ok: bool = False,
    option: str = "out",
) -> Path:
    """Check the output folder ``out`` before any work; nothing is created or removed.

    Args:
        out: the output folder (it may exist; a symlink stands for what it points at).
        inputs: ``(option, path)`` of every input the command reads (``None`` paths are skipped).
        force: an existing, non-empty ``out`` may be replaced.
        exists_ok: ``out`` may exist regardless of ``force`` (a resumed run: it is replaced at the end).
        option: the argument (or CLI option) ``out`` came from, for the messages.

    Returns:
        The real path of ``out`` (where the output goes).

    Raises:
        FileNotFoundError: ``out`` is a dangling symlink, or its parent folder does not exist.
        FileExistsError: ``out`` exists (not empty) and neither ``force`` nor ``exists_ok`` is given, or it is
            neither a folder nor a file (a device, a socket: never replaced).
        ValueError: ``out`` is, contains or is inside an input.
    """
    given = Path(out)
    if given.is_symlink() and not given.exists():
        raise FileNotFoundError(
            f"{option} {str(given)!r} is a symlink to {os.readlink(given)!r}, which does not exist; "
            "give a folder (or a link to one)"
        )
    real = _real(given)
    if not real.parent.is_dir():
        what = "is not a folder" if real.parent.exists() else "does not exist"
        raise FileNotFoundError(f"{option} {str(given)!r}: the folder {str(real.parent)!r} {what} (create it first)")
    for name, path in inputs:
        if path is None:
            continue
        for part in input_paths(path):
            relation = "is" if part == real else "contains" if _inside(part, real) else None
            if relation is None and _inside(real, part):
                relation = "is inside"
            if relation:
                where = "" if part == _real(path) else f" (through the symlink to {str(part)!r})"
                raise ValueError(
                    f"{option} {str(given)!r} {relation} the input {name}={str(path)!r}{where}; writing there would "
                    f"destroy it: choose a folder outside every input"
                )
    if real.exists() and not real.is_dir() and not real.is_file():
        raise FileExistsError(f"{option} {str(given)!r} exists and is neither a folder nor a file")
    if real.exists() and (real.is_file() or any(real.iterdir())) and not (force or exists_ok):
        raise FileExistsError(f"{option} {str(given)!r} exists; pass force=True to overwrite it")
    return real


def publish(staged: Path, out: Path) -> None:
    """Put the finished folder ``staged`` at ``out`` (a sibling of it), replacing what was there.

    The old output is renamed aside first and deleted only once the new one is in place; if the swap fails, the
    old output is put back.
    """
    out = _real(out)
    aside = None
    if out.exists() or out.is_symlink():
        aside = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
        aside.rmdir()
        out.rename(aside)
    try:
        staged.rename(out)
    except BaseException:
        if aside is not None:
            aside.rename(out)
        raise
    if aside is not None:
        if aside.is_dir() and not aside.is_symlink():
            shutil.rmtree(aside)
        else:
            aside.unlink()


@contextmanager
def staged_output(out: str | Path) -> Iterator[Path]:
    """A fresh hidden folder beside ``out`` to write the whole output into; published at ``out`` on success.

    On an exception (Ctrl-C included) the folder is removed and ``out`` is left as it was.
    """
    real = _real(out)
    staged = Path(tempfile.mkdtemp(prefix=f".{real.name}.partial-", dir=real.parent))
    try:
        yield staged
        publish(staged, real)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise


def partial_dir(out: str | Path) -> Path:
    """The fixed hidden sibling where ``finetune`` builds ``out`` (kept after an interruption, for a resumed run)."""
    real = _real(out)
    return real.parent / f".{real.name}.ropekit-partial"
