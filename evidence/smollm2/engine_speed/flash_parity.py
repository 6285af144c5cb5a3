"""llama.cpp's flash attention against the llama.cpp parity tolerances, on SmolLM2's Q4_1 file at 1x: the checks of
``tests/eval/backends/test_llamacpp.py`` (logits, answers, perplexity against the torch path on the dequantised
float32 weights), run for llama.cpp with flash attention off and on, printing the numbers.

- logits: positions 100-299 of the ids 1000..1299, mean and max |llama.cpp - torch| (tolerance: mean 0.25, max 4.0);
- answers: 2 samples each of niah_single_1, niah_multikey_1 and vt at 1,024 tokens: questions whose greedy tokens
  agree with the torch path's over the canonical answer's length, and whose scores agree;
- perplexity: 1,024 tokens of the shipped held-out text in 512-token windows, the ratio to the torch path's
  (tolerance 1%).

PYTHONPATH=src OMP_NUM_THREADS=1 nice -n 19 python evidence/smollm2/engine_speed/flash_parity.py
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import torch


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests"))
    from conftest import smollm2_gguf
    from ropekit.eval.backends.llamacpp import LlamaCppEvalModel
    from ropekit.eval.loader import load_eval_model
    from ropekit.eval.perplexity import perplexity_at
    from ropekit.eval.sweep import evaluation_text
    from ropekit.eval.tasks.decode import greedy_answer
    from ropekit.eval.tasks.run import TaskSettings, make_samples
    from ropekit.eval.tasks.scoring import score

    torch.set_num_threads(1)
    path = smollm2_gguf()
    exact_model = load_eval_model(path)
    base = LlamaCppEvalModel(path, threads=1)
    ids = torch.arange(1000, 1300)
    exact = exact_model.decoder().extend(ids, keep=200).float()
    text, _ = evaluation_text(exact_model)
    ppl_exact = perplexity_at(exact_model, text, 512, exact_model.train_length, max_tokens=1024).perplexity
    settings = TaskSettings(
        methods=("none",), tasks=("niah_single_1", "niah_multikey_1", "vt"), lengths=(1024,), samples=2
    )
    samples = make_samples(exact_model, settings)
    stop = exact_model.stop_tokens
    for flash in (False, True):
        engine = copy.copy(base)
        engine.flash_attn, engine.llm, engine._made = flash, None, None
        diff = (engine.decoder().extend(ids, keep=200) - exact).abs()
        ppl = perplexity_at(engine, text, 512, engine.train_length, max_tokens=1024).perplexity
        same_tokens = same_score = questions = 0
        for group in samples.values():
            for sample in group:
                decoders = [m.decoder() for m in (engine, exact_model)]
                for decoder in decoders:
                    decoder.extend(torch.from_numpy(sample.context), keep=0)
                for q in sample.questions:
                    answers = [greedy_answer(d, q.ids, q.target, q.budget, stop) for d in decoders]
                    span = max(1, len(q.target))
                    same_tokens += answers[0].tokens[:span] == answers[1].tokens[:span]
                    scores = [
                        score(m.detokenize(a.tokens), q.answers, q.metric)
                        for m, a in zip((engine, exact_model), answers, strict=True)
                    ]
                    same_score += scores[0] == scores[1]
                    questions += 1
        print(
            f"flash_attn={'on' if flash else 'off'}: logits mean {diff.mean():.3f} max {diff.max():.2f}; "
            f"perplexity {ppl:.3f} against {ppl_exact:.3f} ({100 * (ppl / ppl_exact - 1):+.2f}%); "
            f"answers: same tokens {same_tokens}/{questions}, same score {same_score}/{questions}",
            flush=True,
        )
        engine.close()


if __name__ == "__main__":
    main()
