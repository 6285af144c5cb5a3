"""lm-eval's ``hf`` backend on the folder ``--write-lm-eval`` wrote for a small random Llama built in code, with the
byte tokenizer and with a Llama-3-style tokenizer (byte-level BPE behind Llama 3's split rule): lm-eval asks ropekit's very ids, its answers are transformers' greedy ``generate`` on those ids and
ropekit's own decoded answers, its scores are ropekit's own run's, and ``effective-length`` on its output gives
ropekit's own table."""

from __future__ import annotations

import json

import pytest

from helpers.lmeval_run import cli, run_lm_eval

pytestmark = [pytest.mark.hf, pytest.mark.usefixtures("quiet_transformers")]
pytest.importorskip("lm_eval")

TASKS = ("niah_single_1", "cwe")
LENGTHS = (256, 512)


@pytest.fixture(scope="module")
def settings():
    from ropekit.eval.tasks.run import TaskSettings

    return TaskSettings(methods=("none",), tasks=TASKS, lengths=LENGTHS, samples=2)


@pytest.fixture(scope="module", params=["byte", pytest.param("llama3", marks=pytest.mark.slow)])
def model_path(request, byte_model, family_model):
    return byte_model if request.param == "byte" else family_model(request.param)


@pytest.fixture(scope="module")
def own(model_path, settings):
    """ropekit's own run on the same samples: the model, its samples and its result."""
    from ropekit.eval.hf_model import HFEvalModel
    from ropekit.eval.tasks.run import make_samples, run_tasks

    model = HFEvalModel(model_path)
    samples = make_samples(model, settings)
    return model, samples, run_tasks(model, settings, samples=samples)


@pytest.fixture(scope="module")
def lm_eval_run(model_path, tmp_path_factory):
    folder = tmp_path_factory.mktemp("hf") / "tasks"
    lengths = ",".join(map(str, LENGTHS))
    result = cli("eval", "tasks", "--model", model_path, "--tasks", ",".join(TASKS), "--lengths", lengths,
                 "--samples", "2", "--write-lm-eval", folder)  # fmt: skip
    assert result.exit_code == 0, result.output
    out = folder.parent / "out"
    return out, run_lm_eval(model_path, folder, out, ["ropekit"])


def logged(out):
    """lm-eval's per-sample files under ``out``, by (task, length, sample index)."""
    records = [json.loads(line) for path in sorted(out.rglob("samples_*.jsonl")) for line in path.open()]
    return {(r["doc"]["ropekit_task"], r["doc"]["max_length"], r["doc"]["sample"]): r for r in records}


def test_lm_eval_answers_ropekits_ids_greedily(lm_eval_run, own):
    import torch

    from ropekit.eval.tasks.decode import greedy_answer

    model, samples, _ = own
    out, _ = lm_eval_run
    answers = logged(out)
    assert len(answers) == sum(len(group) for group in samples.values())
    tokenizer = model.tokenizer
    for (length, task), group in samples.items():
        for index, sample in enumerate(group):
            record = answers[task, length, index]
            question = sample.questions[0]
            ids = sample.prompt(0).tolist()
            context, options = record["arguments"]["gen_args_0"]["arg_0"], record["arguments"]["gen_args_0"]["arg_1"]
            assert tokenizer(context, add_special_tokens=False)["input_ids"] == ids
            assert options["max_gen_toks"] == question.budget
            generated = model.model.generate(
                torch.tensor([ids]),
                do_sample=False,
                max_new_tokens=question.budget,
                pad_token_id=tokenizer.eos_token_id,
            )[0, len(ids) :]
            expected = tokenizer.decode(generated.tolist(), skip_special_tokens=True)
            assert record["resps"][0][0] == expected  # transformers' own greedy generation on ropekit's ids
            decoder = model.decoder()
            decoder.extend(torch.from_numpy(sample.context), keep=0)
            answer = greedy_answer(decoder, question.ids, question.target, question.budget, model.stop_tokens)
            if not answer.shortcut:  # a right answer stops at the canonical answer, lm-eval's runs on
                assert record["resps"][0][0] == model.detokenize(answer.tokens)


def test_lm_eval_scores_are_ropekits_own(lm_eval_run, own):
    _, results = lm_eval_run
    rows = own[2].rows
    for row in rows:
        assert results["results"][f"ropekit_{row['task']}"][f"{row['length']},none"] == pytest.approx(row["score"])
    for length in LENGTHS:
        mean = sum(r["score"] for r in rows if r["length"] == length) / len(TASKS)
        assert results["results"]["ropekit"][f"{length},none"] == pytest.approx(mean)


def test_effective_length_of_lm_evals_output_is_ropekits_table(lm_eval_run, own):
    out, _ = lm_eval_run
    result = cli("eval", "effective-length", out, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    mine = own[2].to_dict()
    keys = ("method", "length", "task", "family", "samples", "score", "ci95")
    assert [{k: r[k] for k in keys} for r in data["rows"]] == [{k: r[k] for k in keys} for r in mine["rows"]]
    assert data["summary"] == mine["summary"]
    assert data["context"]["train_length"] == mine["context"]["train_length"] == 512
