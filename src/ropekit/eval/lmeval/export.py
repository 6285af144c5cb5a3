"""ropekit's task samples as an lm-evaluation-harness task folder (:func:`export_lm_eval`; ``ropekit eval tasks
--write-lm-eval DIR``).

lm-eval takes prompts as text and tokenizes them itself, while a ropekit sample is token ids (pieces encoded one by
one and concatenated, so that its length is exact). A sample is therefore written as its ids decoded by the model's
tokenizer, and only if that text re-tokenises to exactly the same ids (no special tokens added, as ropekit encodes).
The pieces are joined only where the common tokenizer families (byte-level BPE behind GPT-2's, Llama 3's or Qwen2's
split rule; SentencePiece BPE as Llama 2, Mistral and Gemma configure it) split text on their own
(:mod:`ropekit.synthetic.base`), so their samples, and the byte tokenizer's, all re-tokenise. A vocabulary that
merges across a space (pieces holding a space after their start) may not: then lm-eval would evaluate other samples
than ropekit's, and :func:`lm_eval_docs` refuses them all
(:class:`PromptMismatch`) rather than write a folder that measures something else.

The folder (:func:`write_folder`)::

    samples.jsonl          one document per question (ropekit_lmeval.py says its fields)
    ropekit_lmeval.py      loading, lm-eval's RULER scoring, one greedy budget per question (lm-eval imports it)
    ropekit_<task>.yaml    one lm-eval task per ropekit task, one metric per length (as lm-eval's ruler tasks), and
                           one per twin question (ropekit_latent_hop_literal.yaml: the literal twins, run beside
                           the group, which leaves them out of its mean)
    ropekit.yaml           the group ``ropekit``: every task, the mean over tasks per length
    tokenizer/             the tokenizer the ids are in (save_pretrained)
    manifest.json          what was written: model, settings, lengths, tasks, and the lm_eval command
"""

from __future__ import annotations

import json
import shlex
import shutil
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ropekit.synthetic.base import Sample

if TYPE_CHECKING:
    from ropekit.eval.protocol import EvalModel
    from ropekit.eval.tasks.run import TaskSettings
    from ropekit.eval.text import TokenizedText

#: lm-eval's name of a ropekit task: the prefix keeps it apart from lm-eval's own ``ruler`` tasks of the same name
TASK_PREFIX = "ropekit_"
#: the lm-eval group of every written task
GROUP = "ropekit"
#: the Python module of the folder (copied from ``ropekit/data/lmeval``)
MODULE = "ropekit_lmeval"
DATA = "samples.jsonl"
MANIFEST = "manifest.json"


class PromptMismatch(ValueError):
    """Some prompt's text re-tokenises to other ids than the sample's, so lm-eval would see another sample."""


def prompt_text(tokenizer: Any, ids: Sequence[int]) -> str:
    """``ids`` as text, special tokens written out (a haystack may hold the end-of-text separator)."""
    return tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)


def retokenised(tokenizer: Any, text: str) -> list[int]:
    """``text`` tokenized as ropekit encodes: no special tokens added."""
    return [int(i) for i in tokenizer(text, add_special_tokens=False)["input_ids"]]


def adds_special_tokens(tokenizer: Any) -> bool:
    """Whether the tokenizer adds tokens (a BOS) by default: lm-eval's ``hf`` backend then needs
    ``add_bos_token=False`` to give the model ropekit's ids."""
    text = "The grass is green."
    return retokenised(tokenizer, text) != [int(i) for i in tokenizer(text)["input_ids"]]


def lm_eval_docs(
    samples: Mapping[tuple[int, str], Sequence[Sample]], tokenizer: Any, *, train_length: int
) -> list[dict[str, Any]]:
    """One lm-eval document per question of every sample, in the order of ``samples`` (length, then task).

    Raises:
        PromptMismatch: the text of some prompt re-tokenises to other ids (every prompt is checked first; the
            message counts them, describes the first, and names the tasks whose prompts all re-tokenise exactly).
    """
    docs: list[dict[str, Any]] = []
    bad: list[tuple[str, int, int, list[int], list[int]]] = []
    for (length, task), group in samples.items():
        for index, sample in enumerate(group):
            for number, question in enumerate(sample.questions):
                ids = [int(i) for i in sample.prompt(number)]
                text = prompt_text(tokenizer, ids)
                back = retokenised(tokenizer, text)
                if back != ids:
                    bad.append((task, length, index, ids, back))
                    continue
                docs.append(
                    {
                        "ropekit_task": task,
                        "max_length": length,
                        "sample": index,
                        "question": number,
                        "input": text,
                        "outputs": list(question.answers),
                        "metric": question.metric,
                        "twin": question.twin,
                        "max_gen_toks": int(question.budget),
                        "length": len(ids),
                        "train_length": train_length,
                    }
                )
    if bad:
        raise PromptMismatch(_mismatch_message(bad, len(docs) + len(bad), tokenizer, {t for _, t in samples}))
    return docs


