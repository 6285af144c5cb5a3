"""The staged writer every command shares (``ropekit._output``): random trees of what a command wrote and of what
the output folder already holds, published with and without ``force``.

Oracle: a plain dictionary model of the folder (path -> content): without ``force`` a collision changes nothing;
with ``force`` the result is the old folder updated with the staged files; a file meeting a folder is refused either
way; files the command did not write are never touched.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ropekit._output import OutputExists, check_output, publish, refuse_existing, staged_file, staged_output

NAMES = ("a.json", "b.png", "c", "sub/d.txt", "sub/e.bin", "sub/deep/f", "g/h")


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _write(folder: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def _consistent(names: list[str]) -> bool:
    """No name is both a file and a folder within one tree."""
    return not any(other.startswith(name + "/") for name in names for other in names)


trees = st.dictionaries(st.sampled_from((*NAMES, "c/x", "a.json/y")), st.binary(min_size=1, max_size=8), max_size=5)


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(old=trees, new=trees, force=st.booleans())
def test_publish_against_a_dictionary_model(tmp_path_factory, old, new, force):
    if not (_consistent(list(old)) and _consistent(list(new))):
        return
    root = tmp_path_factory.mktemp("publish")
    out = root / "out"
    out.mkdir()
    _write(out, old)
    staged = root / ".out.partial-test"
    staged.mkdir()
    _write(staged, new)
    kinds_clash = any(n.startswith(o + "/") or o.startswith(n + "/") for n in new for o in old)  # file vs folder
    collisions = sorted(set(old) & set(new))
    if kinds_clash:
        with pytest.raises(FileExistsError):
            publish(staged, out, force=force)
        assert _tree(out) == old
    elif collisions and not force:
        with pytest.raises(OutputExists) as raised:
            publish(staged, out, force=force)
        assert raised.value.names == collisions
        assert all(name in str(raised.value) for name in collisions)
        assert _tree(out) == old
    else:
        assert publish(staged, out, force=force) == collisions
        assert _tree(out) == {**old, **new}
        assert not staged.exists()


def test_a_new_output_is_the_staged_folder_renamed(tmp_path):
    with staged_output(tmp_path / "out") as staged:
        _write(staged, {"x": b"1", "s/y": b"2"})
    assert _tree(tmp_path / "out") == {"x": b"1", "s/y": b"2"}
    mode = (tmp_path / "out").stat().st_mode & 0o777
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    assert mode == fresh.stat().st_mode & 0o777  # not tempfile's 0700
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_an_error_while_writing_leaves_the_output_and_no_staging(tmp_path):
    out = tmp_path / "out"
    _write(out, {"x": b"old"})
    with pytest.raises(KeyboardInterrupt), staged_output(out, force=True) as staged:
        _write(staged, {"x": b"new"})
        raise KeyboardInterrupt
    assert _tree(out) == {"x": b"old"}
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_a_refusal_at_publish_time_removes_the_staging(tmp_path):
    """Names known only at the end (a report's figures) are checked before anything is renamed."""
    out = tmp_path / "out"
    _write(out, {"late.png": b"mine", "other": b"mine"})
    with pytest.raises(OutputExists, match=r"late\.png; pass force=True"), staged_output(out) as staged:
        _write(staged, {"early.json": b"1", "late.png": b"2"})
    assert _tree(out) == {"late.png": b"mine", "other": b"mine"}
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_a_symlinked_output_is_written_where_it_points(tmp_path):
    target = tmp_path / "target"
    _write(target, {"mine": b"1"})
    link = tmp_path / "link"
    link.symlink_to(target)
    with staged_output(link) as staged:
        _write(staged, {"x": b"2"})
    assert link.is_symlink() and _tree(target) == {"mine": b"1", "x": b"2"}


def test_a_user_symlink_is_replaced_never_written_through(tmp_path):
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_bytes(b"keep")
    out = tmp_path / "out"
    out.mkdir()
    (out / "x").symlink_to(elsewhere)
    with pytest.raises(OutputExists), staged_output(out) as staged:
        _write(staged, {"x": b"new"})
    with staged_output(out, force=True) as staged:
        _write(staged, {"x": b"new"})
    assert elsewhere.read_bytes() == b"keep" and not (out / "x").is_symlink() and (out / "x").read_bytes() == b"new"


def test_single_file_output(tmp_path):
    out = tmp_path / "fig.png"
    with staged_file(out) as path:
        assert path.name == "fig.png" and path.parent != tmp_path
        path.write_bytes(b"1")
    with pytest.raises(OutputExists, match="exists; pass force=True"), staged_file(out) as path:
        path.write_bytes(b"2")
    assert out.read_bytes() == b"1"
    with staged_file(out, force=True) as path:
        path.write_bytes(b"3")
    assert out.read_bytes() == b"3" and sorted(os.listdir(tmp_path)) == ["fig.png"]


def test_checks_before_the_work(tmp_path):
    out = tmp_path / "out"
    _write(out, {"a": b"", "mine": b""})
    refuse_existing(out, ["b"])
    with pytest.raises(OutputExists, match=r"holds a; pass force=True"):
        refuse_existing(out, ["a", "b"])
    refuse_existing(out, ["a"], force=True)
    with pytest.raises(FileExistsError, match="is a file; give a folder"):
        check_output(out / "a", force=True)
    with pytest.raises(FileExistsError, match="is a folder; give a file name"):
        check_output(out, kind="file", force=True)
    with pytest.raises(ValueError, match="contains the input"):
        check_output(tmp_path, [("model", out / "a")], force=True)


def test_path_errors_carry_the_argument_they_are_about(tmp_path):
    """A front end names its option from ``error.argument``; the errors stay the OS errors they were."""
    from ropekit.errors import MissingFile, PathExists

    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(PathExists) as wrong_kind:
        check_output(a_file, option="report")
    assert wrong_kind.value.argument == "report" and isinstance(wrong_kind.value, FileExistsError)
    assert str(wrong_kind.value).startswith(f"report {str(a_file)!r} is a file")
    with pytest.raises(MissingFile) as no_parent:
        check_output(tmp_path / "missing" / "out")
    assert no_parent.value.argument == "out" and isinstance(no_parent.value, FileNotFoundError)
