"""The folder's Python part as lm-eval runs it: its scoring is lm-eval's own RULER scoring and ropekit's, and lm-eval
builds one request per question with the question's text and its own greedy budget (no model needed)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from helpers.lmeval_run import cli
from ropekit.eval.tasks.scoring import score as ropekit_score

pytestmark = pytest.mark.hf
lm_eval = pytest.importorskip("lm_eval")

OUTPUTS = [
    "1234567",
    " The number is 1234567.\n",
    "\x00\x1f  abc 1234567 def  ",
    "ABC, Def and ghi",
    "abc def",
    "",
    "nothing here",
    "a\tb\nc 76",
]
REFERENCES = [["1234567"], ["abc", "def", "ghi"], ["76"], ["a b"]]


@pytest.fixture(scope="module")
def folder(byte_model, tmp_path_factory):
    folder = tmp_path_factory.mktemp("module") / "tasks"
    result = cli(
        "eval", "tasks", "--model", byte_model, "--tasks", "niah_single_1,vt", "--lengths", "256,320",
        "--samples", "2", "--write-lm-eval", folder,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return folder


@pytest.fixture(scope="module")
def module(folder):
    spec = importlib.util.spec_from_file_location("ropekit_lmeval_under_test", folder / "ropekit_lmeval.py")
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def test_scores_are_lm_evals_ruler_scores_and_ropekits(module, monkeypatch):
    from lm_eval.tasks.ruler import common_utils

    monkeypatch.setattr(common_utils, "DEFAULT_SEQ_LENGTHS", [256, 320])
    for output in OUTPUTS:
        for refs in REFERENCES:
            doc = {"max_length": 320, "outputs": refs, "metric": "all"}
            ours = module.process_results(doc, [output])
            assert ours == common_utils.process_results(doc, [output])
            assert ours["320"] == pytest.approx(ropekit_score(output.strip(), refs, "all")) and ours["256"] == -1
            part = module.process_results({**doc, "metric": "part"}, [output])["320"]
            assert part == ropekit_score(output, refs, "part")
    values = [-1, 0.5, 1.0, -1, 0.0]
    assert module.aggregate(values) == common_utils.aggregate_metrics(values) == 0.5
    assert module.aggregate([-1, -1]) == common_utils.aggregate_metrics([-1, -1]) == -1


def test_lm_eval_asks_each_question_as_written_with_its_own_budget(folder):
    from lm_eval.tasks import TaskManager

    docs = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
    manager = TaskManager(include_path=str(folder), include_defaults=False)
    loaded = manager.load(["ropekit"])
    tasks = loaded["tasks"]
    assert loaded["group_map"] == {"ropekit": ["ropekit_niah_single_1", "ropekit_vt"]}
    assert sorted(tasks) == ["ropekit_niah_single_1", "ropekit_vt"]
    for name, task in tasks.items():
        task.build_all_requests(rank=0, world_size=1)
        mine = [d for d in docs if f"ropekit_{d['ropekit_task']}" == name]
        assert [r.doc for r in task.instances] == mine
        for request, doc in zip(task.instances, mine, strict=True):
            context, options = request.arguments[:2]
            assert context == doc["input"] and options["max_gen_toks"] == doc["max_gen_toks"]
            assert options["do_sample"] is False and options["until"] == []