def _mismatch_message(bad: list, total: int, tokenizer: Any, tasks: set[str]) -> str:
    task, length, index, ids, back = bad[0]
    at = next((k for k, (a, b) in enumerate(zip(ids, back, strict=False)) if a != b), min(len(ids), len(back)))
    shown = prompt_text(tokenizer, ids[max(0, at - 2) : at + 2])
    clean = sorted(tasks - {t for t, *_ in bad})
    return (
        f"the text of {len(bad)} of {total} prompts does not re-tokenise to ropekit's ids with this tokenizer "
        f"(first: {task} sample {index} at {length:,} tokens, from token {at}: {ids[at : at + 3]} in {shown!r} come "
        f"back as {back[at : at + 3]}; ropekit joins pieces tokenised one by one before a space, where the common "
        "tokenizer families split text on their own, and this tokenizer merges across such a join when it reads the "
        "text whole), and lm-eval tokenizes the text, so it "
        f"would evaluate other samples than ropekit's; tasks whose prompts all re-tokenise exactly: "
        f"{', '.join(clean) or 'none'}"
    )


def lm_eval_name(task: str, twin: str = "") -> str:
    """lm-eval's name of a ropekit task's questions (``twin``: of its twin questions, a task of their own that the
    group leaves out: its mean is the task's own questions')."""
    return f"{TASK_PREFIX}{task}" + (f"_{twin}" if twin else "")


def task_twins(tasks: Sequence[str]) -> list[tuple[str, str]]:
    """Every (task, twin) lm-eval task of ``tasks``: each task's own questions (twin ``""``), then its twins'."""
    from ropekit.synthetic.suite import TASKS

    return [(t, twin) for t in tasks for twin in ("", *TASKS.get(t).twins)]


def written_names(tasks: Sequence[str]) -> list[str]:
    """The names :func:`write_folder` writes into the folder for ``tasks`` (checked before the work)."""
    yamls = [f"{lm_eval_name(t, twin)}.yaml" for t, twin in task_twins(tasks)]
    return [DATA, f"{MODULE}.py", f"{GROUP}.yaml", *yamls, "tokenizer", MANIFEST]


def task_yaml(task: str, lengths: Sequence[int], budget: int, twin: str = "") -> str:
    """The lm-eval YAML of one task (or of its ``twin`` questions): lm-eval's ``ruler`` layout (one metric per
    length), ropekit's documents."""
    metrics = "".join(
        f'  - metric: "{n}"\n    aggregation: !function {MODULE}.aggregate\n    higher_is_better: true\n'
        for n in lengths
    )
    return (
        f"# ropekit's {task} samples, written by ropekit eval tasks --write-lm-eval (scoring: {MODULE}.py)\n"
        f"task: {lm_eval_name(task, twin)}\n"
        f"class: !function {MODULE}.RopekitTask\n"
        'dataset_path: ""\ndataset_name: ""\n'
        f"custom_dataset: !function {MODULE}.load_docs\n"
        f"dataset_kwargs:\n  ropekit_task: {task}\n"
        + (f"  twin: {twin}\n" if twin else "")
        + "output_type: generate_until\ntest_split: test\ndoc_to_text: input\ndoc_to_target: outputs\n"
        f"process_results: !function {MODULE}.process_results\n"
        f"metric_list:\n{metrics}"
        "generation_kwargs:\n  do_sample: false\n  temperature: 0.0\n"
        f"  max_gen_toks: {budget}  # the task's largest budget; each question gets its own (max_gen_toks)\n"
        "  until: []\nrepeats: 1\nmetadata:\n  version: 1.0\n"
    )


def group_yaml(tasks: Sequence[str], lengths: Sequence[int]) -> str:
    """The group of every task: the mean over tasks per length, unweighted (ropekit's mean over tasks)."""
    members = "".join(f"  - {TASK_PREFIX}{t}\n" for t in tasks)
    metrics = "".join(f'  - metric: "{n}"\n    aggregation: mean\n    weight_by_size: false\n' for n in lengths)
    return f"group: {GROUP}\ntask:\n{members}aggregate_metric_list:\n{metrics}metadata:\n  version: 1.0\n"


def run_command(folder: Path, model: str, longest: int, bos: bool, twins: Sequence[str] = ()) -> str:
    """The ``lm_eval`` command that runs the folder on the ``hf`` backend (any backend takes the same folder), one
    shell line: every word quoted where the shell would split or expand it (a path with spaces, ``$``, quotes).
    ``twins``: the lm-eval names of the twin questions' tasks, run beside the group."""
    extra = ",add_bos_token=False" if bos else ""
    path = Path(model)
    source = f"{path.parent},gguf_file={path.name}" if path.suffix.lower() == ".gguf" else model  # hf reads GGUF too
    words = ["lm_eval", "--model", "hf", "--model_args", f"pretrained={source},max_length={longest}{extra}"]
    words += ["--include_path", str(folder), "--tasks", ",".join([GROUP, *twins]), "--batch_size", "1"]
    words += ["--log_samples"]
    return shlex.join([*words, "--output_path", "lm-eval-results"])


