"""SmolLM2's own tokenizer (byte-level BPE, GPT-2's split rule; the tokenizer only, no model forward): every task's
samples at 1k and 4k tokens re-tokenise exactly, so the lm-eval export writes them all."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytestmark = [pytest.mark.real, pytest.mark.hf]

LENGTHS = (1024, 4096)


@pytest.fixture(scope="module")
def smollm2_tokenizer(smollm2_path):
    from ropekit.integrations.hf.load import load_tokenizer

    return load_tokenizer(smollm2_path)


@pytest.fixture(scope="module")
def samples(smollm2_tokenizer):
    """Two samples of every task at each length, as ``eval tasks`` makes them (its pieces, the shipped text)."""
    from ropekit.eval.model_support import tokenizer_ids
    from ropekit.eval.tasks.run import model_pieces
    from ropekit.eval.text import shipped_text, tokenize
    from ropekit.synthetic.suite import TASKS, make_sample

    model = SimpleNamespace(
        encode=lambda b: tokenizer_ids(smollm2_tokenizer, b),
        detokenize=lambda ids: smollm2_tokenizer.decode(ids, skip_special_tokens=True),
    )
    text = tokenize(shipped_text(), model.encode, [smollm2_tokenizer.eos_token_id]).ids.numpy()
    pieces = model_pieces(model)
    return {
        (length, task): [make_sample(task, length, pieces.encode, text=text, index=i, pieces=pieces) for i in range(2)]
        for length in LENGTHS
        for task in TASKS
    }


def test_every_task_re_tokenises_with_smollm2s_tokenizer(smollm2_tokenizer, samples):
    tokenizer = smollm2_tokenizer

    def again(ids) -> list[int]:  # the text read whole, as lm-eval and a text-only server read it
        text = tokenizer.decode(ids.tolist(), skip_special_tokens=False, clean_up_tokenization_spaces=False)
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    for (length, task), group in samples.items():
        for sample in group:
            assert sample.length == length, (task, length)
            for number, question in enumerate(sample.questions):
                assert again(sample.prompt(number)) == sample.prompt(number).tolist(), (task, length)
                assert again(question.target) == question.target.tolist(), (task, length)


def test_the_lm_eval_export_takes_every_task(smollm2_tokenizer, samples):
    from ropekit.eval.lmeval.export import lm_eval_docs

    docs = lm_eval_docs(samples, smollm2_tokenizer, train_length=8192)  # raises PromptMismatch on any mismatch
    assert {d["ropekit_task"] for d in docs} == {task for _, task in samples}
