"""The tasks beyond literal retrieval through lm-eval: the literal twins exported as a task of their own beside the
group, the long answer scored by its correct prefix in the folder's module as in ropekit, and both read back by
``eval effective-length`` (the twins paired with their task's own questions by sample)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from helpers.lmeval_run import cli
from ropekit.eval.tasks.scoring import paired_difference
from ropekit.eval.tasks.scoring import score as ropekit_score

LINES = ["The door of Ba leads to Ko.", "The door of Ko leads to Mi."]


@pytest.fixture(scope="module")
def folder(byte_model, tmp_path_factory):
    pytest.importorskip("transformers")
    folder = tmp_path_factory.mktemp("beyond") / "tasks"
    args = ("--tasks", "latent_hop,path_traversal", "--lengths", "256,320", "--samples", "2")
    result = cli("eval", "tasks", "--model", byte_model, *args, "--write-lm-eval", folder)
    assert result.exit_code == 0, result.output
    return folder


@pytest.mark.hf
def test_the_literal_twins_are_a_task_of_their_own_beside_the_group(folder):
    docs = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
    twins = [d for d in docs if d["twin"]]
    assert len(twins) == 4 and all(d["ropekit_task"] == "latent_hop" and d["twin"] == "literal" for d in twins)
    assert {d["metric"] for d in docs if d["ropekit_task"] == "path_traversal"} == {"prefix"}
    text = (folder / "ropekit_latent_hop_literal.yaml").read_text()
    assert "task: ropekit_latent_hop_literal\n" in text and "  ropekit_task: latent_hop\n  twin: literal\n" in text
    assert "ropekit_latent_hop_literal" not in (folder / "ropekit.yaml").read_text()  # not in the group's mean
    manifest = json.loads((folder / "manifest.json").read_text())
    assert "--tasks ropekit,ropekit_latent_hop_literal " in manifest["run"]
    assert manifest["twins"] == {"ropekit_latent_hop_literal": "latent_hop"}


@pytest.mark.hf
def test_the_folders_module_scores_a_long_answer_as_ropekit_does(folder):
    pytest.importorskip("lm_eval")
    spec = importlib.util.spec_from_file_location("ropekit_lmeval_beyond", folder / "ropekit_lmeval.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    doc = {"max_length": 320, "outputs": LINES, "metric": "prefix"}
    for output in ("\n".join(LINES), " \n" + LINES[0] + " \nThe door of Ko leads to Su.", "", LINES[1]):
        got = module.process_results(doc, [output])
        assert got == {"256": -1.0, "320": ropekit_score(output, LINES, "prefix")}
    literal = module.load_docs("latent_hop", twin="literal")["test"]
    assert len(literal) == 4 and set(literal["twin"]) == {"literal"}
    assert set(module.load_docs("latent_hop")["test"]["twin"]) == {""}


def record(sample: int, length: int, score: float, task: str, twin: str = "", metric: str = "all") -> str:
    doc = {"max_length": length, "ropekit_task": task, "sample": sample, "twin": twin, "metric": metric}
    return json.dumps({"doc_id": sample, "doc": doc, "filtered_resps": ["a"], str(length): score}) + "\n"


def test_effective_length_reads_the_twins_and_the_exact_answers(tmp_path):
    own, literal = [0, 1, 0, 0, 1], [1, 1, 1, 0, 0]
    (tmp_path / "samples_ropekit_latent_hop_2026-01-01T00-00-00.1.jsonl").write_text(
        "".join(record(i, 256, s, "latent_hop") for i, s in enumerate(own))
    )
    (tmp_path / "samples_ropekit_latent_hop_literal_2026-01-01T00-00-00.1.jsonl").write_text(
        "".join(record(i, 256, s, "latent_hop", "literal") for i, s in reversed(list(enumerate(literal))))
    )
    (tmp_path / "samples_ropekit_path_traversal_2026-01-01T00-00-00.1.jsonl").write_text(
        "".join(record(i, 256, s, "path_traversal", metric="prefix") for i, s in enumerate([1.0, 0.5, 1.0, 0.0]))
    )
    result = cli("eval", "effective-length", tmp_path, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    rows = {r["task"]: r for r in data["rows"]}
    assert set(rows) == {"latent_hop", "path_traversal"}  # the twins are beside their task, not a task
    assert rows["latent_hop"]["score"] == pytest.approx(0.4)
    assert rows["latent_hop"]["twins"]["literal"]["gap"] == paired_difference(own, literal)  # paired by sample
    assert rows["path_traversal"]["exact"]["score"] == 0.5 and rows["path_traversal"]["score"] == 0.625
    assert data["summary"]["twins"][0]["gap"] == paired_difference(own, literal)
    printed = cli("eval", "effective-length", tmp_path)
    assert printed.exit_code == 0 and "literal" in printed.output and "exact 50" in printed.output


def test_twins_without_their_tasks_own_questions_are_one_line(tmp_path):
    (tmp_path / "samples_ropekit_latent_hop_literal_2026-01-01T00-00-00.1.jsonl").write_text(
        record(0, 256, 1, "latent_hop", "literal")
    )
    result = cli("eval", "effective-length", tmp_path)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert "the literal twins of latent_hop at length 256 need the task's own questions" in lines[0]
