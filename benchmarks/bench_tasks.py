"""Cost of the task evaluation against a plain prefill, as ratios from one run.

Two ratios, each over the same samples and timed in interleaved rounds (median of rounds):

- one sample (prefill of its context, then its question with the teacher-forced answer, then greedy decoding where
  the model departs from the answer) against one prefill of the sample's whole length;
- four questions about one haystack (``niah_multikey_1`` with four keys, each asked in its own question after a
  single prefill) against one prefill of that length.

Usage::

    python benchmarks/bench_tasks.py                                 # the bundled tiny model at 1x (256 bytes)
    python benchmarks/bench_tasks.py --model path/to/SmolLM2.gguf --length 4096 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from ropekit.eval.loader import load_eval_model
from ropekit.eval.tasks.decode import greedy_answer, make_decoder
from ropekit.eval.tasks.run import model_pieces, stop_tokens
from ropekit.eval.text import shipped_text, tokenize
from ropekit.synthetic.suite import make_sample


def prefill(model, ids) -> None:
    decoder = make_decoder(model)
    decoder.extend(torch.from_numpy(ids), keep=1)


def answer_all(model, sample, stop) -> int:
    decoder = make_decoder(model)
    decoder.extend(torch.from_numpy(sample.context), keep=0)
    decoded = 0
    for question in sample.questions:
        answer = greedy_answer(decoder, question.ids, question.target, question.budget, stop)
        decoded += 0 if answer.shortcut else len(answer.tokens)
    return decoded


def timed(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--length", type=int, default=None, help="tokens (default: the training length)")
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    model = load_eval_model(args.model)
    length = args.length or model.train_length
    text = tokenize(shipped_text(), model.encode, model.separator).ids.numpy()
    pieces = model_pieces(model)
    stop = stop_tokens(model)
    cases = {
        "one sample (niah_single_2)": [
            make_sample("niah_single_2", length, pieces.encode, text=text, index=i, pieces=pieces)
            for i in range(args.samples)
        ],
        "four questions, one haystack": [
            make_sample("niah_multikey_1", length, pieces.encode, text=text, index=i, pieces=pieces, asks=4)
            for i in range(args.samples)
        ],
    }
    print(f"model {args.model} ({model.describe().get('kind')}), length {length}, {args.samples} samples per case")
    print("| case | questions | decoded tokens | time (s) | prefill of the length (s) | ratio |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, samples in cases.items():
        ratios, times, prefills, decoded = [], [], [], 0
        for round_index in range(args.rounds):
            for sample in samples:
                full = sample.prompt(0)  # context and a question: the sample's length
                t_prefill = timed(lambda full=full: prefill(model, full))
                start = time.perf_counter()
                count = answer_all(model, sample, stop)
                t_sample = time.perf_counter() - start
                decoded += count if round_index == 0 else 0
                ratios.append(t_sample / t_prefill)
                times.append(t_sample)
                prefills.append(t_prefill)
        print(
            f"| {name} | {len(samples[0].questions)} | {decoded} | {statistics.median(times):.4f} | "
            f"{statistics.median(prefills):.4f} | {statistics.median(ratios):.2f} |"
        )


if __name__ == "__main__":
    main()
