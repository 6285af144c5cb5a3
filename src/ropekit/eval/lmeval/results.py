"""lm-eval's per-sample output (``--log_samples``) read into ropekit's task table (``ropekit eval effective-length``).

lm-eval writes one ``samples_<task>_<date>.jsonl`` per task, each line a sample: its document, the model's output
and the sample's metrics. Both the tasks ``eval tasks --write-lm-eval`` writes and lm-eval's own ``ruler`` tasks
follow lm-eval's RULER convention: a sample's document holds its length (``max_length``) and the sample scores the
metric named by that length (``-1`` under the others). Each sample's score is taken as lm-eval computed it; the rows
per (run, length, task) then get ropekit's Wilson intervals, and the :class:`~ropekit.eval.tasks.run.TaskResult`
gives the means, the effective lengths at the threshold and relative to the model's own score, and the heatmap, as
``eval tasks`` does.

A task's twin questions (the latent hops' literal twins: ``ropekit_latent_hop_literal``) are read beside the task's
own rows, paired by sample, with the gap and its interval, as ``eval tasks`` gives them.

A run is labelled like a method (``none=RESULTS``); the relative effective length needs the run named ``none``
(ropekit's own-score convention), so a single unlabelled run is named ``none``: the model as served.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ropekit.eval.tasks.limits import RULER_THRESHOLD
from ropekit.eval.tasks.run import OWN_METHOD, TaskResult
from ropekit.eval.tasks.scoring import cell, paired_difference
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


@dataclass
class SamplesFile:
    """What one samples file holds.

    Attributes:
        task: ropekit's name of its task.
        twin: ``""`` for the task's own questions, else the twin label (``literal``) of the questions it holds.
        scores: per length, ``(sample, score)`` in file order (``sample``: ropekit's sample index, else ``doc_id``).
        metric: the questions' metric as ropekit wrote it (``prefix`` for a long answer; ``all`` otherwise).
        train_length: the training length ropekit wrote (``None``: none, or several).
    """

    task: str
    twin: str
    scores: dict[int, list[tuple[Any, float]]]
    metric: str
    train_length: int | None


def read_samples(path: Path) -> SamplesFile:
    """One samples file (:class:`SamplesFile`).

    Raises:
        ResultsError: an empty file, a line that is not an lm-eval record, a record without a positive length or a
            score, a sample twice (same ``doc_id`` and length), or samples of two tasks.
    """
    scores: dict[int, list[tuple[Any, float]]] = {}
    task, train, twins, metrics = None, set(), set(), set()
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
            sample = record["doc"].get("sample", json.dumps(record["doc_id"]))
            scores.setdefault(length, []).append((sample, _score(record, where)))
            train.add(record["doc"].get("train_length"))
            twins.add(str(record["doc"].get("twin") or ""))
            metrics.add(str(record["doc"].get("metric") or "all"))
    if task is None:
        raise ResultsError(f"{str(path)!r} holds no sample")
    if len(twins) > 1:
        raise ResultsError(f"{str(path)!r} mixes a task's own questions with its twins'; ropekit writes them apart")
    trains = {t for t in train if isinstance(t, int)}
    metric = "prefix" if metrics == {"prefix"} else "all"
    return SamplesFile(task, twins.pop(), scores, metric, trains.pop() if len(trains) == 1 else None)


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
        seen: dict[tuple[str, str], Path] = {}
        twins: list[SamplesFile] = []
        owns: dict[str, SamplesFile] = {}
        for file in sample_files(path):
            read = read_samples(file)
            key = (read.task, read.twin)
            if key in seen:
                name = read.task + (f" ({read.twin})" if read.twin else "")
                raise ResultsError(
                    f"run {label!r} holds task {name} twice ({str(seen[key])!r} and {str(file)!r}); "
                    "give one lm-eval run per results path"
                )
            seen[key] = file
            files.append({"run": label, "task": read.task, "twin": read.twin, "file": str(file)})
            written.add(read.train_length)
            if read.twin:
                twins.append(read)
                continue
            owns[read.task] = read
            family = TASKS.get(read.task).family if read.task in TASKS else "qa"
            for length, pairs in sorted(read.scores.items()):
                values = [s for _, s in pairs]
                row = {"method": label, "length": length, "task": read.task, "family": family, **cell(values)}
                if read.metric == "prefix":
                    row["exact"] = cell([float(s == 1.0) for s in values])
                rows.append(row)
        for read in twins:
            _attach_twin(rows, label, read, owns.get(read.task))
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


def _attach_twin(rows: list[dict[str, Any]], label: str, read: SamplesFile, own: SamplesFile | None) -> None:
    """Put the twin questions of ``read`` beside their task's own rows of run ``label`` (read from ``own``): the
    twin's cell and its gap, paired by sample (:func:`~ropekit.eval.tasks.scoring.paired_difference`).

    Raises:
        ResultsError: the run has no results of the task's own questions at a length, or other samples there.
    """
    for length, pairs in sorted(read.scores.items()):
        theirs = dict(own.scores.get(length, [])) if own is not None else {}
        mine = dict(pairs)
        if sorted(theirs, key=str) != sorted(mine, key=str):
            raise ResultsError(
                f"run {label!r}: the {read.twin} twins of {read.task} at length {length} need the task's own "
                "questions on the same samples in the same run (run the group and the twin tasks together: the "
                "manifest's command)"
            )
        row = next(r for r in rows if (r["method"], r["length"], r["task"]) == (label, length, read.task))
        order = sorted(mine, key=str)
        try:
            gap = paired_difference([theirs[i] for i in order], [mine[i] for i in order])
        except ValueError as error:
            raise ResultsError(f"run {label!r}: {read.task} at length {length}: {error}") from None
        row.setdefault("twins", {})[read.twin] = {**cell([mine[i] for i in order]), "gap": gap}
