"""``ropekit search`` resumed: a journal is keyed on the model (its real path and a fingerprint of its config and
weights), the text's contents and every setting, so a resume with another model under the same name, an edited text
or another setting is refused naming what changed; the same inputs resume, and the budget is recorded as run.

Oracle: which inputs changed is known by construction (two random tiny models of one shape saved under one relative
path; one byte of the text edited); the resumed count is the journal's line count."""

from __future__ import annotations

import json

import pytest

from helpers.cli import assert_error, run
from helpers.search import SMALL, small_tiny


def _stopped(out):
    """A finished search made a stopped one: its journal kept, search.json removed."""
    (out / "search.json").unlink()
    return len((out / "journal.jsonl").read_text().splitlines()) - 1


def test_another_model_under_the_same_path_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    small_tiny(tmp_path / "m", seed=1)
    first = run("search", "--model", "m", *SMALL, "--out", "o")
    assert first.exit_code == 0, first.output
    assert _stopped(tmp_path / "o") == 2
    small_tiny(tmp_path / "m", seed=2)  # another model saved over the folder: same config, other weights
    line = assert_error(run("search", "--model", "m", *SMALL, "--out", "o"), "--out", "model", "weights", "--force")
    assert "another search" in line
    # the same relative path typed from another folder names another model
    (tmp_path / "elsewhere").mkdir()
    small_tiny(tmp_path / "elsewhere" / "m", seed=1)
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert_error(run("search", "--model", "m", *SMALL, "--out", tmp_path / "o"), "another file or folder")


def test_same_inputs_resume_and_an_edited_text_is_refused(tmp_path):
    from ropekit.model.corpus import heldout_bytes

    text = tmp_path / "text.txt"
    text.write_bytes(heldout_bytes()[:20_000])
    model = small_tiny(tmp_path / "m", seed=1)
    args = ("search", "--model", model, *SMALL, "--text", text, "--out", tmp_path / "o")
    assert run(*args).exit_code == 0
    _stopped(tmp_path / "o")
    resumed = run(*args, "--json")
    assert resumed.exit_code == 0, resumed.output
    assert json.loads(resumed.stdout)["journal"]["resumed_from"] == 2
    _stopped(tmp_path / "o")
    text.write_bytes(b"X" + heldout_bytes()[1:20_000])  # one byte edited, same name and size
    assert_error(run(*args), "--out", "text", "sha256")
    assert_error(run(*args[:-2], "--samples", "2", "--out", tmp_path / "o"), "samples: 1 → 2")


@pytest.mark.parametrize("flag", ["--evaluations", "--budget"])
def test_a_resume_with_another_budget_records_what_ran(tmp_path, flag):
    """A count other than the journal's continues the search to that count; search.json and its command say it."""
    model = small_tiny(tmp_path / "m", seed=1)
    base = ("search", "--model", model, "--target-length", "3x", "--samples", "1", "--heldout-samples", "1")
    first = run(*base, "--evaluations", "2", "--out", tmp_path / "o")
    assert first.exit_code == 0, first.output
    _stopped(tmp_path / "o")
    budget = ("--evaluations", "3") if flag == "--evaluations" else ("--budget", "0.001s")
    resumed = run(*base, *budget, "--out", tmp_path / "o", "--json")
    assert resumed.exit_code == 0, resumed.output
    found = json.loads(resumed.stdout)
    count = 3 if flag == "--evaluations" else 1  # a budget shorter than one candidate buys one
    assert found["evaluations"] == len(found["trace"]) == found["plan"]["evaluations"] == count
    assert f"--evaluations {count} " in found["command"] and "--budget" not in found["command"]
    assert found["journal"]["resumed_from"] == 2


def test_the_cli_and_the_api_write_the_same_search_json(tmp_path):
    """``ropekit search`` and ``ropekit.search(...)`` run one library call: the same search.json on the same inputs
    (but the time taken and the output folder named in the command)."""
    import ropekit

    model = small_tiny(tmp_path / "m")
    assert run("search", "--model", model, *SMALL, "--out", tmp_path / "cli").exit_code == 0
    returned = ropekit.search(
        model, out=tmp_path / "api", target_multiple=3, evaluations=2, samples=1, heldout_samples=1
    )
    cli, api = (json.loads((tmp_path / name / "search.json").read_text()) for name in ("cli", "api"))
    assert json.loads(json.dumps(returned)) == api
    for found, name in ((cli, "cli"), (api, "api")):
        assert found.pop("seconds") > 0
        found["command"] = found["command"].replace(str(tmp_path / name), "OUT")
    assert cli == api
