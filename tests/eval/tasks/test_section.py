"""The report's task section from hand-made rows: heatmap, effective-length table, unlearned tasks named."""

from __future__ import annotations

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
