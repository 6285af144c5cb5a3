"""``eval effective-length``: lm-eval's ``--log_samples`` files of its own ``ruler`` tasks, written by lm-eval's own
code (its RULER scoring, its sample writer), read back as ropekit's table: per task x length with Wilson intervals
(checked against the closed form), the effective lengths, the heatmap; bad input is one line."""

from __future__ import annotations

import json
import math

import pytest

from helpers.lmeval_run import cli

#: ruler task -> (references, [right answers out of 4 at 256, at 512])
PLAN = {
    "niah_single_1": (["1234567"], [4, 2]),
    "ruler_vt": (["abc", "def"], [4, 1]),
    "ruler_cwe": (["one", "two", "three"], [3, 0]),
    "ruler_qa_squad": (["paris"], [4, 3]),
}


def wilson(successes: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval (z = 1.96, as ropekit), from its closed form (Wilson 1927)."""
    p = successes / n
    middle = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, middle - half), min(1.0, middle + half)


def write_ruler_run(folder, monkeypatch, plan=PLAN, lengths=(256, 512)):
    """lm-eval's per-sample files of ``plan``'s ruler tasks: documents shaped as lm-eval's ruler generators make them,
    scored by lm-eval's own ``process_results``, written by lm-eval's own ``EvaluationTracker``."""
    pytest.importorskip("lm_eval")
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks.ruler import common_utils

    monkeypatch.setattr(common_utils, "DEFAULT_SEQ_LENGTHS", list(lengths))
    tracker = EvaluationTracker(output_path=str(folder))
    tracker.general_config_tracker.model_name_sanitized = "model"
    written = {}
    for task, (refs, right) in plan.items():
        samples = []
        for length, count in zip(lengths, right, strict=True):
            for i in range(4):
                output = " ".join(refs) if i < count else "no idea"
                doc = {"index": i, "input": "…", "outputs": refs, "length": length - 9, "max_length": length,
                       "gen_prefix": "Answer:"}  # fmt: skip
                metrics = common_utils.process_results(doc, [output])
                samples.append(
                    {"doc_id": len(samples), "doc": doc, "target": refs, "arguments": [("…", {"max_gen_toks": 30})],
                     "resps": [[output]], "filtered_resps": [output], "filter": "none", "metrics": list(metrics),
                     "doc_hash": "", "prompt_hash": "", "target_hash": "", **metrics}
                )  # fmt: skip
        written[task] = samples
    tracker.save_results_aggregated(results={}, samples=written)  # as lm_eval does: results_<date>.json beside
    for task, samples in written.items():
        tracker.save_results_samples(task_name=task, samples=samples)
    return folder


def test_lm_evals_ruler_output_gives_ropekits_table(tmp_path, monkeypatch):
    run = write_ruler_run(tmp_path / "run", monkeypatch)
    result = cli("eval", "effective-length", run, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    rows = {(r["task"], r["length"]): r for r in data["rows"]}
    names = {"niah_single_1": "niah_single_1", "ruler_vt": "vt", "ruler_cwe": "cwe", "ruler_qa_squad": "qa_squad"}
    assert [r["task"] for r in data["rows"][:4]] == list(names.values())  # as ropekit: by length, then task
    for task, (_, right) in PLAN.items():
        for length, count in zip((256, 512), right, strict=True):
            row = rows[names[task], length]
            assert row["method"] == "none" and row["samples"] == 4 and row["score"] == count / 4
            assert row["ci95"] == pytest.approx(wilson(count, 4), abs=1e-12)
    assert rows["qa_squad", 256]["family"] == "qa" and rows["vt", 256]["family"] == "tracing"
    summary = data["summary"]
    means = {m["length"]: m for m in summary["means"] if m["subset"] == "all"}
    assert means[256]["score"] == pytest.approx((4 + 4 + 3 + 4) / 16) and means[512]["score"] == pytest.approx(6 / 16)
    assert means[256]["ci95"] == pytest.approx(wilson(15, 16), abs=1e-12)
    effective = next(e for e in summary["effective"] if e["subset"] == "all")
    # 93.75% at 256 (the training length: the shortest), 37.5% at 512: RULER's 85.6% holds at 256 only
    assert effective["effective_length"] == 256 and effective["relative_effective_length"] == 256
    assert effective["relative_threshold"] == pytest.approx(85.6 * 15 / 16)
    assert data["context"]["train_length"] == 256 and data["context"]["train_length_from"] == "the shortest length"
    assert summary["not_learned"] == []


def test_two_runs_and_the_heatmap(tmp_path, monkeypatch):
    plain = write_ruler_run(tmp_path / "plain", monkeypatch)
    better = {task: (refs, [4, 4]) for task, (refs, _) in PLAN.items()}
    extended = write_ruler_run(tmp_path / "yarn", monkeypatch, plan=better)
    out = tmp_path / "table"
    result = cli("eval", "effective-length", f"none={plain}", f"yarn={extended}", "--train-length", "256", "--out", out)
    assert result.exit_code == 0, result.output
    assert "none: score per task" in result.output and "yarn: score per task" in result.output
    assert "Effective length with yarn (all tasks, mean >= 85.6%): 512" in result.output
    assert (out / "tasks.png").stat().st_size > 1000
    data = json.loads((out / "tasks.json").read_text())
    assert {r["method"] for r in data["rows"]} == {"none", "yarn"}
    assert cli("eval", "effective-length", f"none={plain}", "--out", out).exit_code == 2  # tasks.json is there
    assert cli("eval", "effective-length", f"none={plain}", "--out", out, "--force").exit_code == 0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"results": {}}\n', "is not an lm-eval --log_samples record"),
        ("not json\n", "is not an lm-eval --log_samples record"),
        ('{"doc_id": 0, "doc": {"query": "x"}, "filtered_resps": ["a"]}\n', "its doc has no max_length"),
        ('{"doc_id": 0, "doc": {"max_length": 256}, "filtered_resps": ["a"], "256": 2.0}\n', "no score in [0, 1]"),
        ("", "holds no sample"),
        ('{"doc_id": 0, "doc": {"max_length": true}, "filtered_resps": ["a"], "True": 1.0}\n', "max_length must be"),
        ('{"doc_id": 0, "doc": {"max_length": -256}, "filtered_resps": ["a"], "-256": 1.0}\n', "max_length must be"),
        ('{"doc_id": 0, "doc": {"max_length": 0}, "filtered_resps": ["a"], "0": 1.0}\n', "max_length must be"),
    ],
)
def test_a_file_that_is_not_lm_evals_is_one_line(tmp_path, content, message):
    path = tmp_path / "samples_niah_single_1_2026-01-01T00-00-00.000001.jsonl"
    path.write_text(content)
    result = cli("eval", "effective-length", path)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and message in lines[0], result.output


def test_an_unknown_task_and_bad_paths_are_one_line(tmp_path):
    record = {"doc_id": 0, "doc": {"max_length": 256}, "filtered_resps": ["a"], "256": 1.0}
    path = tmp_path / "samples_hellaswag_2026-01-01T00-00-00.000001.jsonl"
    path.write_text(json.dumps(record) + "\n")
    (tmp_path / "empty").mkdir()
    cases = [
        ((path,), "unknown task 'hellaswag'"),
        ((tmp_path / "nope",), "does not exist"),
        ((tmp_path / "empty",), "holds no lm-eval samples file"),
        ((path, path), "name each run as METHOD=PATH"),
        ((f"a={path}", f"a={path}"), "each run needs its own name"),
        ((path, "--threshold", "0"), "--threshold"),
        ((path, "--train-length", "0"), "--train-length"),
    ]
    for args, message in cases:
        result = cli("eval", "effective-length", *args)
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert result.exit_code == 2 and len(lines) == 1 and message in lines[0], (args, result.output)


def _sample(doc_id, length: int, score: float, task: str | None = None) -> str:
    doc = {"max_length": length, **({"ropekit_task": task} if task else {})}
    return json.dumps({"doc_id": doc_id, "doc": doc, "filtered_resps": ["a"], str(length): score}) + "\n"


def test_a_sample_given_twice_is_refused_not_counted_twice(tmp_path):
    path = tmp_path / "samples_niah_single_1_2026-01-01T00-00-00.000001.jsonl"
    path.write_text(_sample(0, 256, 1.0) + _sample(1, 256, 0.0))
    data = json.loads(cli("eval", "effective-length", path, "--json").output)
    assert [(r["samples"], r["score"]) for r in data["rows"]] == [(2, 0.5)]  # one right of two
    path.write_text(_sample(0, 256, 1.0) + _sample(1, 256, 0.0) + _sample(0, 256, 1.0))  # a line pasted twice
    result = cli("eval", "effective-length", path)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert "line 3 repeats sample doc_id 0 at length 256 (line 1)" in lines[0]
    path.write_text(_sample(0, 256, 1.0) + _sample(0, 512, 0.0))  # one document at two lengths is two samples
    data = json.loads(cli("eval", "effective-length", path, "--json").output)
    assert [(r["length"], r["samples"]) for r in data["rows"]] == [(256, 1), (512, 1)]


def test_a_file_of_two_tasks_is_refused_not_filed_under_the_first(tmp_path):
    path = tmp_path / "samples_ropekit_2026-01-01T00-00-00.000001.jsonl"
    path.write_text(_sample(0, 256, 1.0, "niah_single_1") + _sample(1, 256, 0.0, "vt"))
    result = cli("eval", "effective-length", path)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert "line 2 is a sample of task vt, the lines before of task niah_single_1" in lines[0]
