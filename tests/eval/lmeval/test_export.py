"""``eval tasks --write-lm-eval``: the folder holds ropekit's very samples as text that re-tokenises to their ids,
one lm-eval task per ropekit task (every task with a tokenizer of each of the five common families); a tokenizer
whose vocabulary merges across a space, which would re-tokenise them otherwise, is refused in one line."""

from __future__ import annotations

import json

import pytest

from helpers.families import FAMILIES
from helpers.lmeval_run import cli
from ropekit.eval.lmeval.export import GROUP, TASK_PREFIX

pytestmark = pytest.mark.hf

ARGS = ("--tasks", "niah_single_1,niah_multikey_2,vt,cwe", "--lengths", "256,320", "--samples", "2")


def docs_of(folder):
    return [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def exported(byte_model, tmp_path_factory):
    folder = tmp_path_factory.mktemp("export") / "tasks"
    result = cli("eval", "tasks", "--model", byte_model, *ARGS, "--write-lm-eval", folder)
    assert result.exit_code == 0, result.output
    return folder


def assert_token_for_token(folder, model_path, tasks: tuple[str, ...]) -> None:
    """The folder's documents, tokenized by the tokenizer it holds, are ropekit's samples' ids."""
    from transformers import AutoTokenizer

    from ropekit.eval.hf_model import HFEvalModel
    from ropekit.eval.tasks.run import TaskSettings, make_samples

    model = HFEvalModel(model_path)
    tokenizer = AutoTokenizer.from_pretrained(folder / "tokenizer")
    settings = TaskSettings(methods=("none",), tasks=tasks, lengths=(256, 320), samples=2)
    samples = make_samples(model, settings)
    docs = docs_of(folder)
    expected = [
        (task, length, i, q, s.prompt(q).tolist(), list(s.questions[q].answers), s.questions[q].budget)
        for (length, task), group in samples.items()
        for i, s in enumerate(group)
        for q in range(len(s.questions))
    ]
    got = [
        (
            d["ropekit_task"],
            d["max_length"],
            d["sample"],
            d["question"],
            tokenizer(d["input"], add_special_tokens=False)["input_ids"],
            d["outputs"],
            d["max_gen_toks"],
        )
        for d in docs
    ]
    assert got == expected
    assert all(d["train_length"] == 512 and d["length"] == len(e[4]) for d, e in zip(docs, expected, strict=True))


def test_the_documents_are_ropekits_samples_token_for_token(exported, byte_model):
    assert_token_for_token(exported, byte_model, ("niah_single_1", "niah_multikey_2", "vt", "cwe"))


def test_a_byte_level_bpe_tokenizer_exports_every_task(merging_model, tmp_path):
    """Pieces joined where byte-level BPE splits text on its own: every task's text re-tokenises to its ids."""
    from ropekit.synthetic.suite import TASKS

    folder = tmp_path / "tasks"
    args = ("--tasks", "all", "--lengths", "256,320", "--samples", "2")
    result = cli("eval", "tasks", "--model", merging_model, *args, "--write-lm-eval", folder)
    assert result.exit_code == 0, result.output
    assert_token_for_token(folder, merging_model, tuple(TASKS))


@pytest.mark.parametrize("family", FAMILIES)
def test_every_tokenizer_family_exports_every_task(family, family_model, tmp_path):
    """GPT-2's, Llama 3's and Qwen2's split rules, Llama 2's and Gemma's SentencePiece: every task's text at 1k and
    4k tokens re-tokenises to its ids, so the export takes them all."""
    from ropekit.synthetic.suite import TASKS

    folder, model = tmp_path / "tasks", family_model(family)
    args = ("--tasks", "all", "--lengths", "1k,4k", "--samples", "2")
    result = cli("eval", "tasks", "--model", model, *args, "--write-lm-eval", folder)
    assert result.exit_code == 0, result.output
    assert {d["ropekit_task"] for d in docs_of(folder)} == set(TASKS)
    assert {d["max_length"] for d in docs_of(folder)} == {1024, 4096}


def test_one_yaml_per_task_and_the_group(exported):
    manifest = json.loads((exported / "manifest.json").read_text())
    tasks = ["niah_single_1", "niah_multikey_2", "vt", "cwe"]
    assert manifest["tasks"] == {t: TASK_PREFIX + t for t in tasks} and manifest["lengths"] == [256, 320]
    assert manifest["questions"] == 16 and not manifest["tokenizer_adds_special_tokens"]
    assert f"--include_path {exported} --tasks {GROUP}" in manifest["run"]
    for task in tasks:
        text = (exported / f"{TASK_PREFIX}{task}.yaml").read_text()
        budget = max(d["max_gen_toks"] for d in docs_of(exported) if d["ropekit_task"] == task)
        assert f"task: {TASK_PREFIX}{task}\n" in text and f"ropekit_task: {task}\n" in text
        assert 'metric: "256"' in text and 'metric: "320"' in text and f"max_gen_toks: {budget} " in text
    group = (exported / f"{GROUP}.yaml").read_text()
    assert all(f"  - {TASK_PREFIX}{t}\n" in group for t in tasks) and "weight_by_size: false" in group
    assert (exported / "ropekit_lmeval.py").is_file() and (exported / "tokenizer" / "tokenizer.json").is_file()


def test_a_tokenizer_that_merges_across_the_joins_is_refused_and_nothing_written(spanning_model, tmp_path):
    folder = tmp_path / "tasks"
    result = cli("eval", "tasks", "--model", spanning_model, *ARGS, "--write-lm-eval", folder)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert lines[0].startswith("error: --write-lm-eval: the text of ") and "does not re-tokenise" in lines[0]
    assert lines[0].endswith("nothing was written") and not folder.exists()


def test_an_existing_folder_needs_force(exported, byte_model):
    before = (exported / "samples.jsonl").read_text()
    result = cli("eval", "tasks", "--model", byte_model, *ARGS, "--write-lm-eval", exported)
    assert result.exit_code == 2 and "--force" in result.output and "samples.jsonl" in result.output
    result = cli("eval", "tasks", "--model", byte_model, *ARGS, "--write-lm-eval", exported, "--force")
    assert result.exit_code == 0, result.output
    assert (exported / "samples.jsonl").read_text() == before  # the same samples: a pure function of the seed


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--model", "tiny"), "needs a model with a transformers tokenizer"),
        (("--out", "{tmp}/out"), "evaluates nothing; leave out --out"),
        (("--engine", "llamacpp"), "leave --engine and --device-map at their defaults"),
        (("--tasks", "qa_1"), "--tasks"),
    ],
)
def test_bad_input_is_one_line(args, message, tmp_path, byte_model):
    args = tuple(a.replace("{tmp}", str(tmp_path)) for a in args)
    model = () if "--model" in args else ("--model", byte_model)
    result = cli("eval", "tasks", *model, "--samples", "1", *args, "--write-lm-eval", tmp_path / "tasks")
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and message in lines[0], result.output
    assert not (tmp_path / "tasks").exists()


def test_the_printed_lm_eval_command_is_one_shell_line_for_any_path(tmp_path):
    """A model and a folder whose paths hold spaces, quotes and ``$``: the shell splits the line back into the very
    words lm_eval needs (the oracle: ``shlex.split``, as a POSIX shell reads it)."""
    import shlex

    from ropekit.eval.lmeval.export import run_command

    folder = tmp_path / "my tasks $HOME"
    model = "/models/it's a model/model.gguf"
    words = shlex.split(run_command(folder, model, 600, True))
    assert words[words.index("--include_path") + 1] == str(folder)
    assert words[words.index("--model_args") + 1] == (
        "pretrained=/models/it's a model,gguf_file=model.gguf,max_length=600,add_bos_token=False"
    )
    assert words[0] == "lm_eval" and words[words.index("--tasks") + 1] == GROUP