def write_folder(
    folder: Path, docs: Sequence[dict[str, Any]], tokenizer: Any, manifest: dict[str, Any]
) -> dict[str, Any]:
    """Write the task folder of ``docs`` into ``folder`` (a staging folder: :mod:`ropekit._output` publishes it);
    return the manifest written (``manifest`` and the tasks, lengths and counts)."""
    tasks = list(dict.fromkeys(d["ropekit_task"] for d in docs))
    lengths = sorted({d["max_length"] for d in docs})
    with (folder / DATA).open("w", encoding="utf-8") as out:
        for doc in docs:
            out.write(json.dumps(doc, ensure_ascii=False) + "\n")
    source = resources.files("ropekit").joinpath(f"data/lmeval/{MODULE}.py")
    with resources.as_file(source) as path:
        shutil.copyfile(path, folder / f"{MODULE}.py")
    for task, twin in task_twins(tasks):
        budget = max(d["max_gen_toks"] for d in docs if d["ropekit_task"] == task and d["twin"] == twin)
        (folder / f"{lm_eval_name(task, twin)}.yaml").write_text(task_yaml(task, lengths, budget, twin))
    (folder / f"{GROUP}.yaml").write_text(group_yaml(tasks, lengths))
    tokenizer.save_pretrained(str(folder / "tokenizer"))
    written = {
        **manifest,
        "group": GROUP,
        "tasks": {task: lm_eval_name(task) for task in tasks},
        "twins": {lm_eval_name(task, twin): task for task, twin in task_twins(tasks) if twin},
        "lengths": lengths,
        "questions": len(docs),
        "longest_prompt": max(d["length"] for d in docs),
        "largest_budget": max(d["max_gen_toks"] for d in docs),
    }
    (folder / MANIFEST).write_text(json.dumps(written, indent=1) + "\n")
    return written


def export_lm_eval(
    model: EvalModel,
    settings: TaskSettings,
    folder: str | Path,
    *,
    text: TokenizedText | None = None,
    leave_out: bool = False,
    force: bool = False,
) -> dict[str, Any]:
    """Make every sample of ``settings`` for ``model``'s tokenizer and write them as an lm-eval task folder.

    ``model`` needs no weights: ``load_eval_model(path, tokenizer_only=True)``
    (:func:`ropekit.eval.loader.load_eval_model`). The folder is staged and published whole; files already there
    are replaced only with ``force``.

    Args:
        text: the haystack text, tokenized for ``model`` (default: the shipped held-out text).
        leave_out: leave out the tasks that do not fit the shortest length (the manifest's ``dropped``), as
            :func:`ropekit.eval.checks.prepare_tasks`.

    Returns:
        The manifest written (``manifest.json``): the model, settings, text, tasks, lengths, counts and the
        ``lm_eval`` command that runs the folder (``run``).

    Raises:
        InvalidArgument: about ``model`` (byte-level: lm-eval needs a transformers tokenizer), or the settings
            (:func:`ropekit.eval.checks.prepare_tasks`).
        PromptMismatch: some prompt's text re-tokenises to other ids; nothing is written.
        OSError: the folder cannot be written (an :class:`~ropekit._output.OutputExists` without ``force``).
    """
    from ropekit import __version__
    from ropekit._output import staged_output
    from ropekit.errors import InvalidArgument
    from ropekit.eval.checks import prepare_tasks
    from ropekit.eval.text import shipped_text, tokenize

    if model.byte_level:
        message = f"model {model.name!r} is byte-level; lm-eval tokenizes the prompt text with a transformers tokenizer"
        raise InvalidArgument("model", model.name, message=message)
    tokenizer = model.tokenizer  # a transformers tokenizer: the model is not byte-level
    tokens = text if text is not None else tokenize(shipped_text(), model.encode, model.separator)
    prepared = prepare_tasks(model, settings, tokens, leave_out=leave_out)  # none fits: the first task's refusal
    docs = lm_eval_docs(prepared.samples, tokenizer, train_length=model.train_length)
    settings_tasks = list(dict.fromkeys(task for _, task in prepared.samples))
    bos = adds_special_tokens(tokenizer)
    longest = max(d["length"] + d["max_gen_toks"] for d in docs)
    manifest = {
        "ropekit_version": __version__,
        "model": model.name,
        "tokenizer": type(tokenizer).__name__,
        "train_length": model.train_length,
        "settings": {k: prepared.settings.to_dict()[k] for k in ("samples", "seed", "depth", "threshold")},
        "eval_text": tokens.source,
        "eval_text_sha256": tokens.sha256,
        "dropped": prepared.dropped,
        "tokenizer_adds_special_tokens": bos,
        "run": run_command(
            Path(folder), model.name, longest, bos, [lm_eval_name(t, w) for t, w in task_twins(settings_tasks) if w]
        ),
    }
    with staged_output(folder, force=force) as staged:
        return write_folder(staged, docs, tokenizer, manifest)
