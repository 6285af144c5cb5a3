"""The one writer of every command's output: it never destroys what the user owns.

Every command that writes (a folder of results, a checkpoint, a model, a figure, a GGUF file) goes through here:

* **Never write into an input.** Before any work, :func:`check_output` refuses an output that *is*, *contains* or
  *is inside* an input (the model folder or GGUF file, the training text, the resume checkpoint), comparing real
  paths (symlinks resolved on both sides, and every symlink inside an input folder followed to what it points at).
* **Write beside, rename into place.** :func:`staged_output` gives a fresh hidden folder beside the output to write
  the whole output into (:func:`staged_file` the same for a single file). When everything is written,
  :func:`publish` compares every name it would place with what the output already holds: any that is already
  there is refused (:class:`OutputExists`, naming them) unless ``force``, *before* anything is renamed; then each
  file is renamed into place (an atomic replace per file; a folder the output lacks moves in whole). Ctrl-C or an
  error before that leaves the output untouched and removes the staging folder.
* **``force`` replaces only what the command writes.** Files in the output that the command does not write are
  never touched, with or without ``force``. A file where the command needs a folder (or the reverse) is never
  replaced either.

:func:`existing` and :func:`refuse_existing` run the same name check before the work, with the names a command
knows it will write, so a collision fails in a second rather than after minutes of work; the check at publish time
covers names known only at the end (the figures a report happens to draw).

A symlink given as the output stands for what it points at (written there, the link kept); a dangling one is
refused. The output's parent folder must exist.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ropekit.errors import InvalidArgument, MissingFile, PathExists

#: names listed in full in an :class:`OutputExists` message; beyond them it says how many more
SHOWN = 12


class OutputExists(FileExistsError):
    """The output already holds files the command would write, and ``force`` was not given.

    Attributes:
        out: the output (folder or file) as given.
        names: the colliding paths, relative to ``out`` (empty for a single-file output).
        option: the argument ``out`` came from.
    """

    def __init__(self, out: str | Path, names: Iterable[str] = (), *, option: str = "out") -> None:
        self.out, self.names, self.option = Path(out), sorted(names), option
        super().__init__(self.describe(option, "force=True"))

    def describe(self, option: str, force: str) -> str:
        """The message, with ``option`` for the output and ``force`` for what replaces it (a front end passes its
        own names, e.g. ``--out`` and ``--force``)."""
        if not self.names:
            return f"{option} {str(self.out)!r} exists; pass {force} to replace it"
        shown = ", ".join(self.names[:SHOWN])
        more = f" and {len(self.names) - SHOWN} more" if len(self.names) > SHOWN else ""
        them = "them" if len(self.names) > 1 else "it"
        return (
            f"{option} {str(self.out)!r} already holds {shown}{more}; pass {force} to replace {them} (the other "
            "files there are left alone)"
        )


def _real(path: str | Path) -> Path:
    return Path(os.path.realpath(path))


def _inside(path: Path, folder: Path) -> bool:
    return path != folder and folder in path.parents


def _present(path: Path) -> bool:
    return path.exists() or path.is_symlink()


def _is_folder(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def _fresh_folder(parent: Path, prefix: str) -> Path:
    """A new empty folder ``parent/prefix<random>`` with the mode any new folder gets (``tempfile.mkdtemp``'s
    0700 would stay on an output renamed from it)."""
    while True:
        folder = parent / f"{prefix}{secrets.token_hex(6)}"
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        return folder


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
    names: Iterable[str] = (),
    force: bool = False,
    kind: str = "folder",
    option: str = "out",
) -> Path:
    """Check the output ``out`` before any work; nothing is created or removed.

    Args:
        out: the output folder (or file, with ``kind="file"``); it may exist (a symlink stands for its target).
        inputs: ``(option, path)`` of every input the command reads (``None`` paths are skipped).
        names: the paths (relative to a folder ``out``) the command knows it will write: those already there are
            refused without ``force``. A single-file ``out`` is its own name.
        force: existing ``names`` may be replaced.
        kind: ``"folder"`` or ``"file"``: what the command writes at ``out``.
        option: the argument (or CLI option) ``out`` came from, for the messages.

    Returns:
        The real path of ``out`` (where the output goes).

    Raises:
        FileNotFoundError: (a :class:`~ropekit.errors.MissingFile` about ``option``) ``out`` is a dangling
            symlink, or its parent folder does not exist.
        FileExistsError: (a :class:`~ropekit.errors.PathExists` about ``option``) ``out`` is of the other kind (a file for a folder output, or the reverse), or neither a
            folder nor a file; :class:`OutputExists` when it holds any of ``names`` and ``force`` is false.
        ValueError: ``out`` is, contains or is inside an input.
    """
    given = Path(out)
    if given.is_symlink() and not given.exists():
        message = (
            f"{option} {str(given)!r} is a symlink to {os.readlink(given)!r}, which does not exist; "
            f"give a {kind} (or a link to one)"
        )
        raise MissingFile(option, str(given), message=message)
    real = _real(given)
    if not real.parent.is_dir():
        what = "is not a folder" if real.parent.exists() else "does not exist"
        message = f"{option} {str(given)!r}: the folder {str(real.parent)!r} {what} (create it first)"
        raise MissingFile(option, str(given), message=message)
    _check_inputs(given, real, inputs, option)
    if real.exists() and not real.is_dir() and not real.is_file():
        raise PathExists(
            option, str(given), message=f"{option} {str(given)!r} exists and is neither a folder nor a file"
        )
    if kind == "file":
        if real.is_dir():
            raise PathExists(option, str(given), message=f"{option} {str(given)!r} is a folder; give a file name")
        if real.exists() and not force:
            raise OutputExists(given, option=option)
    else:
        if real.is_file():
            raise PathExists(
                option, str(given), message=f"{option} {str(given)!r} is a file; give a folder (new or existing)"
            )
        refuse_existing(given, names, force=force, option=option)
    return real


def _check_inputs(given: Path, real: Path, inputs: Iterable[tuple[str, str | Path | None]], option: str) -> None:
    for name, path in inputs:
        if path is None:
            continue
        for part in input_paths(path):
            relation = "is" if part == real else "contains" if _inside(part, real) else None
            if relation is None and _inside(real, part):
                relation = "is inside"
            if relation:
                where = "" if part == _real(path) else f" (through the symlink to {str(part)!r})"
                raise InvalidArgument(
                    option, str(given), message=_over_input(option, given, relation, name, path, where)
                )


def _over_input(option: str, given: Path, relation: str, name: str, path: str | Path, where: str) -> Callable[..., str]:
    """The message refusing an output that ``relation`` (is, contains, is inside) the input ``name``."""
    return lambda n: (
        f"{n(option)} {str(given)!r} {relation} the input {n(name, str(path))}{where}; writing there would "
        f"destroy it: choose a folder outside every input"
    )


def existing(out: str | Path, names: Iterable[str]) -> list[str]:
    """Which of ``names`` (paths relative to the folder ``out``) are already there (as anything, links included)."""
    folder = _real(out)
    if not folder.is_dir():
        return []
    return sorted({name for name in names if _present(folder / name)})


def refuse_existing(out: str | Path, names: Iterable[str], *, force: bool = False, option: str = "out") -> None:
    """Raise :class:`OutputExists` when the folder ``out`` holds any of ``names`` and ``force`` is false."""
    if force:
        return
    present = existing(out, names)
    if present:
        raise OutputExists(out, present, option=option)


def _survey(staged: Path, out: Path) -> tuple[list[str], list[str]]:
    """``(replaced, conflicts)``: staged paths that ``out`` already holds, and those where a file meets a folder."""
    replaced: list[str] = []
    conflicts: list[str] = []
    pending = [Path()]
    while pending:
        relative = pending.pop()
        for entry in sorted((staged / relative).iterdir()):
            name = relative / entry.name
            target = out / name
            if not _present(target):
                continue
            if _is_folder(entry) != _is_folder(target):
                conflicts.append(f"{name}{'/' if _is_folder(target) else ''}")
            elif _is_folder(entry):
                pending.append(name)  # both folders: merged, so what collides is inside
            else:
                replaced.append(str(name))
    return sorted(replaced), sorted(conflicts)


def _move(staged: Path, out: Path) -> None:
    """Rename every entry of ``staged`` into ``out``: files replace files, folders merge into folders."""
    for entry in staged.iterdir():
        target = out / entry.name
        if _is_folder(entry) and _is_folder(target):
            _move(entry, target)
        else:
            os.replace(entry, target)


def publish(staged: Path, out: str | Path, *, force: bool = False, option: str = "out") -> list[str]:
    """Put the finished folder ``staged`` (a sibling of ``out``) at ``out``; return the names it replaced.

    ``out`` absent: ``staged`` is renamed to it (one atomic step). ``out`` a folder: each entry of ``staged`` is
    renamed into it, after every name was checked: names ``out`` already holds are refused unless ``force``, and a
    file meeting a folder is always refused, so a refusal changes nothing. Files of ``out`` that ``staged`` does not
    hold stay as they are.

    Raises:
        OutputExists: ``out`` holds some of the names and ``force`` is false.
        FileExistsError: a name is a file on one side and a folder on the other, or ``out`` is not a folder.
    """
    given = Path(out)
    out = _real(out)
    if not _present(out):
        staged.rename(out)
        return []
    if not _is_folder(out):
        raise PathExists(option, str(given), message=f"{option} {str(given)!r} exists and is not a folder")
    replaced, conflicts = _survey(staged, out)
    if conflicts:
        message = (
            f"{option} {str(given)!r} holds {', '.join(conflicts[:SHOWN])} where the output has "
            "the other kind (a file against a folder); move them away first"
        )
        raise PathExists(option, str(given), message=message)
    if replaced and not force:
        raise OutputExists(given, replaced, option=option)
    _move(staged, out)
    shutil.rmtree(staged)
    return replaced


@contextmanager
def staged_output(out: str | Path, *, force: bool = False, option: str = "out") -> Iterator[Path]:
    """A fresh hidden folder beside the folder ``out`` to write the whole output into; published at ``out`` (with
    :func:`publish` and ``force``) on success.

    On an exception (Ctrl-C included), or a refusal at publish time, the folder is removed and ``out`` is left as
    it was.
    """
    real = _real(out)
    staged = _fresh_folder(real.parent, f".{real.name}.partial-")
    try:
        yield staged
        publish(staged, out, force=force, option=option)
    finally:
        shutil.rmtree(staged, ignore_errors=True)


@contextmanager
def staged_file(out: str | Path, *, force: bool = False, option: str = "out") -> Iterator[Path]:
    """A path beside the file ``out`` (same name, in a fresh hidden folder) to write it to; renamed onto ``out`` on
    success, when ``out`` does not exist or ``force`` is given.

    A symlink ``out`` stands for the file it points at. On an exception, or a refusal, nothing at ``out`` changes.

    Raises:
        OutputExists: ``out`` exists and ``force`` is false.
        FileExistsError: ``out`` is a folder.
    """
    real = _real(out)
    staged = _fresh_folder(real.parent, f".{real.name}.partial-")
    try:
        yield staged / real.name
        if real.is_dir():
            raise PathExists(option, str(out), message=f"{option} {str(out)!r} is a folder; give a file name")
        if _present(real) and not force:
            raise OutputExists(out, option=option)
        os.replace(staged / real.name, real)
    finally:
        shutil.rmtree(staged, ignore_errors=True)


def partial_dir(out: str | Path) -> Path:
    """The fixed hidden sibling where a resumable command (``finetune``) builds ``out``, kept after an
    interruption for the resumed run."""
    real = _real(out)
    return real.parent / f".{real.name}.ropekit-partial"
