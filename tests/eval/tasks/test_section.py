"""The report's task section from hand-made rows: heatmap, effective-length table, unlearned tasks named."""

from __future__ import annotations

import pytest

from ropekit.eval.tasks.run import TaskResult, TaskSettings
from ropekit.eval.tasks.scoring import cell
from ropekit.eval.tasks.section import task_findings, task_section


def _result() -> TaskResult:
    settings = TaskSettings(methods=("none", "yarn"), tasks=("niah_single_1", "cwe"), samples=4)
    rows = []
    scores = {  # (method, length, task) -> correct of 4
        ("none", 256, "niah_single_1"): 4, ("none", 512, "niah_single_1"): 1,
        ("yarn", 256, "niah_single_1"): 4, ("yarn", 512, "niah_single_1"): 4,
    }  # fmt: skip
    for (method, length, task), correct in scores.items():
        rows.append({"method": method, "length": length, "task": task, **cell([1.0] * correct + [0.0] * (4 - correct))})
    for method in ("none", "yarn"):
        for length in (256, 512):
            rows.append({"method": method, "length": length, "task": "cwe", **cell([0.0] * 4)})
    context = {"train_length": 256, "settings": settings.to_dict()}
    return TaskResult(context, rows)


def test_section(tmp_path):
    result = _result()
    summary = result.summary()
    assert summary["not_learned"] == ["cwe"]
    learned = {e["method"]: e for e in summary["effective"] if e["subset"] == "learned"}
    assert learned["none"]["effective_length"] == 256 and learned["yarn"]["effective_length"] == 512
    every = {e["method"]: e for e in summary["effective"] if e["subset"] == "all"}
    assert every["yarn"]["effective_length"] is None  # RULER's mean over all tasks: 50% < 85.6%
    html = "\n".join(task_section(result, tmp_path))
    assert "Not learned by this model" in html and "cwe" in html and "4 samples per" in html
    assert (tmp_path / "tasks.png").stat().st_size > 1000 and (tmp_path / "tasks.json").is_file()
    findings = task_findings(result)
    assert any("not learned" in line and "cwe" in line for line in findings)
    assert any("yarn (learned tasks" in line and ": 512;" in line for line in findings)


def _rows(scores: dict[tuple[str, int, str], int]) -> list[dict]:
    return [
        {"method": m, "length": n, "task": t, **cell([1.0] * c + [0.0] * (4 - c))} for (m, n, t), c in scores.items()
    ]


def test_without_none_nothing_is_blamed_on_the_model(tmp_path):
    """ReRoPE failing every task at the training length is the method's failure: without ``none`` no task is called
    not learned, there is no relative threshold, and every output says why."""
    settings = TaskSettings(methods=("rerope",), tasks=("niah_single_1", "cwe"), samples=4)
    scores = {("rerope", n, t): 0 for n in (256, 512) for t in ("niah_single_1", "cwe")}
    result = TaskResult({"train_length": 256, "settings": settings.to_dict()}, _rows(scores))
    summary = result.summary()
    assert summary["own_method"] is None and summary["not_learned"] is None and "add none" in summary["note"]
    assert [e["subset"] for e in summary["effective"]] == ["all"]
    assert not any(key.startswith("relative") for e in summary["effective"] for key in e)
    findings = task_findings(result)
    assert findings[0].startswith("Not judged: no 'none' among the methods") and "not learned by" not in str(findings)
    html = "\n".join(task_section(result, tmp_path))
    assert "Not judged" in html and "Not learned by this model" not in html


def test_the_relative_threshold_is_nones_whatever_the_order():
    """``--methods yarn,none``: yarn's relative threshold is 85.6% of none's mean at 1x (3 of 4 = 75%), not of yarn's."""
    settings = TaskSettings(methods=("yarn", "none"), tasks=("vt",), samples=4)
    scores = {("yarn", 256, "vt"): 4, ("yarn", 512, "vt"): 3, ("none", 256, "vt"): 3, ("none", 512, "vt"): 0}
    summary = TaskResult({"train_length": 256, "settings": settings.to_dict()}, _rows(scores)).summary()
    effective = {e["method"]: e for e in summary["effective"] if e["subset"] == "all"}
    assert summary["own_method"] == "none" and summary["not_learned"] == []
    assert effective["yarn"]["relative_threshold"] == pytest.approx(85.6 * 0.75)
    assert effective["yarn"]["relative_effective_length"] == 512  # 75% >= 64.2%
    assert effective["none"]["relative_threshold"] == pytest.approx(85.6 * 0.75)


def test_the_section_shows_nolimas_length_and_the_literal_gap(tmp_path):
    """NoLiMa's effective length in the table and the findings; the latent/literal table where twins ran."""
    from ropekit.eval.tasks.scoring import paired_difference

    settings = TaskSettings(methods=("none",), tasks=("latent_hop",), samples=4)
    rows = []
    for length, own, literal in ((256, [1, 1, 0, 0], [1, 1, 1, 1]), (512, [1, 0, 0, 0], [1, 1, 1, 0])):
        twin = {**cell(literal), "gap": paired_difference(own, literal)}
        rows.append({"method": "none", "length": length, "task": "latent_hop", **cell(own), "twins": {"literal": twin}})
    result = TaskResult({"train_length": 256, "settings": settings.to_dict()}, rows)
    html = "\n".join(task_section(result, tmp_path))
    assert "NoLiMa's 85%" in html and "Latent against literal" in html and "+50 [" in html and "+50 [" in html
    findings = task_findings(result)
    assert any("relative to its own score at the shortest length (NoLiMa: >= 42.5%): 256" in f for f in findings)
    assert any(f.startswith("none at 512 (latent_hop): 25%") and "+50 points" in f for f in findings)
