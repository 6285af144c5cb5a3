"""``ropekit search``'s output folder, checked before any work: every name it writes (search.json, the model's
config.json and files), an output that is the model folder, a journal that is a symbolic link or a file ropekit did
not write; ``--force`` replaces only what ropekit wrote and keeps a journal of the same search.

Oracle: the folder's contents before and after (unchanged where refused), and whether the search started (a model
load replaced by an error)."""

from __future__ import annotations

import json
import os

import pytest

from helpers.cli import assert_error, run
from helpers.search import SMALL, small_tiny


@pytest.fixture
def no_search(monkeypatch):
    """Loading a model is an error: a command refused up front never reaches it."""
    import ropekit.search.run as search_run

    def refuse(*args, **kwargs):
        raise AssertionError("the search started")

    monkeypatch.setattr(search_run, "prepare", refuse)


def _folder(path, **files):
    path.mkdir()
    for name, text in files.items():
        (path / name.replace("__", ".")).write_text(text)
    return path


def test_a_model_file_in_out_is_refused_before_any_work(no_search, llama_dir, tmp_path):
    out = _folder(tmp_path / "o", config__json="{}")
    assert_error(run("search", "--model", llama_dir, *SMALL, "--out", out), "--out", "config.json", "--force")
    assert (out / "config.json").read_text() == "{}" and sorted(os.listdir(out)) == ["config.json"]


def test_out_equal_to_the_model_folder_is_refused_with_nothing_written(no_search, llama_dir):
    before = sorted(os.listdir(llama_dir))
    assert_error(run("search", "--model", llama_dir, *SMALL, "--out", llama_dir, "--force"), "--out", "input")
    assert sorted(os.listdir(llama_dir)) == before


def test_out_inside_the_bundled_model_is_refused(no_search):
    from ropekit.model.checkpoint import resolve

    bundled = resolve("tiny")
    assert_error(run("search", *SMALL, "--out", bundled, "--force"), "--out", "input")
    assert not (bundled / "journal.jsonl").exists()


@pytest.mark.parametrize("dangling", [True, False])
def test_a_journal_link_is_refused_even_with_force(no_search, tmp_path, dangling):
    out = _folder(tmp_path / "o")
    target = tmp_path / "elsewhere.jsonl"
    if not dangling:
        target.write_text("")
    (out / "journal.jsonl").symlink_to(target)
    assert_error(run("search", *SMALL, "--out", out, "--force"), "--out", "symbolic link")
    assert target.exists() != dangling and (target.read_text() == "" if not dangling else True)


def test_a_journal_ropekit_did_not_write_is_kept_even_with_force(no_search, tmp_path):
    out = _folder(tmp_path / "o", journal__jsonl='{"mine": 1}\n')
    assert_error(run("search", *SMALL, "--out", out, "--force"), "--out", "not a journal of ropekit search")
    assert (out / "journal.jsonl").read_text() == '{"mine": 1}\n'


def test_force_keeps_a_journal_of_the_same_search(tmp_path):
    out, model = tmp_path / "o", small_tiny(tmp_path / "m")
    assert run("search", "--model", model, *SMALL, "--out", out).exit_code == 0
    journal = (out / "journal.jsonl").read_text()
    again = run("search", "--model", model, *SMALL, "--out", out, "--force", "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["journal"]["resumed_from"] == 2  # not one candidate scored again
    assert (out / "journal.jsonl").read_text() == journal


def test_search_json_link_is_replaced_not_written_through(tmp_path):
    out = _folder(tmp_path / "o")
    target = tmp_path / "outside.json"
    target.write_text("mine")
    (out / "search.json").symlink_to(target)
    model = small_tiny(tmp_path / "m")
    assert_error(run("search", "--model", model, *SMALL, "--out", out), "--out", "search.json", "--force")
    result = run("search", "--model", model, *SMALL, "--out", out, "--force")
    assert result.exit_code == 0, result.output
    assert target.read_text() == "mine" and not (out / "search.json").is_symlink()
    assert "long_factor" in json.loads((out / "search.json").read_text())
