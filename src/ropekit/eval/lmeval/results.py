"""lm-eval's per-sample output (``--log_samples``) read into ropekit's task table (``ropekit eval effective-length``).

lm-eval writes one ``samples_<task>_<date>.jsonl`` per task, each line a sample: its document, the model's output
and the sample's metrics. Both the tasks ``eval tasks --write-lm-eval`` writes and lm-eval's own ``ruler`` tasks
follow lm-eval's RULER convention: a sample's document holds its length (``max_length``) and the sample scores the
metric named by that length (``-1`` under the others). Each sample's score is taken as lm-eval computed it; the rows
per (run, length, task) then get ropekit's Wilson intervals, and the :class:`~ropekit.eval.tasks.run.TaskResult`
gives the means, the effective lengths at the threshold and relative to the model's own score, and the heatmap, as
``eval tasks`` does.

A run is labelled like a method (``none=RESULTS``); the relative effective length needs the run named ``none``
(ropekit's own-score convention), so a single unlabelled run is named ``none``: the model as served.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ropekit.eval.tasks.limits import RULER_THRESHOLD
from ropekit.eval.tasks.run import OWN_METHOD, TaskResult
from ropekit.eval.tasks.scoring import cell
from ropekit.synthetic.suite import TASKS

#: lm-eval's ``ruler`` tasks and ropekit's names for them (its QA tasks have no ropekit counterpart)
RULER_TASKS = {
    **{name: name for name in TASKS.names() if name.startswith("niah_")},
    "ruler_vt": "vt",
    "ruler_cwe": "cwe",
    "ruler_fwe": "fwe",
    "ruler_qa_squad": "qa_squad",
    "ruler_qa_hotpot": "qa_hotpot",
}
#: lm-eval's file name for one task's samples (``EvaluationTracker.save_results_samples``)
SAMPLES_FILE = re.compile(r"^samples_(?P<task>.+)_(?P<date>\d{4}-\d{2}-\d{2}T[\d.\-]+)\.jsonl$")
#: what every lm-eval sample record holds
RECORD_KEYS = ("doc_id", "doc", "filtered_resps")


class ResultsError(ValueError):
    """A results path that is not lm-eval's ``--log_samples`` output of tasks this command knows."""


def sample_files(path: Path) -> list[Path]:
    """``path`` itself (a samples file) or every ``samples_*.jsonl`` under the folder ``path``.

    Raises:
        ResultsError: no such path, or a folder without samples files.
    """
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise ResultsError(f"{str(path)!r} does not exist")
    found = sorted(path.rglob("samples_*.jsonl"))
    if not found:
        raise ResultsError(
            f"{str(path)!r} holds no lm-eval samples file (samples_<task>_<date>.jsonl: run lm_eval "
            "with --log_samples --output_path)"
        )
    return found


def _record(line: str, where: str) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        record = None
    if not isinstance(record, dict) or any(key not in record for key in RECORD_KEYS):
        raise ResultsError(
            f"{where} is not an lm-eval --log_samples record (a JSON object with doc_id, doc, filtered_resps)"
        )
    if not isinstance(record["doc"], dict) or "max_length" not in record["doc"]:
        raise ResultsError(
            f"{where}: its doc has no max_length; only RULER-style tasks (ropekit's or lm-eval's ruler) "
            "have a length to read"
        )
    length = record["doc"]["max_length"]
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise ResultsError(f"{where}: its doc's max_length must be a positive number of tokens, got {length!r}")
    return record


def _score(record: dict[str, Any], where: str) -> float:
    value = record.get(str(record["doc"]["max_length"]))
    if isinstance(value, bool) or not isinstance(value, int | float) or not (0.0 <= value <= 1.0):
        raise ResultsError(
            f"{where}: no score in [0, 1] under its length's metric {str(record['doc']['max_length'])!r} "
            f"(got {value!r})"
        )
    return float(value)


def _task_of(path: Path, record: dict[str, Any]) -> str:
    """ropekit's name of the record's task: the document's own (tasks ropekit wrote), else lm-eval's ruler name."""
    if isinstance(record["doc"].get("ropekit_task"), str):
        return record["doc"]["ropekit_task"]
    match = SAMPLES_FILE.match(path.name)
    name = match["task"] if match else path.stem
    if name not in RULER_TASKS:
        raise ResultsError(
            f"{str(path)!r}: unknown task {name!r}; only the tasks of ropekit eval tasks --write-lm-eval and "
            f"lm-eval's ruler tasks ({', '.join(RULER_TASKS)}) can be read"
        )
    return RULER_TASKS[name]


