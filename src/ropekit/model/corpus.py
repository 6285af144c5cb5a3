"""The training corpus: a fixed, documented selection of the Python standard library's own source.

Every machine with CPython has it, so nothing is downloaded. Selection: every ``*.py`` file under
``sysconfig.get_paths()["stdlib"]``, sorted by relative path, skipping the directories in ``EXCLUDED_DIRS``.
A file is held out for evaluation when the first byte of sha256(relative path) is below ``HELDOUT_BELOW``
(about 4% of files). The held-out text the reports use is shipped in the package (``data/heldout.txt``),
because another Python version's stdlib differs; ``manifest()`` lists each file's size and sha256, and its
``train_digest`` is recorded in every checkpoint (``corpus_digest``), so a rebuilt corpus can be checked against
the one a model was trained on (docs/tiny_model.md has the command).
"""

from __future__ import annotations

import hashlib
import os
import sysconfig
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

EXCLUDED_DIRS = frozenset(
    {"test", "tests", "idlelib", "lib2to3", "site-packages", "__pycache__", "turtledemo", "ensurepip", "pydoc_data"}
)
HELDOUT_BELOW = 10  # of 256: first byte of sha256(relpath) < 10 -> held out
SEPARATOR = b"\n\n"
HELDOUT_MAX_BYTES = 400_000


@dataclass(frozen=True)
class CorpusFile:
    """One selected source file."""

    relpath: str
    size: int
    sha256: str
    heldout: bool


def stdlib_root() -> Path:
    """Directory of this interpreter's standard library, or ``$ROPEKIT_CORPUS_ROOT`` where that is set.

    The variable lets another machine train on the same bytes (a copy of the selected files, e.g. a GPU machine
    whose Python differs); the manifest's hashes say whether the corpus is the one recorded.
    """
    override = os.environ.get("ROPEKIT_CORPUS_ROOT")
    return Path(override) if override else Path(sysconfig.get_paths()["stdlib"])


def _is_heldout(relpath: str) -> bool:
    return hashlib.sha256(relpath.encode()).digest()[0] < HELDOUT_BELOW


def select_files(root: Path | None = None) -> list[CorpusFile]:
    """The corpus files under ``root`` (default: this interpreter's stdlib), sorted by path."""
    root = root or stdlib_root()
    files = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if EXCLUDED_DIRS.intersection(rel.parts[:-1]):
            continue
        data = path.read_bytes()
        files.append(
            CorpusFile(rel.as_posix(), len(data), hashlib.sha256(data).hexdigest(), _is_heldout(rel.as_posix()))
        )
    return files


def manifest(files: list[CorpusFile]) -> dict:
    """JSON-ready manifest: the selection rule, per-file hashes and a hash of the whole training text."""
    train = hashlib.sha256()
    for f in files:
        if not f.heldout:
            train.update(f.sha256.encode())
    return {
        "source": "CPython standard library (*.py)",
        "excluded_dirs": sorted(EXCLUDED_DIRS),
        "heldout_rule": f"sha256(relpath)[0] < {HELDOUT_BELOW}",
        "train_files": sum(not f.heldout for f in files),
        "train_bytes": sum(f.size for f in files if not f.heldout),
        "heldout_files": sum(f.heldout for f in files),
        "train_digest": train.hexdigest(),
        "files": [f.__dict__ for f in files],
    }


def build_training_bytes(root: Path | None = None) -> tuple[np.ndarray, dict]:
    """Concatenated training files (uint8 array) and the manifest."""
    root = root or stdlib_root()
    files = select_files(root)
    parts = [(root / f.relpath).read_bytes() for f in files if not f.heldout]
    return np.frombuffer(SEPARATOR.join(parts), dtype=np.uint8), manifest(files)


def build_heldout_text(root: Path | None = None) -> bytes:
    """Held-out files joined, capped at ``HELDOUT_MAX_BYTES`` (what ``data/heldout.txt`` was made from)."""
    root = root or stdlib_root()
    parts = [(root / f.relpath).read_bytes() for f in select_files(root) if f.heldout]
    return SEPARATOR.join(parts)[:HELDOUT_MAX_BYTES]


def heldout_bytes() -> bytes:
    """The shipped held-out evaluation text (identical on every machine)."""
    return resources.files("ropekit").joinpath("data/heldout.txt").read_bytes()
