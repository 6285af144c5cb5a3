"""SmolLM2-135M (GGUF, dequantised): samples exact in its own tokenizer's tokens, and the fast path (shared prefill,
shortcut, cached decoding) giving exactly transformers' ``generate(do_sample=False)`` tokens."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytestmark = [pytest.mark.real, pytest.mark.hf]


def test_smollm2_samples_and_fast_path(smollm2):
    from ropekit.eval.tasks.decode import greedy_answer
    from ropekit.eval.tasks.run import model_pieces
    from ropekit.eval.text import shipped_text, tokenize
    from ropekit.synthetic.suite import make_sample

    text = tokenize(shipped_text(), smollm2.encode, smollm2.separator).ids.numpy()
    pieces = model_pieces(smollm2)
    sample = make_sample("niah_multikey_1", 192, pieces.encode, text=text, index=0, pieces=pieces, asks=2)
    assert sample.length == 192
    assert all(a in smollm2.detokenize(sample.context.tolist()) for q in sample.questions for a in q.answers)
    decoder = smollm2.decoder()
    decoder.extend(torch.from_numpy(sample.context), keep=0)
    stop = smollm2.stop_tokens
    for question in sample.questions:  # two questions after one prefill
        prompt = torch.from_numpy(np.concatenate([sample.context, question.ids]))[None]
        with torch.no_grad():
            out = smollm2.model.generate(
                prompt, attention_mask=torch.ones_like(prompt), do_sample=False, max_new_tokens=6,
                pad_token_id=min(stop) if stop else 0,
            )  # fmt: skip
        expected = [t for t in out[0, prompt.shape[1] :].tolist() if t not in stop]
        for target in (np.zeros(0, dtype=np.int64), question.target):
            answer = greedy_answer(decoder, question.ids, target, 6, stop)
            assert answer.tokens == expected[: len(answer.tokens)]
            assert answer.shortcut or answer.tokens == expected


def test_every_task_builds_at_128k_with_smollm2s_tokenizer(smollm2, deadline):
    """Every task at 128k tokens of a real BPE tokenizer, in seconds: common-word extraction needs about 24,000
    distinct words there (the two-syllable pool of 5,625 hung from 32k on); samples exact in length, word lists
    whose answers are their most frequent words (counted in the decoded text)."""
    import time
    from collections import Counter

    from ropekit.eval.tasks.run import model_pieces
    from ropekit.eval.text import shipped_text, tokenize
    from ropekit.synthetic.suite import TASKS, make_sample

    text = tokenize(shipped_text(), smollm2.encode, smollm2.separator).ids.numpy()
    text = np.tile(text, 131072 // len(text) + 1)  # the shipped text is about 50k tokens: repeated for 128k haystacks
    pieces = model_pieces(smollm2)
    started = time.perf_counter()
    with deadline(300):  # the tokenizer's per-call cost dominates: 18 s on 2 busy cores
        samples = {task: make_sample(task, 131072, pieces.encode, text=text, pieces=pieces) for task in TASKS}
    print(f"every task at 128k: {time.perf_counter() - started:.1f} s")
    assert all(sample.length == 131072 for sample in samples.values())
    for task in ("cwe", "fwe"):
        answers = samples[task].questions[0].answers
        ranked = Counter(smollm2.detokenize(samples[task].context.tolist()).split("List:")[-1].split()).most_common()
        assert sorted(w for w, _ in ranked[: len(answers)]) == sorted(answers)
        assert ranked[len(answers) - 1][1] > ranked[len(answers)][1]