def read_samples(path: Path) -> tuple[str, dict[int, list[float]], int | None]:
    """One samples file: ``(task, {length: scores}, train_length or None)`` (the training length ropekit wrote).

    Raises:
        ResultsError: an empty file, a line that is not an lm-eval record, a record without a positive length or a
            score, a sample twice (same ``doc_id`` and length), or samples of two tasks.
    """
    scores: dict[int, list[float]] = {}
    task, train = None, set()
    first_line: dict[tuple[str, int], int] = {}  # (doc_id, length) -> the line that holds it
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            where = f"{str(path)!r} line {number}"
            record = _record(line, where)
            own = _task_of(path, record)
            if task is not None and own != task:
                raise ResultsError(
                    f"{where} is a sample of task {own}, the lines before of task {task}; lm-eval writes one "
                    "samples file per task"
                )
            task = own
            length = record["doc"]["max_length"]
            key = (json.dumps(record["doc_id"]), length)
            if key in first_line:
                raise ResultsError(
                    f"{where} repeats sample doc_id {record['doc_id']!r} at length {length} (line "
                    f"{first_line[key]}); each sample must be counted once: give one lm-eval run per file"
                )
            first_line[key] = number
            scores.setdefault(length, []).append(_score(record, where))
            train.add(record["doc"].get("train_length"))
    if task is None:
        raise ResultsError(f"{str(path)!r} holds no sample")
    trains = {t for t in train if isinstance(t, int)}
    return task, scores, (trains.pop() if len(trains) == 1 else None)


def parse_runs(items: Sequence[str]) -> list[tuple[str, Path]]:
    """``RESULTS`` arguments as ``(label, path)``: ``METHOD=PATH`` or a bare ``PATH`` (only alone: named ``none``).

    Raises:
        ResultsError: several bare paths, a label given twice, an empty label or path.
    """
    runs = []
    for item in items:
        label, sep, rest = item.partition("=")
        if sep and label and "/" not in label and not Path(item).exists():
            runs.append((label, Path(rest)))
        else:
            runs.append(("", Path(item)))
    if any(not label for label, _ in runs) and len(runs) > 1:
        raise ResultsError("several results: name each run as METHOD=PATH (e.g. none=plain/ yarn=yarn/)")
    runs = [(label or OWN_METHOD, path) for label, path in runs]
    labels = [label for label, _ in runs]
    if len(set(labels)) < len(labels):
        raise ResultsError(f"each run needs its own name, got {', '.join(labels)}")
    return runs


def read_runs(
    runs: Sequence[tuple[str, Path]], *, train_length: int | None = None, threshold: float = RULER_THRESHOLD
) -> TaskResult:
    """Every run's samples as one :class:`TaskResult`: a row per (run, length, task) with its Wilson interval.

    ``train_length``: the model's training length (the relative effective length's reference); default: the one
    ropekit wrote into its documents, else the shortest length evaluated.

    Raises:
        ResultsError: a bad path or file (:func:`read_samples`), one task twice in a run, or a bad ``train_length``.
    """
    rows, files, written = [], [], set()
    for label, path in runs:
        seen: dict[str, Path] = {}
        for file in sample_files(path):
            task, scores, train = read_samples(file)
            if task in seen:
                raise ResultsError(
                    f"run {label!r} holds task {task} twice ({str(seen[task])!r} and {str(file)!r}); "
                    "give one lm-eval run per results path"
                )
            seen[task] = file
            files.append({"run": label, "task": task, "file": str(file)})
            written.add(train)
            family = TASKS.get(task).family if task in TASKS else "qa"
            for length, values in sorted(scores.items()):
                rows.append({"method": label, "length": length, "task": task, "family": family, **cell(values)})
    order = {name: i for i, name in enumerate(dict.fromkeys([*TASKS.names(), *RULER_TASKS.values()]))}
    labels = [label for label, _ in runs]
    rows.sort(key=lambda r: (labels.index(r["method"]), r["length"], order.get(r["task"], len(order)), r["task"]))
    lengths = sorted({r["length"] for r in rows})
    source = "--train-length"
    if train_length is None:
        known = {t for t in written if t is not None}
        train_length, source = (
            (known.pop(), "ropekit's samples") if len(known) == 1 else (lengths[0], "the shortest length")
        )
    if isinstance(train_length, bool) or not isinstance(train_length, int) or train_length < 1:
        raise ResultsError(f"train_length must be a positive number of tokens, got {train_length!r}")
    if not (isinstance(threshold, int | float) and math.isfinite(threshold) and 0 < threshold <= 100):
        raise ResultsError(f"threshold must be in (0, 100] (percent), got {threshold!r}")
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    context = {
        "source": "lm-eval --log_samples",
        "files": files,
        "train_length": train_length,
        "train_length_from": source,
        "settings": {
            "threshold": threshold,
            "tasks": tasks,
            "lengths": lengths,
            "samples": None,
            "seed": None,
            "depth": None,
        },
    }
    return TaskResult(context, rows)
